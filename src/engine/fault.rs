//! A [`Store`] that fails or silently drops writes on command, and the tests
//! of the write path's error handling that use it. With the `testing`
//! feature, `bitsled::testing::open_faulty` opens a database over it for
//! the integration tests and the `fault_model` fuzz target.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

use super::store::{Bytes, Scan, SledStore, Store, Write};
use crate::error::{Error, Result};

/// What the next store calls do; shared with the test that arms it.
#[derive(Default)]
pub struct Faults {
    /// Batches still applied normally before one fails (negative: none fails).
    fail_apply_after: AtomicI64,
    /// Batches are acknowledged but not applied (a disk that lies).
    drop_applies: AtomicBool,
    /// `sync` fails.
    fail_sync: AtomicBool,
    /// `get` fails.
    fail_gets: AtomicBool,
    /// Free bytes the store reports (negative: the real disk's).
    free_bytes: AtomicI64,
    /// Scans still made normally before every further one panics
    /// (negative: none panics).
    scans_before_panic: AtomicI64,
}

impl Faults {
    /// No faults.
    #[must_use]
    pub fn new() -> Arc<Faults> {
        let f = Faults::default();
        f.fail_apply_after.store(-1, Ordering::SeqCst);
        f.free_bytes.store(-1, Ordering::SeqCst);
        f.scans_before_panic.store(-1, Ordering::SeqCst);
        Arc::new(f)
    }

    /// The batch after the next `n` fails (0: the next one; negative:
    /// none).
    pub fn fail_apply_after(&self, n: i64) {
        self.fail_apply_after.store(n, Ordering::SeqCst);
    }

    /// Batches are acknowledged but not applied (a disk that lies) while
    /// `on`.
    pub fn drop_applies(&self, on: bool) {
        self.drop_applies.store(on, Ordering::SeqCst);
    }

    /// Every `get` fails while `on` (a read error, as a damaged or
    /// unreadable disk gives).
    pub fn fail_gets(&self, on: bool) {
        self.fail_gets.store(on, Ordering::SeqCst);
    }

    /// Every `sync` fails while `on`.
    pub fn fail_sync(&self, on: bool) {
        self.fail_sync.store(on, Ordering::SeqCst);
    }

    /// After `n` more scans every scan panics (as sled does on some damage
    /// it meets while reading); `None`: none does.
    pub fn panic_on_scan_after(&self, n: Option<u32>) {
        self.scans_before_panic.store(n.map_or(-1, i64::from), Ordering::SeqCst);
    }

    /// Counts a scan; panics if scans are to panic by now.
    fn scan_or_panic(&self) {
        let left = self.scans_before_panic.load(Ordering::SeqCst);
        assert!(left != 0, "injected fault: a panic in a scan");
        if left > 0 {
            self.scans_before_panic.store(left - 1, Ordering::SeqCst);
        }
    }

    /// The store reports `bytes` free on its disk (`None`: what the disk
    /// really has).
    pub fn set_free_bytes(&self, bytes: Option<u64>) {
        let v = bytes.map_or(-1, |b| i64::try_from(b).unwrap_or(i64::MAX));
        self.free_bytes.store(v, Ordering::SeqCst);
    }
}

fn injected(what: &str) -> Error {
    Error::Io(std::io::Error::other(format!("injected fault: {what}")))
}

/// A store that passes everything to `inner` unless [`Faults`] say
/// otherwise.
pub(super) struct FaultStore {
    inner: Box<dyn Store>,
    faults: Arc<Faults>,
}

