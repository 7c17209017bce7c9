//! WATCH: flags that a change to a watched key raises. Every metadata change
//! of a key (`WriteTx::record`), a change Redis reports without a metadata
//! change (`WriteTx::touch`), and, as in Redis, a FLUSHDB or SWAPDB of its
//! database when the key exists in a database involved, raise the flags of
//! everyone watching it. Watches are kept by keyspace and follow their
//! database when it gets a new keyspace (FLUSHDB) or swaps (SWAPDB).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

/// One watcher's flag: raised once any key it watches changes.
#[derive(Default, Debug)]
pub(crate) struct WatchFlag(AtomicBool);

impl WatchFlag {
    pub(crate) fn raise(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub(crate) fn is_raised(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

type Watchers = Vec<Arc<WatchFlag>>;

/// Who watches which key, by keyspace and name.
#[derive(Default)]
pub(crate) struct Watches {
    /// Number of registrations: writers skip the map when it is zero.
    active: AtomicUsize,
    map: Mutex<HashMap<u32, HashMap<Vec<u8>, Watchers>>>,
}

impl Watches {
    /// `flag` watches key `name` of keyspace `ks`.
    pub(crate) fn register(&self, ks: u32, name: &[u8], flag: &Arc<WatchFlag>) {
        let mut map = self.map.lock();
        map.entry(ks).or_default().entry(name.to_vec()).or_default().push(Arc::clone(flag));
        self.active.fetch_add(1, Ordering::SeqCst);
    }

    /// Ends one [`Watches::register`] of `name` by `flag`, in whatever
    /// keyspace the watch has followed its database to.
    pub(crate) fn unregister(&self, name: &[u8], flag: &Arc<WatchFlag>) {
        let mut map = self.map.lock();
        let mut emptied = None;
        for (&ks, names) in map.iter_mut() {
            let Some(flags) = names.get_mut(name) else { continue };
            let Some(i) = flags.iter().position(|f| Arc::ptr_eq(f, flag)) else { continue };
            flags.swap_remove(i);
            self.active.fetch_sub(1, Ordering::SeqCst);
            if flags.is_empty() {
                names.remove(name);
            }
            if names.is_empty() {
                emptied = Some(ks);
            }
            break;
        }
        if let Some(ks) = emptied {
            map.remove(&ks);
        }
    }

    /// Key `name` of keyspace `ks` changed.
    pub(crate) fn touched(&self, ks: u32, name: &[u8]) {
        if self.active.load(Ordering::SeqCst) == 0 {
            return;
        }
        if let Some(flags) = self.map.lock().get(&ks).and_then(|n| n.get(name)) {
            for f in flags {
                f.raise();
            }
        }
    }

    /// The names watched in keyspace `ks`.
    pub(crate) fn names(&self, ks: u32) -> Vec<Vec<u8>> {
        if self.active.load(Ordering::SeqCst) == 0 {
            return Vec::new();
        }
        self.map.lock().get(&ks).map(|n| n.keys().cloned().collect()).unwrap_or_default()
    }

    /// The watches of keyspace `from` follow their database to keyspace
    /// `to` (FLUSHDB gave it a new one). A watch is on a database's key,
    /// whatever keyspace holds it.
    pub(crate) fn follow(&self, from: u32, to: u32) {
        let mut map = self.map.lock();
        if let Some(names) = map.remove(&from) {
            map.insert(to, names);
        }
    }

    /// The watches of keyspaces `a` and `b` swap (SWAPDB swapped the
    /// databases' keyspaces).
    pub(crate) fn swap(&self, a: u32, b: u32) {
        let mut map = self.map.lock();
        let (wa, wb) = (map.remove(&a), map.remove(&b));
        if let Some(w) = wa {
            map.insert(b, w);
        }
        if let Some(w) = wb {
            map.insert(a, w);
        }
    }
}
