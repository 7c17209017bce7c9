//! SET and its relatives, each one atomic step: conditional SET (NX/XX),
//! SET ... GET (GETSET), multi-key SET (MSET/MSETNX), GETEX, and
//! read-modify-write of short values (INCR and friends).
//!
//! A value of at most 64 bytes is written inline within the transaction;
//! a longer one is built under a fresh id first and published by one
//! transaction (see the engine's builds).

use crate::db::Db;
use crate::engine::{Build, Kind, Meta, NewValue, PageStream, WriteTx, INLINE_MAX};
use crate::error::{Error, Result};
use crate::geometry::PAGE_LEN;
use crate::ops::SetExpiry;
use crate::page::Page;

/// When [`Db::set_with`] writes (Redis SET's NX and XX).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SetCondition {
    /// Always.
    #[default]
    Always,
    /// Only if the key does not exist (NX).
    IfAbsent,
    /// Only if the key exists (XX).
    IfPresent,
}

/// The options of [`Db::set_with`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SetOptions {
    /// When to write.
    pub condition: SetCondition,
    /// What happens to the key's expiry.
    pub expiry: SetExpiry,
    /// Also return the old value (GET); the key must then hold a string.
    pub get: bool,
}

impl Default for SetOptions {
    fn default() -> SetOptions {
        SetOptions { condition: SetCondition::Always, expiry: SetExpiry::Clear, get: false }
    }
}

/// What [`Db::set_with`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetOutcome {
    /// Whether the value was written.
    pub written: bool,
    /// With [`SetOptions::get`]: the value the key held before.
    pub old: Option<Vec<u8>>,
}

/// What [`Db::get_ex`] does with the key's expiry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GetExpiry {
    /// Leave it.
    Keep,
    /// Remove it (PERSIST).
    Persist,
    /// Expire at this Unix time in milliseconds (EX, PX, EXAT, PXAT); a
    /// time not after now deletes the key.
    At(u64),
}

/// A key's current value as [`Db::update_string`] shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Current<'a> {
    /// The key does not exist.
    Missing,
    /// Its bytes.
    Value(&'a [u8]),
    /// It is longer than the limit the caller gave.
    TooLong,
}

/// The error Redis gives for a value that is not a 64-bit integer.
fn not_an_integer() -> Error {
    Error::InvalidArgument("value is not an integer or out of range".into())
}

/// Parses a 64-bit integer the way Redis reads integers in values and
/// arguments (its `string2ll`): an optional `-`, then digits without
/// leading zeros (or a lone `0`); no blanks, no `+`, within 64 bits.
///
/// ```
/// assert_eq!(bitsled::parse_integer(b"-42"), Some(-42));
/// assert_eq!(bitsled::parse_integer(b"042"), None);
/// ```
#[must_use]
pub fn parse_integer(b: &[u8]) -> Option<i64> {
    let (negative, digits) = match b.strip_prefix(b"-") {
        Some(d) => (true, d),
        None => (false, b),
    };
    match digits {
        [b'0'] if !negative => return Some(0),
        [b'1'..=b'9', ..] => {}
        _ => return None,
    }
    // Accumulated below zero, where i64 reaches one further (i64::MIN).
    let mut v: i64 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_sub(i64::from(c - b'0'))?;
    }
    if negative {
        Some(v)
    } else {
        v.checked_neg()
    }
}

