//! A small trait over the ordered key-value store, and its sled implementation.
//!
//! The engine needs only point reads, ordered range scans, atomic batches, a
//! durable barrier and a persistent id generator. Keeping sled behind this
//! trait keeps the engine portable to another ordered store.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// Bytes returned by the store; cheap to clone, not aligned.
pub(crate) type Bytes = sled::IVec;

/// One write of a batch: `Some(value)` inserts, `None` removes.
pub(crate) type Write = (Vec<u8>, Option<Vec<u8>>);

/// An iterator over `(key, value)` pairs in key order.
pub(crate) type Scan = Box<dyn Iterator<Item = Result<(Bytes, Bytes)>> + Send>;

/// What the engine needs from an ordered key-value store.
pub(crate) trait Store: Send + Sync {
    /// The value stored under `key`.
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>>;
    /// Records with keys in `from ..= to`, in key order. Not a snapshot.
    /// An error is the scan's last item.
    fn scan(&self, from: &[u8], to: &[u8]) -> Scan;
    /// Records whose key starts with `prefix`, in key order. An error is
    /// the scan's last item.
    fn scan_prefix(&self, prefix: &[u8]) -> Scan;
    /// The record with the largest key at or before `key`.
    fn last_at_or_before(&self, key: &[u8]) -> Result<Option<(Bytes, Bytes)>>;
    /// Applies all writes atomically, also across a crash.
    fn apply(&self, writes: Vec<Write>) -> Result<()>;
    /// A new id, never returned before, also across crashes.
    fn next_id(&self) -> Result<u64>;
    /// Makes everything applied so far durable.
    fn sync(&self) -> Result<()>;
    /// Bytes the store occupies on disk.
    fn size_on_disk(&self) -> Result<u64>;
    /// Whether the store holds no record.
    fn is_empty(&self) -> bool;
    /// Bytes free for the store's files on their disk (`None`: not known).
    fn available_bytes(&self) -> Result<Option<u64>>;
    /// Bytes of the store's log, for messages about a damaged store (0 if
    /// not known).
    fn log_bytes(&self) -> u64 {
        0
    }
}

/// Frees what sled retired during a batch. sled defers freeing replaced
/// tree nodes to its epoch-based collector, which frees at most a few
/// hundred objects each time a thread pins it; a large batch retires far
/// more, and without help the backlog grows by hundreds of MB (measured
/// in BENCHMARKS.md). Each flush of a pinned guard runs a collection step
/// of sled's global collector; 64 steps after a batch keep the backlog
/// bounded. (`sled::pin` is exported by sled 0.34 but hidden from its
/// documentation.)
fn collect_garbage() {
    for _ in 0..64 {
        sled::pin().flush();
    }
}

impl From<sled::Error> for Error {
    fn from(e: sled::Error) -> Self {
        match e {
            sled::Error::Io(io) => Error::Io(io),
            sled::Error::Corruption { at, .. } => Error::Corrupted {
                key: "<sled log>".into(),
                page: None,
                reason: format!("sled reported corruption at {at:?}"),
            },
            other => Error::Storage(Box::new(other)),
        }
    }
}

/// The sled implementation: one default tree.
pub(crate) struct SledStore {
    db: sled::Db,
    dir: PathBuf,
}

impl SledStore {
    /// Opens (or creates) the store in `dir` with sled's page cache limited to
    /// `cache_bytes`.
    pub(crate) fn open(dir: &Path, cache_bytes: u64) -> Result<SledStore> {
        fs::create_dir_all(dir)?;
        remove_unfinished_snapshots(dir)?;
        let config = sled::Config::new()
            .path(dir)
            .cache_capacity(cache_bytes)
            // bitsled issues its own barriers; sled's timer would only add
            // unsolicited writes.
            .flush_every_ms(None);
        // sled's I/O threads may hold the directory's lock for a moment
        // after the previous handle was dropped: retry briefly before
        // reporting the directory as in use.
        let mut wait = Duration::from_millis(1);
        let deadline = Instant::now() + LOCK_WAIT;
        let db = loop {
            match open_sled(&config, dir)? {
                Err(sled::Error::Io(e)) if is_lock_error(&e) && Instant::now() < deadline => {
                    std::thread::sleep(wait);
                    wait = (wait * 2).min(Duration::from_millis(50));
                }
                Err(e) => return Err(open_error(dir, e)),
                Ok(db) => break db,
            }
        };
        Ok(SledStore { db, dir: dir.to_path_buf() })
    }
}

