//! The active side of expiry: the sweeper that deletes keys whose expiry
//! passed while nobody touched them, following the expiry index.
//! (Lookups delete expired keys too; see `tx.rs`.)

use std::sync::Arc;

use super::layout;
use super::Engine;
use crate::error::Result;

impl Engine {
    /// Deletes up to `limit` keys whose expiry has passed, following the
    /// expiry index, and drops the index entries it visits. Returns how many
    /// index entries it processed.
    pub(super) fn sweep_expired(self: &Arc<Self>, limit: usize) -> Result<usize> {
        let now = self.now_ms();
        let (lo, hi) = (layout::expiry_key(0, b""), layout::expiry_key(now.saturating_add(1), b""));
        let mut due: Vec<Vec<u8>> = Vec::new();
        for r in self.store.scan(&lo, &hi).take(limit) {
            let (k, _) = r?;
            if layout::parse_expiry_key(&k).is_some_and(|(at, _)| at <= now) {
                due.push(k.to_vec());
            }
        }
        for k in &due {
            let Some((_, name)) = layout::parse_expiry_key(k) else { continue };
            self.write(&[name], |tx| {
                // Deletes the key if it has expired; a key whose expiry moved
                // later keeps its newer index entry.
                tx.meta(name)?;
                self.journal.set(k.clone(), None);
                Ok(())
            })?;
        }
        Ok(due.len())
    }
}
