//! The active side of expiry: the sweeper that deletes keys whose expiry
//! passed while nobody touched them, following the expiry index.
//! (Lookups delete expired keys too; see `tx.rs`.)

use std::sync::Arc;

use super::layout;
use super::tx::Target;
use super::Engine;
use crate::error::{Error, Result};

impl Engine {
    /// Deletes up to `limit` keys whose expiry has passed, following the
    /// expiry index, and drops the index entries it visits. Returns how many
    /// index entries it processed.
    pub(super) fn sweep_expired(self: &Arc<Self>, limit: usize) -> Result<usize> {
        let now = self.now_ms();
        let (lo, hi) = (layout::expiry_key(0, 0, b""), layout::expiry_key(now.saturating_add(1), 0, b""));
        let mut due: Vec<Vec<u8>> = Vec::new();
        for r in self.store.scan(&lo, &hi).take(limit) {
            let (k, _) = r?;
            if layout::parse_expiry_key(&k).is_some_and(|(at, _, _)| at <= now) {
                due.push(k.to_vec());
            }
        }
        for k in &due {
            let Some((_, ks, name)) = layout::parse_expiry_key(k) else { continue };
            let swept = self.write_then(Target::Keyspace(ks), &[name], true, |tx| {
                // Deletes the key if it has expired; a key whose expiry moved
                // later keeps its newer index entry.
                tx.meta(name)?;
                self.journal.set(k.clone(), None);
                Ok(())
            });
            match swept {
                // A flushed keyspace's entries have nothing left to expire.
                Err(Error::InvalidArgument(_)) => self.journal.set(k.clone(), None),
                r => r?,
            }
        }
        Ok(due.len())
    }
}