/// Opens sled's files with `config`; a panic inside sled becomes
/// [`Error::Corrupted`].
///
/// sled 0.34 checks its own structures with assertions while recovering
/// its log, so damaged files (a segment header copied over another, for
/// one) make it panic instead of returning an error. Nothing of the
/// half-built handle is used after the panic: the unwind drops it, which
/// also releases the directory's lock. The process's panic hook still
/// prints sled's message: replacing the hook here would race with other
/// threads replacing or using it (a library cannot know who else does), so
/// the binary, which owns the process, is the one that may silence it.
fn open_sled(config: &sled::Config, dir: &Path) -> Result<sled::Result<sled::Db>> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| config.open())).map_err(|payload| panicked(dir, &*payload))
}

/// The error for sled panicking (with `payload`) while reading the store
/// in `dir`.
pub(super) fn panicked(dir: &Path, payload: &(dyn std::any::Any + Send)) -> Error {
    damaged(dir, &format!("sled panicked while reading them: {}", panic_text(payload)))
}

/// The message of a panic's payload (a `&str` or a `String` for every
/// `panic!` with a message), on one line.
fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    let text = match (payload.downcast_ref::<&str>(), payload.downcast_ref::<String>()) {
        (Some(s), _) => s,
        (_, Some(s)) => s.as_str(),
        _ => "no message",
    };
    text.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
}

/// The error for sled's files in `dir` being damaged beyond what sled's
/// own recovery handles; `detail` says what sled met.
fn damaged(dir: &Path, detail: &str) -> Error {
    Error::Corrupted {
        key: "<store>".into(),
        page: None,
        reason: format!(
            "sled cannot open its files in {}: they are damaged ({detail}). bitsled cannot repair sled's \
             files, and `bitsled verify` and `bitsled compact` cannot read them either: restore the \
             directory from a backup, then check it with `bitsled verify`",
            dir.display()
        ),
    }
}

/// The error for sled failing to open the store in `dir`: it names the
/// directory, and for damaged files what to do.
fn open_error(dir: &Path, e: sled::Error) -> Error {
    match e {
        sled::Error::Io(io) => {
            Error::Io(std::io::Error::new(io.kind(), format!("opening sled's files in {}: {io}", dir.display())))
        }
        sled::Error::Corruption { at: Some(at), .. } => damaged(dir, &format!("sled found a damaged record at {at}")),
        sled::Error::Corruption { at: None, .. } => damaged(dir, "sled found a damaged record"),
        // bitsled opens every store with the same sled version and
        // settings, so sled refusing its own settings file (`conf`) or
        // meeting an impossible state while recovering means damage.
        sled::Error::Unsupported(msg) | sled::Error::ReportableBug(msg) => damaged(dir, &msg),
        other => Error::Storage(Box::new(other)),
    }
}

/// How long `open` waits for another handle of the same directory to let go.
const LOCK_WAIT: Duration = Duration::from_secs(2);

/// Opens the sled database in `dir` with sled's defaults, waiting (as
/// [`SledStore::open`] does) for a handle just dropped to let go of the
/// directory's lock: for tests that damage or inspect a closed store's
/// records directly.
///
/// # Errors
/// sled's error if it does not open.
#[cfg(feature = "testing")]
pub(crate) fn open_raw(dir: &Path) -> std::result::Result<sled::Db, sled::Error> {
    let deadline = Instant::now() + LOCK_WAIT;
    loop {
        match sled::open(dir) {
            Err(sled::Error::Io(e)) if is_lock_error(&e) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            r => return r,
        }
    }
}

/// Whether sled failed to take the directory's file lock.
fn is_lock_error(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::WouldBlock || e.to_string().contains("could not acquire lock")
}

/// Removes `snap.*.generating` files: a snapshot interrupted by a crash is
/// truncated, and sled 0.34 then refuses to open (sled issue 1527). A
/// finished snapshot is renamed without the suffix, so these are never needed.
fn remove_unfinished_snapshots(dir: &Path) -> Result<()> {
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with("snap.") && name.ends_with(".generating") {
            fs::remove_file(entry.path())?;
        }
    }
    Ok(())
}

/// A scan over sled's iterator that ends after its first error: sled
/// 0.34's iterator retries the record it failed to read on every call, so
/// a damaged node would otherwise yield the same error forever.
fn scan_of(iter: sled::Iter) -> Scan {
    let mut iter = Some(iter);
    Box::new(std::iter::from_fn(move || {
        let r = iter.as_mut()?.next()?;
        if r.is_err() {
            iter = None;
        }
        Some(r.map_err(Error::from))
    }))
}