impl Db {
    /// Writes the string `value` to `key` as Redis SET does with options:
    /// only if `opts.condition` holds, with the expiry `opts.expiry` says,
    /// returning the old value with `opts.get`. Check, write and the old
    /// value are one atomic step.
    ///
    /// # Errors
    /// [`Error::WrongType`] with `get` if the key holds another type (then
    /// nothing is written); [`Error::TooLarge`] if the old value to return
    /// is above [`crate::Config::max_value_bytes`]; [`Error::Poisoned`].
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// use bitsled::{SetCondition, SetOptions};
    /// let db = bitsled::Db::open(dir.path())?;
    /// let nx = SetOptions { condition: SetCondition::IfAbsent, ..SetOptions::default() };
    /// assert!(db.set_with(b"lock", b"owner-1", nx)?.written);
    /// assert!(!db.set_with(b"lock", b"owner-2", nx)?.written);
    /// let swap = SetOptions { get: true, ..SetOptions::default() };
    /// assert_eq!(db.set_with(b"lock", b"owner-3", swap)?.old, Some(b"owner-1".to_vec()));
    /// # Ok(()) }
    /// ```
    pub fn set_with(&self, key: &[u8], value: &[u8], opts: SetOptions) -> Result<SetOutcome> {
        let mut old: Option<(Meta, Option<PageStream>)> = None;
        let decide = |tx: &mut WriteTx<'_>, key: &[u8], old: &mut Option<(Meta, Option<PageStream>)>| {
            let current = if opts.get { tx.string(key)? } else { tx.meta(key)? };
            if opts.get {
                if let Some(m) = &current {
                    tx.value_len(key, m)?;
                    let stream = tx.whole_stream(key, m)?;
                    *old = Some((m.clone(), stream));
                }
            }
            let allowed = match opts.condition {
                SetCondition::Always => true,
                SetCondition::IfAbsent => current.is_none(),
                SetCondition::IfPresent => current.is_some(),
            };
            let expire_at_ms = match opts.expiry {
                SetExpiry::Clear => 0,
                SetExpiry::Keep => current.map_or(0, |m| m.expire_at_ms),
                SetExpiry::At(at) => at,
            };
            Ok::<_, Error>(allowed.then_some(expire_at_ms))
        };
        let written = if value.len() as u64 <= INLINE_MAX {
            self.engine.write(self.index, &[key], |tx| match decide(tx, key, &mut old)? {
                Some(expire_at_ms) => tx.set_short(key, value, expire_at_ms).map(|()| true),
                None => Ok(false),
            })?
        } else {
            let (build, meta) = self.build_string(value)?;
            build.publish_if(key, |tx, key| {
                Ok(decide(tx, key, &mut old)?.map(|expire_at_ms| {
                    let mut meta = meta;
                    meta.expire_at_ms = expire_at_ms;
                    Some(meta)
                }))
            })?
        };
        let old = match old {
            Some((meta, stream)) => Some(self.collect(key, &meta, stream)?),
            None => None,
        };
        Ok(SetOutcome { written, old })
    }

    /// Replaces `key` with the string `value` (Redis SET) and sets its
    /// expiry as `expiry` says. The key switches to the new value and expiry
    /// atomically.
    ///
    /// # Errors
    /// [`crate::Error::Poisoned`] after an earlier store failure.
    pub fn set_with_expiry(&self, key: &[u8], value: &[u8], expiry: SetExpiry) -> Result<()> {
        self.set_with(key, value, SetOptions { expiry, ..SetOptions::default() }).map(|_| ())
    }

    /// Writes every (key, value) pair in one atomic step (Redis MSET), or,
    /// with `only_if_none_exist`, none of them if any key exists (MSETNX).
    /// A key named twice gets its last value; expiries are removed.
    /// Returns whether the values were written.
    ///
    /// # Errors
    /// [`Error::Poisoned`].
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = bitsled::Db::open(dir.path())?;
    /// assert!(db.set_many(&[(b"a", b"1"), (b"b", b"2")], false)?);
    /// assert!(!db.set_many(&[(b"b", b"3"), (b"c", b"4")], true)?);
    /// assert_eq!(db.get(b"c")?, None);
    /// # Ok(()) }
    /// ```
    pub fn set_many(&self, pairs: &[(&[u8], &[u8])], only_if_none_exist: bool) -> Result<bool> {
        let mut items = Vec::with_capacity(pairs.len());
        for &(key, value) in pairs {
            if value.len() as u64 <= INLINE_MAX {
                items.push((key, NewValue::Short(value)));
                continue;
            }
            let (build, meta) = self.build_string(value)?;
            items.push((key, NewValue::Built(build, Box::new(meta))));
        }
        self.engine.publish_all(self.index, items, only_if_none_exist)
    }

    /// The value of string `key` (Redis GETEX), changing its expiry as
    /// `expiry` says in the same atomic step; `None` if missing.
    ///
    /// # Errors
    /// [`Error::WrongType`]; [`Error::TooLarge`] as [`Db::get`];
    /// [`Error::Poisoned`].
    pub fn get_ex(&self, key: &[u8], expiry: GetExpiry) -> Result<Option<Vec<u8>>> {
        let found = self.engine.write(self.index, &[key], |tx| {
            let Some(mut meta) = tx.string(key)? else { return Ok(None) };
            tx.value_len(key, &meta)?;
            let stream = tx.whole_stream(key, &meta)?;
            match expiry {
                GetExpiry::Keep => {}
                GetExpiry::Persist if meta.expire_at_ms == 0 => {}
                GetExpiry::Persist => {
                    meta.expire_at_ms = 0;
                    tx.set(key, &meta)?;
                }
                GetExpiry::At(at) if at <= tx.now_ms() => {
                    tx.delete(key)?;
                }
                GetExpiry::At(at) => {
                    meta.expire_at_ms = at;
                    tx.set(key, &meta)?;
                }
            }
            Ok(Some((meta, stream)))
        })?;
        match found {
            Some((meta, stream)) => Ok(Some(self.collect(key, &meta, stream)?)),
            None => Ok(None),
        }
    }

    /// The value of string `key`, deleting the key in the same atomic step
    /// (Redis GETDEL); `None` if missing.
    ///
    /// # Errors
    /// [`Error::WrongType`]; [`Error::TooLarge`] as [`Db::get`] (then the
    /// key stays); [`Error::Poisoned`].
    pub fn get_del(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let found = self.engine.write(self.index, &[key], |tx| {
            let Some(meta) = tx.string(key)? else { return Ok(None) };
            tx.value_len(key, &meta)?;
            // The stream keeps the value readable after the delete.
            let stream = tx.whole_stream(key, &meta)?;
            tx.delete(key)?;
            Ok(Some((meta, stream)))
        })?;
        match found {
            Some((meta, stream)) => Ok(Some(self.collect(key, &meta, stream)?)),
            None => Ok(None),
        }
    }

    /// Reads string `key` and replaces it with what `f` computes from it,
    /// keeping its expiry, as one atomic step (the building block of INCR,
    /// INCRBYFLOAT and the like). `f` sees the value if it is at most
    /// `max_len` bytes (at most 4,096), [`Current::TooLong`] otherwise;
    /// if `f` fails, nothing changes.
    ///
    /// # Errors
    /// [`Error::WrongType`]; whatever `f` returns; [`Error::Poisoned`].
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// use bitsled::Current;
    /// let db = bitsled::Db::open(dir.path())?;
    /// let shout = |c: Current<'_>| match c {
    ///     Current::Value(v) => Ok((v.to_ascii_uppercase(), ())),
    ///     _ => Ok((b"NEW".to_vec(), ())),
    /// };
    /// db.update_string(b"greeting", 64, shout)?;
    /// db.set(b"greeting", b"hello")?;
    /// db.update_string(b"greeting", 64, shout)?;
    /// assert_eq!(db.get(b"greeting")?, Some(b"HELLO".to_vec()));
    /// # Ok(()) }
    /// ```
    pub fn update_string<R>(
        &self,
        key: &[u8],
        max_len: usize,
        f: impl FnOnce(Current<'_>) -> Result<(Vec<u8>, R)>,
    ) -> Result<R> {
        self.engine.write(self.index, &[key], |tx| {
            let old = tx.string(key)?;
            let bytes = match &old {
                Some(m) => tx.short_value(key, m, max_len)?,
                None => None,
            };
            let current = match (&old, &bytes) {
                (None, _) => Current::Missing,
                (Some(_), Some(b)) => Current::Value(b),
                (Some(_), None) => Current::TooLong,
            };
            let (new, r) = f(current)?;
            write_in_tx(tx, key, &new, old.map_or(0, |m| m.expire_at_ms))?;
            Ok(r)
        })
    }

    /// Adds `delta` to the integer in string `key` (Redis INCRBY; a missing
    /// key counts as 0) and returns the result; the expiry is kept.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] with Redis's texts if the value is not a
    /// 64-bit integer in Redis's form or the sum overflows;
    /// [`Error::WrongType`]; [`Error::Poisoned`].
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = bitsled::Db::open(dir.path())?;
    /// assert_eq!(db.incr_by(b"visits", 1)?, 1);
    /// assert_eq!(db.incr_by(b"visits", 41)?, 42);
    /// assert_eq!(db.get(b"visits")?, Some(b"42".to_vec()));
    /// # Ok(()) }
    /// ```
    pub fn incr_by(&self, key: &[u8], delta: i64) -> Result<i64> {
        self.update_string(key, 20, |current| {
            let value = match current {
                Current::Missing => 0,
                Current::Value(v) => parse_integer(v).ok_or_else(not_an_integer)?,
                Current::TooLong => return Err(not_an_integer()),
            };
            let sum = value
                .checked_add(delta)
                .ok_or_else(|| Error::InvalidArgument("increment or decrement would overflow".into()))?;
            Ok((sum.to_string().into_bytes(), sum))
        })
    }

    /// The bytes of the value `meta` describes, the value of `key`, from
    /// `stream` (its pages; `None` for an empty value).
    pub(crate) fn collect(&self, key: &[u8], meta: &Meta, stream: Option<PageStream>) -> Result<Vec<u8>> {
        let len = self.engine.value_len(key, meta)?;
        let mut out = vec![0u8; len];
        let Some(mut stream) = stream else { return Ok(out) };
        let page_bytes = PAGE_LEN;
        while let Some((page, p)) = stream.next_page()? {
            // The stream stops at the last page of `len` bytes, so
            // page * PAGE_BYTES < len fits in usize.
            let start = usize::try_from(page)
                .ok()
                .and_then(|p| p.checked_mul(page_bytes))
                .filter(|&s| s < len)
                .ok_or_else(|| Error::Internal(format!("page {page} lies past the {len} bytes of the value")))?;
            let end = (start + page_bytes).min(len);
            p.write_bytes(&mut out[start..end]);
        }
        Ok(out)
    }
}