impl Store for FaultStore {
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        if self.faults.fail_gets.load(Ordering::SeqCst) {
            return Err(injected("get"));
        }
        self.inner.get(key)
    }
    fn scan(&self, from: &[u8], to: &[u8]) -> Scan {
        self.faults.scan_or_panic();
        self.inner.scan(from, to)
    }
    fn scan_prefix(&self, prefix: &[u8]) -> Scan {
        self.faults.scan_or_panic();
        self.inner.scan_prefix(prefix)
    }
    fn last_at_or_before(&self, key: &[u8]) -> Result<Option<(Bytes, Bytes)>> {
        self.inner.last_at_or_before(key)
    }
    fn apply(&self, writes: Vec<Write>) -> Result<()> {
        let left = self.faults.fail_apply_after.fetch_sub(1, Ordering::SeqCst);
        if left == 0 {
            return Err(injected("apply"));
        }
        if left < 0 {
            // Disarmed: keep it from ever counting down to zero.
            self.faults.fail_apply_after.store(-1, Ordering::SeqCst);
        }
        if self.faults.drop_applies.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.inner.apply(writes)
    }
    fn next_id(&self) -> Result<u64> {
        self.inner.next_id()
    }
    fn sync(&self) -> Result<()> {
        if self.faults.fail_sync.load(Ordering::SeqCst) {
            return Err(injected("sync"));
        }
        self.inner.sync()
    }
    fn size_on_disk(&self) -> Result<u64> {
        self.inner.size_on_disk()
    }
    fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }
    fn available_bytes(&self) -> Result<Option<u64>> {
        match u64::try_from(self.faults.free_bytes.load(Ordering::SeqCst)) {
            Ok(free) => Ok(Some(free)),
            Err(_) => self.inner.available_bytes(),
        }
    }
    fn maintain(&self, keys: u64) -> Result<()> {
        self.inner.maintain(keys)
    }
}

/// Opens the database `config` describes over a `FaultStore` on sled,
/// and the switches of its faults (none armed).
///
/// # Errors
/// As [`crate::Config::open`].
pub fn open_faulty(config: crate::Config) -> Result<(crate::Db, Arc<Faults>)> {
    let faults = Faults::new();
    let db = open_with_faults(config, Arc::clone(&faults))?;
    Ok((db, faults))
}