impl Store for SledStore {
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        Ok(self.db.get(key)?)
    }

    fn scan(&self, from: &[u8], to: &[u8]) -> Scan {
        scan_of(self.db.range(from.to_vec()..=to.to_vec()))
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Scan {
        scan_of(self.db.scan_prefix(prefix))
    }

    fn last_at_or_before(&self, key: &[u8]) -> Result<Option<(Bytes, Bytes)>> {
        Ok(self.db.range(..=key.to_vec()).next_back().transpose()?)
    }

    fn apply(&self, writes: Vec<Write>) -> Result<()> {
        let mut batch = sled::Batch::default();
        for (k, v) in writes {
            match v {
                Some(v) => batch.insert(k, v),
                None => batch.remove(k),
            }
        }
        self.db.apply_batch(batch)?;
        collect_garbage();
        Ok(())
    }

    fn next_id(&self) -> Result<u64> {
        Ok(self.db.generate_id()?)
    }

    fn sync(&self) -> Result<()> {
        self.db.flush()?;
        // sled's flush uses sync_file_range, which does not persist file
        // metadata; fsync the log file itself so the barrier is real.
        fs::File::open(self.dir.join("db"))?.sync_all()?;
        Ok(())
    }

    fn size_on_disk(&self) -> Result<u64> {
        Ok(self.db.size_on_disk()?)
    }

    fn is_empty(&self) -> bool {
        self.db.is_empty()
    }

    fn available_bytes(&self) -> Result<Option<u64>> {
        Ok(Some(fs2::available_space(&self.dir)?))
    }

    fn log_bytes(&self) -> u64 {
        fs::metadata(self.dir.join("db")).map_or(0, |m| m.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch is visible as a whole, scans are ordered, ids are increasing.
    #[test]
    fn batch_scan_and_ids() {
        let dir = tempfile::tempdir().unwrap();
        let s = SledStore::open(dir.path(), 1 << 20).unwrap();
        assert!(s.is_empty());
        s.apply(vec![(vec![2, 1], Some(vec![1])), (vec![2, 0], Some(vec![0])), (vec![3], Some(vec![3]))]).unwrap();
        let keys: Vec<Vec<u8>> = s.scan(&[2], &[2, 255]).map(|r| r.unwrap().0.to_vec()).collect();
        assert_eq!(keys, vec![vec![2, 0], vec![2, 1]]);
        s.apply(vec![(vec![3], None)]).unwrap();
        assert_eq!(s.get(&[3]).unwrap(), None);
        let a = s.next_id().unwrap();
        let b = s.next_id().unwrap();
        assert!(b > a);
        s.sync().unwrap();
    }

    /// A store with one record, closed.
    fn closed_store(dir: &Path) {
        let s = SledStore::open(dir, 1 << 20).unwrap();
        s.apply(vec![(vec![1], Some(vec![1; 100]))]).unwrap();
        s.sync().unwrap();
    }

    /// Inverts byte `at` of the file at `path`.
    fn flip_byte(path: &Path, at: usize) {
        let mut bytes = fs::read(path).unwrap();
        bytes[at] ^= 0xff;
        fs::write(path, &bytes).unwrap();
    }

    /// Whether `e` is the damaged-files error for `dir`: `Corrupted`,
    /// naming the directory and a way out.
    fn is_damage_report(e: &Error, dir: &Path) -> bool {
        matches!(e, Error::Corrupted { key, page: None, reason }
            if key == "<store>" && reason.contains(&dir.display().to_string()) && reason.contains("backup"))
    }

    /// A damaged `conf` (sled's settings file) is reported as damage of
    /// the named directory, whether sled finds it unreadable or its
    /// checksum wrong.
    #[test]
    fn damaged_settings_file_is_a_clear_error() {
        for at in [0, 20] {
            let dir = tempfile::tempdir().unwrap();
            closed_store(dir.path());
            flip_byte(&dir.path().join("conf"), at);
            let e = SledStore::open(dir.path(), 1 << 20).err().unwrap();
            assert!(is_damage_report(&e, dir.path()), "byte {at}: {e}");
        }
    }

    /// A snapshot file whose checksum fails is reported the same way.
    #[test]
    fn damaged_snapshot_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        closed_store(dir.path());
        // sled writes a snapshot while recovering a log that has grown.
        closed_store(dir.path());
        let snap = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("snap.")))
            .unwrap();
        flip_byte(&snap, 0);
        let e = SledStore::open(dir.path(), 1 << 20).err().unwrap();
        assert!(is_damage_report(&e, dir.path()), "{e}");
    }

    /// A directory another handle holds is refused with an I/O error of
    /// the lock's kind that names the directory.
    #[test]
    fn locked_directory_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let _held = SledStore::open(dir.path(), 1 << 20).unwrap();
        match SledStore::open(dir.path(), 1 << 20) {
            Err(Error::Io(e)) => assert!(e.to_string().contains(&dir.path().display().to_string()), "{e}"),
            other => panic!("{:?}", other.map(|_| "opened")),
        }
    }

    #[test]
    fn unfinished_snapshot_files_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("snap.0000000000001234.generating");
        fs::write(&junk, b"trunc").unwrap();
        let _s = SledStore::open(dir.path(), 1 << 20).unwrap();
        assert!(!junk.exists());
    }
}