impl Db {
    /// Builds the string `value` page by page under a fresh id, unpublished:
    /// the build and the metadata (no expiry) to publish it with.
    fn build_string(&self, value: &[u8]) -> Result<(Build<'_>, Meta)> {
        let mut build = self.engine.begin_build(self.index)?;
        for (i, chunk) in value.chunks(PAGE_LEN).enumerate() {
            build.put(i as u64, Page::from_bytes(chunk))?;
        }
        let meta = build.meta(Kind::String, value.len() as u64, 0);
        Ok((build, meta))
    }
}

/// Writes the short string `value` (a few pages at most) to `key` inside
/// the transaction, expiring at `expire_at_ms`; the old value is reclaimed.
fn write_in_tx(tx: &mut WriteTx<'_>, key: &[u8], value: &[u8], expire_at_ms: u64) -> Result<()> {
    if value.len() as u64 <= INLINE_MAX {
        return tx.set_short(key, value, expire_at_ms);
    }
    let mut meta = tx.new_value(Kind::String);
    for (i, chunk) in value.chunks(PAGE_LEN).enumerate() {
        let page = Page::from_bytes(chunk);
        tx.update_page(key, &mut meta, i as u64, |p| *p = page)?;
    }
    meta.len = value.len() as u64;
    meta.expire_at_ms = expire_at_ms;
    tx.replace(key, Some(&meta))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_integer;

    /// Redis's integer syntax: no sign but `-`, no leading zeros, no
    /// spaces, within 64 bits.
    #[test]
    fn integers_parse_as_redis_reads_them() {
        for (text, want) in [
            (&b"0"[..], Some(0)),
            (b"-1", Some(-1)),
            (b"9223372036854775807", Some(i64::MAX)),
            (b"-9223372036854775808", Some(i64::MIN)),
            (b"9223372036854775808", None),
            (b"-0", None),
            (b"01", None),
            (b"+1", None),
            (b" 1", None),
            (b"1 ", None),
            (b"", None),
            (b"-", None),
            (b"1.0", None),
        ] {
            assert_eq!(parse_integer(text), want, "{:?}", String::from_utf8_lossy(text));
        }
        // Every width and sign round-trips through its decimal text.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for shift in 0..64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let y = (x >> shift).cast_signed();
            for v in [y, y.wrapping_neg(), i64::MIN.wrapping_add(y)] {
                assert_eq!(parse_integer(v.to_string().as_bytes()), Some(v), "{v}");
            }
        }
    }
}
