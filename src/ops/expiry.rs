//! Key expiry: EXPIRE and friends, TTL, PERSIST, SET with an expiry.
//!
//! An expired key is absent at once: every lookup checks the expiry (and
//! deletes the key on the spot). Keys that are never touched again are
//! deleted, and their pages reclaimed, by the background sweeper
//! ([`Db::sweep_expired`]), which finds them through in-memory regions of
//! the earliest expiry (nothing is stored for it).

use crate::db::Db;
use crate::error::Result;

/// When [`Db::expire_at`] may change a key's expiry (Redis's NX/XX/GT/LT).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ExpireCondition {
    /// Always.
    #[default]
    Always,
    /// Only if the key has no expiry (NX).
    IfNone,
    /// Only if the key has an expiry (XX).
    IfSome,
    /// Only if the new expiry is later than the current one; a key without
    /// expiry counts as expiring never (GT).
    IfLater,
    /// Only if the new expiry is earlier than the current one; a key without
    /// expiry counts as expiring never (LT).
    IfEarlier,
}

/// A key's expiry state, as Redis's TTL distinguishes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    /// The key does not exist (TTL -2).
    Missing,
    /// The key exists and never expires (TTL -1).
    Never,
    /// The key expires at this Unix time in milliseconds.
    At(u64),
}

/// What [`Db::set_with_expiry`] does with the key's expiry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetExpiry {
    /// Remove any expiry (plain SET).
    Clear,
    /// Keep the key's current expiry (KEEPTTL).
    Keep,
    /// Expire at this Unix time in milliseconds (EX, PX, EXAT, PXAT).
    At(u64),
}

impl Db {
    /// The current time by the database's clock ([`crate::Config::clock`]),
    /// Unix milliseconds.
    #[must_use]
    pub fn now_ms(&self) -> u64 {
        self.engine.now_ms()
    }

    /// Sets `key` to expire at Unix time `at_ms` (Redis PEXPIREAT; EXPIRE and
    /// the others convert to it) if `condition` allows. A time not after now
    /// deletes the key at once. Returns whether the expiry was set (or the
    /// key deleted): `false` if the key does not exist or the condition
    /// refused.
    ///
    /// # Errors
    /// [`crate::Error::Corrupted`] metadata; [`crate::Error::Poisoned`].
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// use bitsled::{ExpireCondition, Expiry};
    /// let db = bitsled::Db::open(dir.path())?;
    /// db.setbit(b"checkin:20260101", 7, true)?;
    /// let in_30_days = db.now_ms() + 30 * 86_400_000;
    /// assert!(db.expire_at(b"checkin:20260101", in_30_days, ExpireCondition::Always)?);
    /// assert_eq!(db.expiry(b"checkin:20260101")?, Expiry::At(in_30_days));
    /// assert!(db.persist(b"checkin:20260101")?);
    /// assert_eq!(db.expiry(b"checkin:20260101")?, Expiry::Never);
    /// # Ok(()) }
    /// ```
    pub fn expire_at(&self, key: &[u8], at_ms: u64, condition: ExpireCondition) -> Result<bool> {
        self.engine.write(self.index, &[key], |tx| {
            let Some(mut meta) = tx.meta(key)? else { return Ok(false) };
            let current = (meta.expire_at_ms != 0).then_some(meta.expire_at_ms);
            let allowed = match condition {
                ExpireCondition::Always => true,
                ExpireCondition::IfNone => current.is_none(),
                ExpireCondition::IfSome => current.is_some(),
                ExpireCondition::IfLater => current.is_some_and(|c| at_ms > c),
                ExpireCondition::IfEarlier => current.is_none_or(|c| at_ms < c),
            };
            if !allowed {
                return Ok(false);
            }
            if at_ms <= tx.now_ms() {
                tx.delete(key)?;
                return Ok(true);
            }
            meta.expire_at_ms = at_ms;
            tx.set(key, &meta)?;
            Ok(true)
        })
    }

    /// Removes the expiry of `key` (Redis PERSIST). Returns whether it had one.
    ///
    /// # Errors
    /// [`crate::Error::Corrupted`] metadata; [`crate::Error::Poisoned`].
    pub fn persist(&self, key: &[u8]) -> Result<bool> {
        self.engine.write(self.index, &[key], |tx| match tx.meta(key)? {
            Some(mut meta) if meta.expire_at_ms != 0 => {
                meta.expire_at_ms = 0;
                tx.set(key, &meta)?;
                Ok(true)
            }
            _ => Ok(false),
        })
    }

    /// The expiry state of `key` (Redis PTTL/PEXPIRETIME in one).
    ///
    /// # Errors
    /// [`crate::Error::Corrupted`] metadata.
    pub fn expiry(&self, key: &[u8]) -> Result<Expiry> {
        Ok(match self.engine.read_untouched(self.index, &[key], |tx| tx.meta(key))? {
            None => Expiry::Missing,
            Some(m) if m.expire_at_ms == 0 => Expiry::Never,
            Some(m) => Expiry::At(m.expire_at_ms),
        })
    }
}
