//! Records besides pages and metadata that the next write-back carries:
//! reclaim markers and dead keyspace markers, each with a version so a
//! write-back marks clean only what it wrote.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::pages::Seq;

/// Small records written with the next write-back.
pub(crate) struct Journal {
    entries: Mutex<BTreeMap<Vec<u8>, JournalValue>>,
    seq: AtomicU64,
}

/// A journal record's version and value (`None`: remove the key).
type JournalValue = (Seq, Option<Vec<u8>>);

/// A journal record captured by a write-back.
pub(crate) type JournalEntry = (Vec<u8>, Seq, Option<Vec<u8>>);

/// Whether the record `key` = `value` is a dead keyspace marker being set.
pub(crate) fn is_flush(key: &[u8], value: Option<&Vec<u8>>) -> bool {
    value.is_some() && super::layout::parse_dead_key(key).is_some()
}

impl Journal {
    pub(crate) fn new() -> Journal {
        Journal { entries: Mutex::new(BTreeMap::new()), seq: AtomicU64::new(0) }
    }

    /// Records that `key` must be set to `value` (`None`: removed).
    pub(crate) fn set(&self, key: Vec<u8>, value: Option<Vec<u8>>) {
        let seq = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
        self.entries.lock().insert(key, (seq, value));
    }

    /// Drops every waiting record (a follower's store was replaced).
    pub(crate) fn clear(&self) {
        self.entries.lock().clear();
    }

    /// Whether a record for `key` waits for the next write-back.
    pub(crate) fn contains(&self, key: &[u8]) -> bool {
        self.entries.lock().contains_key(key)
    }

    /// Whether no record waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.entries.lock().is_empty()
    }

    /// Whether a dead keyspace marker waits: the write-back that carries
    /// it records a flushed keyspace (and so folds every shard).
    pub(crate) fn records_flush(&self) -> bool {
        self.entries.lock().iter().any(|(k, (_, v))| is_flush(k, v.as_ref()))
    }

    pub(crate) fn snapshot(&self) -> Vec<JournalEntry> {
        self.entries.lock().iter().map(|(k, (s, v))| (k.clone(), *s, v.clone())).collect()
    }

    pub(crate) fn mark_clean(&self, written: &[JournalEntry]) {
        let mut entries = self.entries.lock();
        for (k, seq, _) in written {
            if entries.get(k).is_some_and(|(s, _)| s == seq) {
                entries.remove(k);
            }
        }
    }
}