/// Opens a database over a FaultStore whose faults are set beforehand (so
/// that the open itself meets them).
///
/// # Errors
/// As [`crate::Config::open`], and the faults' errors.
pub fn open_with_faults(config: crate::Config, faults: Arc<Faults>) -> Result<crate::Db> {
    let inner = SledStore::open(&config.path, config.store_cache_bytes)?;
    let store = FaultStore { inner: Box::new(inner), faults };
    let engine = super::Engine::open_caught(config, Box::new(store))?;
    Ok(crate::Db::handle(engine, 0))
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::{BitOp, Config, Db};

    fn config(dir: &Path) -> Config {
        Config::new(dir).flush_interval(None)
    }

    /// Invariant: a store that panics while the open reads it (as sled
    /// does on some damage), before or after the engine exists, makes the
    /// open fail with `Corrupted` naming the store: never a panic through
    /// the caller, never an abort (the engine dropped while unwinding does
    /// not write); the same store opens, whole, once the fault is gone.
    #[test]
    fn a_panic_of_the_store_at_open_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path()).unwrap();
        db.set(b"k", b"v").unwrap();
        db.flush().unwrap();
        // A change left in a delta record, so that the open replays it.
        db.set(b"k2", b"w").unwrap();
        drop(db);
        let mut refused = Vec::new();
        for n in 0..12 {
            let faults = Faults::new();
            faults.panic_on_scan_after(Some(n));
            match open_with_faults(config(dir.path()), faults) {
                Err(Error::Corrupted { key, reason, .. }) => {
                    assert_eq!(key, "<store>");
                    assert!(reason.contains("injected fault: a panic in a scan"), "{reason}");
                    refused.push(n);
                }
                Ok(db) => drop(db),
                Err(e) => panic!("after {n} scans: expected Corrupted, got {e}"),
            }
        }
        // Panics both before the engine exists (the first scan) and after
        // (the delta records' replay).
        assert!(refused.contains(&0) && refused.iter().any(|&n| n >= 3), "{refused:?}");
        let db = open_with_faults(config(dir.path()), Faults::new()).unwrap();
        assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
        assert_eq!(db.get(b"k2").unwrap().as_deref(), Some(&b"w"[..]));
    }

    /// Reopens the store in `dir` after a write of `big` whose batch number
    /// `n` failed: `kept` is there, `big` is not, and `verify` finds no
    /// problem. Returns its report.
    fn reopened_without_big(dir: &Path, n: i64) -> crate::VerifyReport {
        let db = config(dir).open().unwrap();
        assert!(db.getbit(b"kept", 7).unwrap());
        assert!(!db.exists(b"big").unwrap(), "batch {n}");
        let report = db.verify().unwrap();
        assert!(report.is_ok(), "batch {n}: {:?}", report.problems);
        report
    }

    /// Invariant: the pages of a value still being built, which a
    /// write-back stores in batches after its atomic one, never leave the
    /// store unsound: failing any one of a large SET's batches (write-backs
    /// forced by a small dirty budget) poisons the handle, and the reopened
    /// store holds the acknowledged keys, not the unpublished one, and
    /// passes `verify` (the stored pages of the build are covered by its
    /// reclaim marker). With no fault the same SET reads back whole after
    /// a reopen.
    #[test]
    fn a_failed_batch_of_built_pages_leaves_a_sound_store() {
        let value: Vec<u8> = (0..3u32 << 20).map(|i| i.wrapping_mul(2_654_435_761).to_le_bytes()[1]).collect();
        let small = |dir: &Path| config(dir).dirty_bytes(256 << 10);
        for fail_after in 0..6 {
            let dir = tempfile::tempdir().unwrap();
            let (db, faults) = open_faulty(small(dir.path())).unwrap();
            db.setbit(b"kept", 7, true).unwrap();
            db.flush().unwrap();
            faults.fail_apply_after(fail_after);
            let r = db.set(b"big", &value);
            assert!(matches!(r, Err(Error::Io(_))), "batch {fail_after}: {r:?}");
            drop(db);
            reopened_without_big(dir.path(), fail_after);
        }
        let dir = tempfile::tempdir().unwrap();
        let db = small(dir.path()).open().unwrap();
        db.set(b"big", &value).unwrap();
        drop(db);
        let db = config(dir.path()).open().unwrap();
        assert_eq!(db.get(b"big").unwrap().as_deref(), Some(&value[..]));
        assert!(db.verify().unwrap().is_ok());
    }

    /// Invariant: the pages of a value published since the last write-back
    /// (a large SET whose pages are all still in memory) are stored in
    /// batches of about 1 MiB before the write-back's atomic batch, which
    /// names the value: failing any of those batches or the atomic one
    /// leaves a store without the value and with no page outside a key or
    /// a reclaim marker (`verify`). A 3 MiB value takes at least three
    /// batches before the atomic one; one atomic batch would have passed
    /// the third failure. With no fault the value reads back after a
    /// reopen.
    #[test]
    fn a_failed_batch_before_a_published_value_is_named_leaves_a_sound_store() {
        let value: Vec<u8> = (0..3u32 << 20).map(|i| i.wrapping_mul(2_654_435_761).to_le_bytes()[2]).collect();
        for fail_after in 0..4 {
            let dir = tempfile::tempdir().unwrap();
            let (db, faults) = open_faulty(config(dir.path())).unwrap();
            db.setbit(b"kept", 7, true).unwrap();
            db.flush().unwrap();
            db.set(b"big", &value).unwrap();
            faults.fail_apply_after(fail_after);
            let r = db.flush();
            assert!(matches!(r, Err(Error::Io(_))), "batch {fail_after}: {r:?}");
            drop(db);
            let report = reopened_without_big(dir.path(), fail_after);
            assert_eq!(report.pages, 0, "batch {fail_after}: kept is inline, and no page of big is left");
        }
        let dir = tempfile::tempdir().unwrap();
        let db = config(dir.path()).open().unwrap();
        db.set(b"big", &value).unwrap();
        db.flush().unwrap();
        drop(db);
        let db = config(dir.path()).open().unwrap();
        assert_eq!(db.get(b"big").unwrap().as_deref(), Some(&value[..]));
        assert!(db.verify().unwrap().is_ok());
    }

    #[test]
    fn failed_write_back_poisons_and_reopen_keeps_the_acknowledged_state() {
        let dir = tempfile::tempdir().unwrap();
        let (db, faults) = open_faulty(config(dir.path())).unwrap();
        db.setbit(b"kept", 7, true).unwrap();
        db.flush().unwrap();
        db.setbit(b"lost", 7, true).unwrap();
        faults.fail_apply_after(0);
        let r = db.flush();
        assert!(matches!(r, Err(Error::Io(_))), "{r:?}");
        let r = db.setbit(b"after", 1, true);
        assert!(matches!(r, Err(Error::Poisoned(_))), "{r:?}");
        let r = db.flush();
        assert!(matches!(r, Err(Error::Poisoned(_))), "{r:?}");
        assert!(db.getbit(b"kept", 7).unwrap(), "reads work on a poisoned handle");
        drop(db);
        let db = config(dir.path()).open().unwrap();
        assert!(db.getbit(b"kept", 7).unwrap());
        assert!(!db.exists(b"lost").unwrap() && !db.exists(b"after").unwrap());
        assert!(db.verify().unwrap().is_ok());
    }

    /// Invariant: a write-back that fails after it captured the changes
    /// (here: it cannot read the page group record a new page joins) poisons
    /// the handle as a failed batch does, so no later write assumes the
    /// store holds what was captured: without that, the next item added to
    /// a small Bloom filter would be stored as bits relative to an entry
    /// the store never got, and the reopened filter would lose an item.
    /// The reopened store holds the last acknowledged state.
    #[test]
    fn a_write_back_that_fails_after_its_capture_poisons() {
        let dir = tempfile::tempdir().unwrap();
        let (db, faults) = open_faulty(config(dir.path())).unwrap();
        db.bloom(b"old").add(b"i0").unwrap();
        db.setbit(b"paged", 40_000, true).unwrap();
        db.flush().unwrap();
        db.bloom(b"new").add(b"n0").unwrap();
        db.bloom(b"old").add(b"i1").unwrap();
        db.setbit(b"paged", 70_000, true).unwrap();
        faults.fail_gets(true);
        let r = db.flush();
        assert!(matches!(r, Err(Error::Io(_))), "{r:?}");
        faults.fail_gets(false);
        let r = db.bloom(b"old").add(b"i2");
        assert!(matches!(r, Err(Error::Poisoned(_))), "{r:?}");
        drop(db);
        let db = config(dir.path()).open().unwrap();
        assert!(db.bloom(b"old").contains(b"i0").unwrap());
        assert_eq!(db.bloom(b"old").card().unwrap(), 1);
        assert!(!db.exists(b"new").unwrap());
        assert!(db.getbit(b"paged", 40_000).unwrap() && !db.getbit(b"paged", 70_000).unwrap());
        assert!(db.verify().unwrap().is_ok());
    }

    /// Invariant: while the disk has less free space than a write-back and
    /// the reserve need, nothing is written and nothing is lost: flushes
    /// and writes fail with `DiskFull` (not `Poisoned`), reads return every
    /// write accepted before, including the unflushed ones, and the handle
    /// reports the shortage; once the space is back the next write is
    /// accepted, the flush succeeds, and a reopen finds every accepted
    /// write of before, during and after the shortage.
    #[test]
    fn a_disk_short_of_space_refuses_writes_and_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (db, faults) = open_faulty(config(dir.path()).disk_reserve_bytes(1 << 20)).unwrap();
        db.setbit(b"flushed", 7, true).unwrap();
        db.flush().unwrap();
        db.set(b"unflushed", b"v1").unwrap();
        db.setbit(b"big", 1 << 20, true).unwrap();
        faults.set_free_bytes(Some(1 << 19));
        let r = db.flush();
        assert!(matches!(r, Err(Error::DiskFull { free_bytes: 524_288, .. })), "{r:?}");
        let short = db.disk_shortage().expect("the shortage is reported");
        assert!(short.needed_bytes > 1 << 20 && short.free_bytes == 1 << 19, "{short:?}");
        let r = db.set(b"refused", b"x");
        assert!(matches!(r, Err(Error::DiskFull { .. })), "{r:?}");
        let r = db.bitop(BitOp::Or, b"d", &[b"big"]);
        assert!(matches!(r, Err(Error::DiskFull { .. })), "{r:?}");
        assert_eq!(db.get(b"unflushed").unwrap().as_deref(), Some(&b"v1"[..]));
        assert!(db.getbit(b"big", 1 << 20).unwrap() && db.getbit(b"flushed", 7).unwrap());
        assert!(!db.exists(b"refused").unwrap());
        // A reserve lowered below what is free lifts the refusal too.
        faults.set_free_bytes(Some(64 << 20));
        db.set(b"after", b"v2").unwrap();
        assert_eq!(db.disk_shortage(), None);
        db.flush().unwrap();
        drop(db);
        let db = config(dir.path()).open().unwrap();
        assert_eq!(db.get(b"unflushed").unwrap().as_deref(), Some(&b"v1"[..]));
        assert_eq!(db.get(b"after").unwrap().as_deref(), Some(&b"v2"[..]));
        assert!(db.getbit(b"big", 1 << 20).unwrap() && db.getbit(b"flushed", 7).unwrap());
        assert!(!db.exists(b"refused").unwrap() && !db.exists(b"d").unwrap());
        assert!(db.verify().unwrap().is_ok());
    }

    /// Invariant: logged pages (stored, changed by a few bits, written
    /// whole only by a page fold) count once toward the space a write-back
    /// needs, not three times as its changes do: with room for the logged
    /// pages and a half (and the reserve), a small write-back goes through.
    #[test]
    fn logged_pages_count_once_in_the_space_check() {
        let dir = tempfile::tempdir().unwrap();
        let (db, faults) = open_faulty(config(dir.path()).disk_reserve_bytes(1 << 20)).unwrap();
        // 400 dense pages, stored, then one bit of each changed: logged.
        let value: Vec<u8> = (0..400 * 4096u32).map(|i| i.wrapping_mul(2_654_435_761).to_le_bytes()[2] | 1).collect();
        db.set(b"k", &value).unwrap();
        db.flush().unwrap();
        for page in 0..400u64 {
            db.setbit(b"k", page * 32_768 + 1, true).unwrap();
        }
        db.flush().unwrap();
        let logged = db.engine.pages.logged_bytes() as u64;
        assert!(logged >= 100 * 4096, "pages were logged: {logged}");
        faults.set_free_bytes(Some((1 << 20) + logged + logged / 2));
        db.setbit(b"other", 5, true).unwrap();
        db.flush().unwrap();
        assert_eq!(db.disk_shortage(), None);
    }

    /// Invariant: `verify` short of disk space says so (`DiskFull`) rather
    /// than checking a store whose page delta records it could not fold,
    /// which it would report as damage.
    #[test]
    fn verify_short_of_space_is_disk_full_not_damage() {
        let dir = tempfile::tempdir().unwrap();
        let (db, faults) = open_faulty(config(dir.path()).disk_reserve_bytes(1 << 20)).unwrap();
        for off in (0..32_768).step_by(40) {
            db.setbit(b"k", off, true).unwrap();
        }
        db.flush().unwrap();
        db.setbit(b"k", 3, true).unwrap();
        db.flush().unwrap();
        assert_eq!(db.engine.pages.logged_pages(), 1, "the change was logged");
        faults.set_free_bytes(Some(1 << 19));
        let r = db.verify();
        assert!(matches!(r, Err(Error::DiskFull { .. })), "{r:?}");
        faults.set_free_bytes(None);
        let report = db.verify().unwrap();
        assert!(report.is_ok(), "{:?}", report.problems);
    }

    /// Invariant: a write that pushes the dirty state past its budget while
    /// the disk is short is still accepted (its change is in memory, where
    /// it stays) and the writes after it are refused, without poisoning.
    #[test]
    fn the_write_that_meets_the_shortage_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (db, faults) = open_faulty(config(dir.path()).dirty_bytes(64 << 10).disk_reserve_bytes(0)).unwrap();
        faults.set_free_bytes(Some(0));
        let mut accepted = Vec::new();
        let mut refused = false;
        // Dense pages: 4 KiB each in memory.
        let value: Vec<u8> = (0..4096u32).map(|i| i.wrapping_mul(2_654_435_761).to_le_bytes()[2] | 1).collect();
        for i in 0..64u64 {
            match db.set(format!("k{i}").as_bytes(), &value) {
                Ok(()) => accepted.push(i),
                Err(Error::DiskFull { .. }) => {
                    refused = true;
                    break;
                }
                Err(e) => panic!("unexpected {e}"),
            }
        }
        assert!(refused, "the dirty budget forced a write-back, which found no space");
        faults.set_free_bytes(None);
        db.flush().unwrap();
        drop(db);
        let db = config(dir.path()).open().unwrap();
        for i in 0..64u64 {
            let got = db.get(format!("k{i}").as_bytes()).unwrap();
            assert_eq!(got.as_deref(), accepted.contains(&i).then_some(&value[..]), "key k{i}");
        }
    }

    /// Invariant: a failed sync poisons the handle and the flush reports
    /// it; nothing is acknowledged by that flush.
    #[test]
    fn failed_sync_poisons() {
        let dir = tempfile::tempdir().unwrap();
        let (db, faults) = open_faulty(config(dir.path())).unwrap();
        db.setbit(b"k", 1, true).unwrap();
        faults.fail_sync(true);
        let r = db.flush();
        assert!(matches!(r, Err(Error::Io(_))), "{r:?}");
        let r = db.set(b"k", b"x");
        assert!(matches!(r, Err(Error::Poisoned(_))), "{r:?}");
        let r = db.bitop(BitOp::Or, b"d", &[b"k"]);
        assert!(matches!(r, Err(Error::Poisoned(_))), "{r:?}");
    }

    /// Invariant: a store that acknowledges batches without keeping them
    /// (a lying disk) is caught at the next open: the side file records a
    /// flushed write-back the store does not hold, and the open refuses the
    /// store instead of running on a shortened history.
    #[test]
    fn dropped_writes_are_detected_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let (db, faults) = open_faulty(config(dir.path())).unwrap();
        db.setbit(b"a", 1, true).unwrap();
        db.flush().unwrap();
        faults.drop_applies(true);
        db.setbit(b"b", 1, true).unwrap();
        db.flush().unwrap();
        drop(db);
        let r = config(dir.path()).open();
        match r {
            Err(Error::Corrupted { key, reason, .. }) => {
                assert_eq!(key, "<store>");
                assert!(reason.contains("acknowledged writes were lost"), "{reason}");
            }
            other => panic!("expected the open to refuse the store, got {other:?}"),
        }
    }

    /// Invariant: a failure while reclaiming a deleted value's pages (the
    /// batch after the write-back) poisons the handle too, and the state the
    /// write-back applied survives a reopen.
    #[test]
    fn failed_reclaim_poisons_and_reopen_is_consistent() {
        let dir = tempfile::tempdir().unwrap();
        let (db, faults) = open_faulty(config(dir.path())).unwrap();
        db.set_bits(b"big", &[1, 40_000, 80_000], true).unwrap();
        db.flush().unwrap();
        db.delete(b"big").unwrap();
        db.setbit(b"small", 3, true).unwrap();
        // The write-back's batch goes through; the reclaimer's fails.
        faults.fail_apply_after(1);
        let r = db.flush();
        assert!(matches!(r, Err(Error::Io(_))), "{r:?}");
        let r = db.setbit(b"x", 1, true);
        assert!(matches!(r, Err(Error::Poisoned(_))), "{r:?}");
        drop(db);
        let db = config(dir.path()).open().unwrap();
        assert!(!db.exists(b"big").unwrap());
        assert!(db.getbit(b"small", 3).unwrap());
        let report = db.verify().unwrap();
        assert!(report.is_ok(), "{:?}", report.problems);
    }

    /// Invariant: a background write-back that fails is reported to the
    /// next writer as `Poisoned`, so no write is accepted that could not be
    /// made durable.
    #[test]
    fn failed_background_flush_is_reported_to_the_next_write() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = Config::new(dir.path()).flush_interval(Some(Duration::from_millis(5)));
        let (db, faults) = open_faulty(cfg).unwrap();
        faults.fail_apply_after(0);
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut i = 0u64;
        let err = loop {
            match db.setbit(b"k", i, true) {
                Ok(_) => {}
                Err(e) => break e,
            }
            assert!(Instant::now() < deadline, "no write was refused within 10 s");
            i += 1;
            std::thread::sleep(Duration::from_millis(1));
        };
        assert!(matches!(err, Error::Poisoned(_)), "{err:?}");
        drop(db);
        let db: Db = config(dir.path()).open().unwrap();
        assert!(db.verify().unwrap().is_ok());
    }
}
