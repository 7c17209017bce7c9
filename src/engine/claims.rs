//! Claims on keys: a BITOP that reads its own destination claims it from
//! its first read to its publish, and writers of a claimed key wait, so no
//! write to the destination falls between the BITOP reading it and
//! replacing it.
//!
//! A claim is taken while the write gate is held exclusively, and writers
//! check for claims while holding it shared (see `Engine::write`): a writer
//! either finished before the claim (the BITOP reads its change) or sees the
//! claim and waits outside the gate. A thread holds at most one claim and,
//! holding it, waits for no other, so claims cannot deadlock.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::{self, ThreadId};

use parking_lot::{Condvar, Mutex};

/// The claimed keys and their owning threads.
#[derive(Default)]
pub(crate) struct Claims {
    held: Mutex<HashMap<Vec<u8>, ThreadId>>,
    released: Condvar,
    /// Number of claims held: writers skip the map when it is zero.
    active: AtomicUsize,
}

impl Claims {
    /// Whether another thread claims one of `keys`. Called under the gate
    /// (shared), so a claim taken under the gate (exclusive) is seen.
    pub(crate) fn blocks(&self, keys: &[&[u8]]) -> bool {
        if keys.is_empty() || self.active.load(Ordering::SeqCst) == 0 {
            return false;
        }
        let me = thread::current().id();
        let held = self.held.lock();
        keys.iter().any(|k| held.get(*k).is_some_and(|t| *t != me))
    }

    /// Waits until no other thread claims any of `keys`.
    pub(crate) fn wait(&self, keys: &[&[u8]]) {
        let me = thread::current().id();
        let mut held = self.held.lock();
        while keys.iter().any(|k| held.get(*k).is_some_and(|t| *t != me)) {
            self.released.wait(&mut held);
        }
    }

    /// Claims `key` for this thread once no other thread claims it. The
    /// caller holds the gate exclusively; if another thread holds the claim,
    /// returns `None` and the caller waits (outside the gate) and retries.
    pub(crate) fn try_claim<'a>(&'a self, key: &[u8]) -> Option<Claim<'a>> {
        let me = thread::current().id();
        let mut held = self.held.lock();
        if held.get(key).is_some_and(|t| *t != me) {
            return None;
        }
        held.insert(key.to_vec(), me);
        self.active.fetch_add(1, Ordering::SeqCst);
        Some(Claim { claims: self, key: key.to_vec() })
    }
}

/// A held claim; released on drop.
pub(crate) struct Claim<'a> {
    claims: &'a Claims,
    key: Vec<u8>,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut held = self.claims.held.lock();
        held.remove(&self.key);
        self.claims.active.fetch_sub(1, Ordering::SeqCst);
        self.claims.released.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A claim blocks other threads' writes to its key only, never its
    /// owner's, and releasing it wakes the waiters.
    #[test]
    fn claim_blocks_other_threads_until_released() {
        let claims = Arc::new(Claims::default());
        let c = claims.try_claim(b"d").expect("free key");
        assert!(!claims.blocks(&[b"d"]), "the owner is not blocked");
        let other = {
            let claims = Arc::clone(&claims);
            thread::spawn(move || {
                let blocked = claims.blocks(&[b"x", b"d"]) && !claims.blocks(&[b"x"]);
                let second = claims.try_claim(b"d").is_none();
                claims.wait(&[b"d"]);
                (blocked, second)
            })
        };
        thread::sleep(std::time::Duration::from_millis(20));
        drop(c);
        assert_eq!(other.join().unwrap(), (true, true));
        assert!(!claims.blocks(&[b"d"]));
    }
}
