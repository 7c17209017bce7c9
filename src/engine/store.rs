//! A small trait over the ordered key-value store, and its sled implementation.
//!
//! The engine needs only point reads, ordered range scans, atomic batches, a
//! durable barrier and a persistent id generator. Keeping sled behind this
//! trait keeps the engine portable to another ordered store.

use std::fs;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use sled::IVec;

use super::generation::{self, Generation};
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
    /// Background upkeep of the store's files, a bounded step per call
    /// (sled: the online rewrite). The engine's background thread calls it
    /// between write-backs, with the number of keys the records hold: a
    /// measure of the live data, which tells growth by records from growth
    /// by garbage.
    fn maintain(&self, _keys: u64) -> Result<()> {
        Ok(())
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

/// The sled implementation: one default tree, in the directory of the
/// generation in use, and the online rewrite that replaces that tree with
/// a fresh copy of its live records when sled's files have grown well past
/// them (DESIGN.md section 5, "Store rewrites").
pub(crate) struct SledStore {
    /// The database directory (the generation file's).
    root: PathBuf,
    cache_bytes: u64,
    /// The tree in use. Readers clone the `Arc` and keep it while they
    /// read (a scan for its whole life), which tells a replaced tree when
    /// it has no reader left.
    live: RwLock<Arc<Tree>>,
    /// The rewrite's state. Every write takes this lock, so a copy step
    /// and a batch never interleave.
    rewrite: Mutex<Rewrite>,
    /// When the store was opened.
    opened: Instant,
}

/// One generation's sled tree.
struct Tree {
    db: sled::Db,
    dir: PathBuf,
    generation: Generation,
}

/// What the online rewrite is doing.
#[derive(Default)]
struct Rewrite {
    /// A batch was applied since the open: a store that is only read is
    /// never rewritten.
    written: bool,
    /// The copy under way.
    copy: Option<Copy>,
    /// The tree the last rewrite replaced, while readers still hold it:
    /// batches are applied to it too until the last one lets go, then its
    /// files are removed.
    retired: Option<Arc<Tree>>,
    /// The keys the records held when this process's last rewrite
    /// finished, the moment its size became the base; 0 before one (the
    /// base from the generation file may be from another process, whose
    /// keys are not known).
    keys_at_base: u64,
    /// The keys the records hold, as last told.
    keys: u64,
}

/// A copy of the tree in use into the next generation's.
struct Copy {
    tree: Tree,
    /// Every key up to this one (in key order) has been copied, and each
    /// batch's writes to such keys are applied to the copy too; `None`:
    /// nothing copied yet.
    copied_to: Option<Vec<u8>>,
}

/// sled's files may grow to this many times their size right after the
/// last rewrite before the next rewrite starts.
const REWRITE_GROWTH: u64 = 2;
/// Stores below this size on disk are never rewritten.
const REWRITE_FLOOR_BYTES: u64 = 64 << 20;
/// The bytes of sled's files a rewrite is taken to copy per second, on
/// the low side (BENCHMARKS.md, "Rewrites that a short process would
/// abandon"): a rewrite starts only once the store has been open as long
/// as copying it would take at this pace.
const COPY_PACE: u64 = 64 << 20;
/// One copy step copies at most this many bytes of records in one batch
/// (a batch holds up the store's writes while it is applied).
const COPY_STEP_BYTES: u64 = 1 << 20;
/// sled's cache of a copy while it is written (it becomes the tree in
/// use with this setting until the next open). A copy is written in key
/// order, so it only touches the right edge of its tree.
const COPY_CACHE_BYTES: u64 = 8 << 20;
/// [`Store::maintain`] copies for at most this long per call.
const COPY_TIME: Duration = Duration::from_millis(50);

/// The size after the last rewrite, `base`, grown in proportion to the
/// keys since (`keys` now, `keys_at_base` then), at most [`MAX_KEY_GROWTH`]
/// times: what the files would take had they grown by records alone. A
/// load of new keys grows the files by records, which a copy would only
/// write again; superseded versions and deleted records grow them with the
/// keys unchanged. Unchanged if the keys did not grow, or if there were
/// fewer than [`MIN_KEYS_AT_BASE`] then (a rewrite of a nearly empty store
/// says nothing of what a key costs).
fn grown_base(base: u64, keys: u64, keys_at_base: u64) -> u64 {
    if keys_at_base < MIN_KEYS_AT_BASE || keys <= keys_at_base {
        return base;
    }
    let grown = u128::from(base) * u128::from(keys) / u128::from(keys_at_base);
    let most = u128::from(base) * u128::from(MAX_KEY_GROWTH);
    u64::try_from(grown.min(most)).unwrap_or(u64::MAX)
}

/// Fewer keys than this at the last rewrite: its base is not grown.
const MIN_KEYS_AT_BASE: u64 = 1000;
/// The base grows at most this many times with the keys, so garbage can
/// never wait for more than this many times the usual growth.
const MAX_KEY_GROWTH: u64 = 16;

/// Opens (or creates) sled's tree in `dir` with its page cache limited to
/// `cache_bytes`.
fn open_tree(dir: &Path, cache_bytes: u64) -> Result<sled::Db> {
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
    loop {
        match open_sled(&config, dir)? {
            Err(sled::Error::Io(e)) if is_lock_error(&e) && Instant::now() < deadline => {
                std::thread::sleep(wait);
                wait = (wait * 2).min(Duration::from_millis(50));
            }
            Err(e) => return Err(open_error(dir, e)),
            Ok(db) => return Ok(db),
        }
    }
}

impl SledStore {
    /// Opens (or creates) the store in `dir` with sled's page cache limited to
    /// `cache_bytes`: the generation the generation file names, after
    /// which the files of any other generation (an unfinished rewrite, or
    /// the tree a finished one replaced) are removed.
    pub(crate) fn open(dir: &Path, cache_bytes: u64) -> Result<SledStore> {
        fs::create_dir_all(dir)?;
        let g = generation::read(dir)?;
        let tree_dir = generation::sled_dir(dir, g.number);
        if g.number != 0 && !tree_dir.join("db").is_file() {
            return Err(damaged(&tree_dir, "the generation file names this tree, and its log file is missing"));
        }
        let db = open_tree(&tree_dir, cache_bytes)?;
        generation::remove_others(dir, g.number)?;
        Ok(SledStore {
            root: dir.to_path_buf(),
            cache_bytes,
            live: RwLock::new(Arc::new(Tree { db, dir: tree_dir, generation: g })),
            rewrite: Mutex::new(Rewrite::default()),
            opened: Instant::now(),
        })
    }

    /// The tree in use, held.
    fn tree(&self) -> Arc<Tree> {
        Arc::clone(&self.live.read())
    }

    /// The generation in use.
    #[cfg(test)]
    fn generation(&self) -> Generation {
        self.tree().generation
    }

    /// Starts a rewrite if the tree in use has grown past its trigger, the
    /// store has been open as long as copying it would take at `pace`
    /// bytes a second, and the disk has room for a copy of the live bytes.
    /// A copy not finished when the store closes is thrown away, and a
    /// process that has been running for some time is likely to run about
    /// as long again: so a short process (a command-line call, a batch
    /// job's query) never starts a copy of a large store that it would
    /// abandon, each time, at the cost of its own reads and writes.
    fn start_rewrite(&self, rw: &mut Rewrite, floor: u64, growth: u64, pace: u64) -> Result<()> {
        let tree = self.tree();
        let size = tree.db.size_on_disk()?;
        let base = tree.generation.base_bytes;
        let trigger = floor.max(grown_base(base, rw.keys, rw.keys_at_base).saturating_mul(growth));
        if size < trigger || self.opened.elapsed() < Duration::from_millis(size.saturating_mul(1000) / pace.max(1)) {
            return Ok(());
        }
        // The copy takes about what the last one took, with room for
        // growth; a store never rewritten may need up to its whole size.
        let need = if base > 0 { base.saturating_mul(2) } else { size };
        if fs2::available_space(&self.root)? < need {
            return Ok(());
        }
        // The file names the tree in use unless a swap failed half way;
        // then no copy's files may be removed.
        if generation::read(&self.root)?.number != tree.generation.number {
            return Err(Error::Storage(
                "the generation file does not name the tree in use; rewrites stop until the store is reopened".into(),
            ));
        }
        let number = tree.generation.number + 1;
        generation::remove(&self.root, number)?;
        let dir = generation::sled_dir(&self.root, number);
        let db = open_tree(&dir, self.cache_bytes.min(COPY_CACHE_BYTES))?;
        let g = Generation { number, id_base: 0, base_bytes: 0 };
        rw.copy = Some(Copy { tree: Tree { db, dir, generation: g }, copied_to: None });
        Ok(())
    }

    /// Copies the next records (up to [`COPY_STEP_BYTES`]) into the copy;
    /// at the end of the tree, makes the copy the store. Returns whether
    /// there is more to copy.
    fn copy_step(&self, rw: &mut Rewrite, step: u64) -> Result<bool> {
        let Some(copy) = rw.copy.as_mut() else { return Ok(false) };
        let tree = self.tree();
        let lo = copy.copied_to.as_deref().map_or(Bound::Unbounded, |k| Bound::Excluded(k.into()));
        let mut records = Records::new(Arc::clone(&tree), lo, Bound::Unbounded);
        let mut batch = sled::Batch::default();
        let mut bytes = 0;
        let mut last = None;
        let more = loop {
            let Some(r) = records.next() else { break false };
            let (k, v) = r?;
            bytes += (k.len() + v.len()) as u64;
            batch.insert(k.clone(), v);
            last = Some(k);
            if bytes >= step {
                break true;
            }
        };
        drop(records);
        copy.tree.db.apply_batch(batch)?;
        collect_garbage();
        if let Some(k) = last {
            copy.copied_to = Some(k.to_vec());
        }
        if !more {
            self.finish_rewrite(rw, &tree)?;
        }
        Ok(more)
    }

    /// Makes the finished copy the store: synced, named by the generation
    /// file, then swapped in. The replaced tree is retired (applied to
    /// until its last reader lets go).
    fn finish_rewrite(&self, rw: &mut Rewrite, old: &Arc<Tree>) -> Result<()> {
        let Some(mut copy) = rw.copy.take() else { return Ok(()) };
        let mut prepare = || -> Result<()> {
            copy.tree.db.flush()?;
            sync_tree_files(&copy.tree.dir)?;
            // Past every id the old tree gave out (`next_id` waits for this
            // lock, so none is given out meanwhile).
            copy.tree.generation.id_base =
                old.generation.id_base.saturating_add(old.db.generate_id()?).saturating_add(1);
            copy.tree.generation.base_bytes = copy.tree.db.size_on_disk()?;
            Ok(())
        };
        if let Err(e) = prepare().and_then(|()| generation::write(&self.root, &copy.tree.generation)) {
            // The rename may have been made before the error (a failed
            // directory sync): whatever the file names is the store.
            match generation::read(&self.root) {
                Ok(g) if g == copy.tree.generation => {}
                Ok(_) => {
                    discard(&self.root, copy.tree);
                    return Err(e);
                }
                // Which tree the file names is not known: keep both
                // (`start_rewrite` checks the file before it removes one).
                Err(_) => return Err(e),
            }
        }
        rw.keys_at_base = rw.keys;
        let old = std::mem::replace(&mut *self.live.write(), Arc::new(copy.tree));
        rw.retired = Some(old);
        self.release_retired(rw);
        Ok(())
    }

    /// Removes the retired tree's files once nobody reads it.
    fn release_retired(&self, rw: &mut Rewrite) {
        // No new reader can take the retired tree, so one holder is this.
        if let Some(t) = rw.retired.take_if(|t| Arc::strong_count(t) == 1).and_then(|t| Arc::try_unwrap(t).ok()) {
            discard(&self.root, t);
            // A replaced tree frees what sled held for it (about 0.4
            // bytes of every byte it wrote or read: section 12 of
            // DESIGN.md) in one go.
            crate::heap::return_freed_memory();
        }
    }

    /// Runs the rewrite as [`Store::maintain`] does until `deadline`, with
    /// `floor`, `growth`, `pace` and `step` in place of
    /// [`REWRITE_FLOOR_BYTES`], [`REWRITE_GROWTH`], [`COPY_PACE`] and
    /// [`COPY_STEP_BYTES`], calling `between` between steps (tests write
    /// there).
    fn maintain_with(
        &self,
        (floor, growth, pace): (u64, u64, u64),
        (step, keys): (u64, u64),
        deadline: Instant,
        mut between: impl FnMut(),
    ) -> Result<()> {
        self.rewrite.lock().keys = keys;
        loop {
            let more = {
                let mut rw = self.rewrite.lock();
                self.release_retired(&mut rw);
                if rw.copy.is_none() {
                    if !rw.written || rw.retired.is_some() {
                        return Ok(());
                    }
                    self.start_rewrite(&mut rw, floor, growth, pace)?;
                    if rw.copy.is_none() {
                        return Ok(());
                    }
                }
                match self.copy_step(&mut rw, step) {
                    Ok(more) => {
                        self.release_retired(&mut rw);
                        more
                    }
                    Err(e) => {
                        // Abandon the copy; the tree in use is untouched.
                        if let Some(c) = rw.copy.take() {
                            discard(&self.root, c.tree);
                        }
                        return Err(e);
                    }
                }
            };
            if !more || Instant::now() >= deadline {
                return Ok(());
            }
            between();
        }
    }
}

impl Drop for SledStore {
    /// An unfinished copy is not the store: its files go now rather than
    /// at the next open (as do a retired tree's, whose readers are gone).
    fn drop(&mut self) {
        let rw = self.rewrite.get_mut();
        let copy = rw.copy.take().map(|c| c.tree);
        let retired = rw.retired.take().and_then(|t| Arc::try_unwrap(t).ok());
        for tree in copy.into_iter().chain(retired) {
            discard(&self.root, tree);
        }
    }
}

/// Closes `tree` (its last handle) and removes its files. Best effort:
/// what is left is removed at the next open.
fn discard(root: &Path, tree: Tree) {
    let number = tree.generation.number;
    drop(tree);
    let _ = generation::remove(root, number);
}

/// Syncs a finished copy's files and their directories (sled syncs none
/// of them itself, and its `conf` and `blobs/` come with the tree), so
/// that the generation file never names a tree a power loss could take.
fn sync_tree_files(dir: &Path) -> Result<()> {
    fs::File::open(dir.join("db"))?.sync_all()?;
    fs::File::open(dir.join("conf"))?.sync_all()?;
    if dir.join("blobs").is_dir() {
        fs::File::open(dir.join("blobs"))?.sync_all()?;
    }
    fs::File::open(dir)?.sync_all()?;
    Ok(())
}

/// The writes of `writes` a copy that has reached `copied_to` must apply.
fn copied_part(writes: &[Write], copied_to: Option<&[u8]>) -> Vec<Write> {
    let Some(to) = copied_to else { return Vec::new() };
    writes.iter().filter(|(k, _)| &k[..] <= to).cloned().collect()
}

/// A sled batch of `writes`.
fn batch_of(writes: Vec<Write>) -> sled::Batch {
    let mut batch = sled::Batch::default();
    for (k, v) in writes {
        match v {
            Some(v) => batch.insert(k, v),
            None => batch.remove(k),
        }
    }
    batch
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

/// Bytes of records a scan reads through one `sled::Iter` before it goes on
/// with a fresh one.
///
/// sled 0.34's iterator reads a leaf (up to 16 records) once and hands its
/// records out from a copy, so sled's LRU sees one access per leaf; the LRU
/// evicts a shard's nodes only after 64 accesses have queued there, and a
/// long scan of large records left most of what it read on the heap:
/// iterating 1 GiB of 4 KiB records peaked at 450 MiB allocated with a
/// 32 MiB cache, 80-100 MiB with a fresh iterator every 4 KiB, 143 MiB every
/// 8 KiB, 209 MiB every 16 KiB, at the same speed (BENCHMARKS.md, "Scans a
/// record at a time"). Small records still share an iterator, which spares
/// them a tree descent each (a scan of 10^5 small keys' records took 1.3x
/// the time a record at a time).
const SCAN_RESTART_BYTES: usize = 4096;

/// The records of `tree` within `(lo, hi)` in key order, through sled
/// iterators of [`SCAN_RESTART_BYTES`] each; ends after its first error
/// (sled 0.34 would fail on the same record again on every call).
///
/// It holds `tree` until it ends, so a rewrite knows the tree it replaced
/// still has a reader.
struct Records {
    /// `None` once the scan has ended.
    tree: Option<Arc<Tree>>,
    lo: Bound<IVec>,
    hi: Bound<IVec>,
    iter: Option<sled::Iter>,
    /// Bytes read through `iter`.
    read: usize,
}

impl Records {
    fn new(tree: Arc<Tree>, lo: Bound<IVec>, hi: Bound<IVec>) -> Records {
        Records { tree: Some(tree), lo, hi, iter: None, read: 0 }
    }
}

impl Iterator for Records {
    type Item = sled::Result<(IVec, IVec)>;

    fn next(&mut self) -> Option<Self::Item> {
        let (tree, lo, hi) = (self.tree.as_ref()?, &self.lo, &self.hi);
        let r = self.iter.get_or_insert_with(|| tree.db.range((lo.clone(), hi.clone()))).next();
        if let Some(Ok((k, v))) = &r {
            self.read += k.len() + v.len();
            if self.read >= SCAN_RESTART_BYTES {
                self.iter = None;
                self.read = 0;
            }
            self.lo = Bound::Excluded(k.clone());
        } else {
            self.iter = None;
            self.tree = None;
        }
        r
    }
}

/// A [`Scan`] of the records of `tree` within `(lo, hi)`.
fn scan_of(tree: Arc<Tree>, lo: Bound<IVec>, hi: Bound<IVec>) -> Scan {
    Box::new(Records::new(tree, lo, hi).map(|r| r.map_err(Error::from)))
}

/// The upper bound of the keys that start with `prefix`: the shortest key
/// past all of them, if any.
fn prefix_end(prefix: &[u8]) -> Bound<IVec> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return Bound::Excluded(end.into());
        }
    }
    Bound::Unbounded
}

impl Store for SledStore {
    fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        // A point read under the read guard needs no hold on the tree: a
        // swap waits for it.
        Ok(self.live.read().db.get(key)?)
    }

    fn scan(&self, from: &[u8], to: &[u8]) -> Scan {
        scan_of(self.tree(), Bound::Included(from.into()), Bound::Included(to.into()))
    }

    fn scan_prefix(&self, prefix: &[u8]) -> Scan {
        scan_of(self.tree(), Bound::Included(prefix.into()), prefix_end(prefix))
    }

    fn last_at_or_before(&self, key: &[u8]) -> Result<Option<(Bytes, Bytes)>> {
        Ok(self.live.read().db.range(..=key.to_vec()).next_back().transpose()?)
    }

    fn apply(&self, writes: Vec<Write>) -> Result<()> {
        let mut rw = self.rewrite.lock();
        rw.written = true;
        let copied = rw.copy.as_ref().map(|c| copied_part(&writes, c.copied_to.as_deref()));
        let retired = rw.retired.as_ref().filter(|t| Arc::strong_count(t) > 1).map(|_| writes.clone());
        self.tree().db.apply_batch(batch_of(writes))?;
        if let (Some(part), Some(copy)) = (copied, rw.copy.as_ref()) {
            if !part.is_empty() {
                if let Err(_e) = copy.tree.db.apply_batch(batch_of(part)) {
                    // The copy can no longer be made whole: abandon it.
                    if let Some(c) = rw.copy.take() {
                        discard(&self.root, c.tree);
                    }
                }
            }
        }
        if let (Some(all), Some(old)) = (retired, rw.retired.as_ref()) {
            // Its readers must see what they would have seen in the tree
            // in use; the tree is gone at the next open either way.
            let _ = old.db.apply_batch(batch_of(all));
        }
        self.release_retired(&mut rw);
        drop(rw);
        collect_garbage();
        Ok(())
    }

    fn next_id(&self) -> Result<u64> {
        let _rw = self.rewrite.lock();
        let tree = self.tree();
        Ok(tree.generation.id_base.saturating_add(tree.db.generate_id()?))
    }

    fn sync(&self) -> Result<()> {
        let tree = self.tree();
        tree.db.flush()?;
        // sled's flush uses sync_file_range, which does not persist file
        // metadata; fsync the log file itself so the barrier is real.
        fs::File::open(tree.dir.join("db"))?.sync_all()?;
        Ok(())
    }

    fn size_on_disk(&self) -> Result<u64> {
        let mut size = self.tree().db.size_on_disk()?;
        if let Some(c) = self.rewrite.lock().copy.as_ref() {
            size += c.tree.db.size_on_disk()?;
        }
        Ok(size)
    }

    fn is_empty(&self) -> bool {
        self.live.read().db.is_empty()
    }

    fn available_bytes(&self) -> Result<Option<u64>> {
        Ok(Some(fs2::available_space(&self.root)?))
    }

    fn log_bytes(&self) -> u64 {
        fs::metadata(self.tree().dir.join("db")).map_or(0, |m| m.len())
    }

    fn maintain(&self, keys: u64) -> Result<()> {
        self.maintain_with(
            (REWRITE_FLOOR_BYTES, REWRITE_GROWTH, COPY_PACE),
            (COPY_STEP_BYTES, keys),
            Instant::now() + COPY_TIME,
            || (),
        )
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// Invariant: a scan yields exactly the records of its range in key
    /// order whatever their sizes, across its restarts of sled's iterator
    /// (every 4 KiB read): records of 1 byte to 9 KiB under keys of
    /// several prefixes, checked against a sorted map for ranges, prefix
    /// scans (including a prefix ending in 0xFF, whose end bound carries)
    /// and a rewrite's copy, which reads the same way.
    #[test]
    fn scans_yield_every_record_across_iterator_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let s = SledStore::open(dir.path(), 1 << 20).unwrap();
        let mut model = BTreeMap::new();
        for i in 0u32..600 {
            let prefix = [1u8, 0x7F, 0xFF][(i % 3) as usize];
            let key = [&[prefix][..], &i.to_be_bytes()].concat();
            let value = vec![u8::try_from(i % 251).unwrap(); (i as usize * 37) % 9_000 + 1];
            model.insert(key, value);
        }
        s.apply(model.iter().map(|(k, v)| (k.clone(), Some(v.clone()))).collect()).unwrap();
        let expect = |lo: &[u8], hi: &[u8]| -> Vec<(Vec<u8>, Vec<u8>)> {
            model.range(lo.to_vec()..=hi.to_vec()).map(|(k, v)| (k.clone(), v.clone())).collect()
        };
        let got = |scan: Scan| -> Vec<(Vec<u8>, Vec<u8>)> {
            scan.map(|r| r.unwrap()).map(|(k, v)| (k.to_vec(), v.to_vec())).collect()
        };
        assert_eq!(got(s.scan(&[0], &[0xFF, 0xFF, 0xFF, 0xFF, 0xFF])), expect(&[0], &[0xFF; 5]));
        assert_eq!(got(s.scan(&[1, 0, 0, 0, 40], &[0x7F, 0, 0, 1, 0])), expect(&[1, 0, 0, 0, 40], &[0x7F, 0, 0, 1, 0]));
        for prefix in [1u8, 0x7F, 0xFF] {
            let want: Vec<_> =
                model.iter().filter(|(k, _)| k[0] == prefix).map(|(k, v)| (k.clone(), v.clone())).collect();
            assert_eq!(got(s.scan_prefix(&[prefix])), want);
            assert_eq!(want.len(), 200);
        }
        assert_eq!(prefix_end(&[1, 0xFF]), Bound::Excluded(IVec::from(&[2u8][..])));
        assert_eq!(prefix_end(&[0xFF, 0xFF]), Bound::Unbounded);
    }

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

    /// The records of `s`, in key order.
    fn contents(s: &SledStore) -> Vec<(Vec<u8>, Vec<u8>)> {
        s.scan(&[], &[255; 8]).map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec()))).collect::<Result<_>>().unwrap()
    }

    /// Applies `writes` to the store and to the model.
    fn write(s: &SledStore, model: &mut BTreeMap<Vec<u8>, Vec<u8>>, writes: Vec<Write>) {
        for (k, v) in &writes {
            match v {
                Some(v) => model.insert(k.clone(), v.clone()),
                None => model.remove(k),
            };
        }
        s.apply(writes).unwrap();
    }

    /// A batch of inserts and removals spread over the key space, seeded by
    /// `round`.
    fn mixed_batch(round: u64) -> Vec<Write> {
        (0..40u64)
            .map(|i| {
                let k = (round.wrapping_mul(7919) + i * 104_729) % 3_000;
                let key = format!("k{k:05}").into_bytes();
                let value = (i % 5 != 0).then(|| vec![(round + i).to_le_bytes()[0]; 1 + (k as usize % 300)]);
                (key, value)
            })
            .collect()
    }

    /// A rewrite copies in small steps while batches land between them
    /// (keys before and after the copy's position, inserts and removals):
    /// the new generation holds exactly what a model of every batch holds,
    /// ids keep rising across it and across a reopen, and the replaced
    /// tree's files are gone.
    #[test]
    fn rewrite_keeps_every_record_and_ids_go_on() {
        let dir = tempfile::tempdir().unwrap();
        let mut model = BTreeMap::new();
        let id_before;
        {
            let s = SledStore::open(dir.path(), 1 << 20).unwrap();
            for round in 0..50 {
                write(&s, &mut model, mixed_batch(round));
            }
            id_before = s.next_id().unwrap();
            let mut round = 50;
            let far = Instant::now() + Duration::from_secs(600);
            s.maintain_with((0, 0, u64::MAX), (4 << 10, 0), far, || {
                write(&s, &mut model, mixed_batch(round));
                round += 1;
            })
            .unwrap();
            assert!(round > 60, "the copy took {} steps", round - 50);
            assert_eq!(s.generation().number, 1);
            assert_eq!(contents(&s), model.clone().into_iter().collect::<Vec<_>>());
            assert!(s.next_id().unwrap() > id_before);
            assert!(!dir.path().join("db").exists(), "generation 0's log is removed");
            assert!(dir.path().join("generation-1").join("db").is_file());
            write(&s, &mut model, mixed_batch(999));
        }
        let s = SledStore::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(s.generation().number, 1);
        assert!(s.generation().base_bytes > 0);
        assert_eq!(contents(&s), model.into_iter().collect::<Vec<_>>());
        assert!(s.next_id().unwrap() > id_before);
    }

    /// Invariant: a read that begins after a batch was applied sees it,
    /// whatever rewrites run meanwhile: a writer applies numbered batches
    /// and then publishes the number, a reader reads the number and then a
    /// key (never older than it), and a third thread runs rewrites back to
    /// back.
    #[test]
    fn reads_after_a_batch_see_it_across_rewrites() {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        let dir = tempfile::tempdir().unwrap();
        let s = SledStore::open(dir.path(), 1 << 20).unwrap();
        // Bulk to copy, so rewrites take several steps.
        s.apply((0..400u32).map(|i| (format!("fill{i:04}").into_bytes(), Some(vec![1; 500]))).collect()).unwrap();
        let published = AtomicU64::new(0);
        let rounds = AtomicU64::new(0);
        let done = AtomicBool::new(false);
        // The writer goes on until the rewriter has finished three rounds
        // (and at least 300 batches), so the test does not depend on how
        // fast either thread runs.
        let last = std::thread::scope(|t| {
            let rewriter = t.spawn(|| {
                while !done.load(Ordering::SeqCst) {
                    s.maintain_with((0, 0, u64::MAX), (16 << 10, 0), Instant::now() + Duration::from_secs(60), || ())
                        .unwrap();
                    rounds.fetch_add(1, Ordering::SeqCst);
                }
            });
            t.spawn(|| {
                while !done.load(Ordering::SeqCst) {
                    let v = published.load(Ordering::SeqCst);
                    for k in [&b"a"[..], b"m", b"z"] {
                        let got = s.get(k).unwrap().map_or(0, |b| u64::from_le_bytes(b[..8].try_into().unwrap()));
                        assert!(got >= v, "key {k:?}: read {got} after batch {v} was applied");
                    }
                }
            });
            let mut v = 0u64;
            while v < 300 || rounds.load(Ordering::SeqCst) < 3 {
                assert!(!rewriter.is_finished(), "the rewriter stopped");
                v += 1;
                let value = v.to_le_bytes().to_vec();
                s.apply(vec![
                    (b"a".to_vec(), Some(value.clone())),
                    (b"m".to_vec(), Some(value.clone())),
                    (b"z".to_vec(), Some(value)),
                ])
                .unwrap();
                published.store(v, Ordering::SeqCst);
            }
            done.store(true, Ordering::SeqCst);
            rewriter.join().unwrap();
            v
        });
        assert!(s.generation().number >= 2, "generation {}", s.generation().number);
        assert_eq!(s.get(b"m").unwrap().unwrap().to_vec(), last.to_le_bytes().to_vec());
    }

    /// A scan begun before a rewrite finished reads the replaced tree,
    /// and still sees what batches applied after the swap wrote; the
    /// replaced tree's files stay while the scan reads and go once it has
    /// ended.
    #[test]
    fn a_scan_across_a_rewrite_sees_later_batches() {
        let dir = tempfile::tempdir().unwrap();
        let s = SledStore::open(dir.path(), 1 << 20).unwrap();
        let mut model = BTreeMap::new();
        write(&s, &mut model, (0..100u8).map(|i| (vec![b'a', i], Some(vec![i]))).collect());
        let mut scan = s.scan(b"a", b"b");
        assert_eq!(scan.next().unwrap().unwrap().0.to_vec(), vec![b'a', 0]);
        s.maintain_with((0, 0, u64::MAX), (1 << 20, 0), Instant::now() + Duration::from_secs(600), || ()).unwrap();
        assert_eq!(s.generation().number, 1);
        s.apply(vec![(vec![b'a', 90], Some(vec![7, 7])), (vec![b'a', 91], None)]).unwrap();
        s.maintain(0).unwrap();
        assert!(dir.path().join("db").exists(), "kept while the scan reads it");
        let rest: Vec<(Vec<u8>, Vec<u8>)> =
            scan.by_ref().map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap()).collect();
        assert_eq!(rest.len(), 98);
        assert!(rest.contains(&(vec![b'a', 90], vec![7, 7])));
        assert!(!rest.iter().any(|(k, _)| k == &vec![b'a', 91]));
        // The scan has ended: it holds the tree no longer.
        s.maintain(0).unwrap();
        assert!(!dir.path().join("db").exists());
        drop(scan);
    }

    /// What a crash leaves of a rewrite is removed at the next open: a
    /// copy the generation file does not name (the store is untouched),
    /// and the tree a finished rewrite replaced.
    #[test]
    fn leftovers_of_a_rewrite_are_removed_at_open() {
        let dir = tempfile::tempdir().unwrap();
        closed_store(dir.path());
        let unfinished = generation::sled_dir(dir.path(), 1);
        fs::create_dir(&unfinished).unwrap();
        fs::write(unfinished.join("db"), b"half a copy").unwrap();
        {
            let s = SledStore::open(dir.path(), 1 << 20).unwrap();
            assert!(!unfinished.exists());
            assert_eq!(s.get(&[1]).unwrap().unwrap().to_vec(), vec![1; 100]);
            s.apply(vec![(vec![2], Some(vec![2]))]).unwrap();
            s.maintain_with((0, 0, u64::MAX), (1 << 20, 0), Instant::now() + Duration::from_secs(600), || ()).unwrap();
            // A crash before the replaced tree's files went: put some back.
            fs::write(dir.path().join("db"), b"old log").unwrap();
        }
        let s = SledStore::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(s.generation().number, 1);
        assert!(!dir.path().join("db").exists());
        assert_eq!(s.get(&[1]).unwrap().unwrap().to_vec(), vec![1; 100]);
        assert_eq!(s.get(&[2]).unwrap().unwrap().to_vec(), vec![2]);
    }

    /// Closing the store in the middle of a copy removes the copy; the
    /// store reopens as it was.
    #[test]
    fn closing_during_a_copy_removes_it() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = SledStore::open(dir.path(), 1 << 20).unwrap();
            s.apply((0..200u32).map(|i| (i.to_be_bytes().to_vec(), Some(vec![3; 200]))).collect()).unwrap();
            s.maintain_with((0, 0, u64::MAX), (1 << 10, 0), Instant::now(), || ()).unwrap();
            assert!(generation::sled_dir(dir.path(), 1).exists(), "a copy is under way");
            assert_eq!(s.generation().number, 0);
        }
        assert!(!generation::sled_dir(dir.path(), 1).exists());
        let s = SledStore::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(s.generation().number, 0);
        assert_eq!(contents(&s).len(), 200);
    }

    /// A store that is only read is never rewritten, and nothing is
    /// rewritten below the floor.
    #[test]
    fn read_only_and_small_stores_are_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        closed_store(dir.path());
        let s = SledStore::open(dir.path(), 1 << 20).unwrap();
        s.maintain_with((0, 0, u64::MAX), (1 << 20, 0), Instant::now() + Duration::from_secs(600), || ()).unwrap();
        assert_eq!(s.generation().number, 0);
        s.apply(vec![(vec![2], Some(vec![2]))]).unwrap();
        s.maintain(0).unwrap();
        assert_eq!(s.generation().number, 0);
    }

    /// A store open for less time than copying it would take at the
    /// pace starts no rewrite; once that long has passed, it does.
    #[test]
    fn a_rewrite_waits_until_the_store_has_been_open_as_long_as_the_copy_takes() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SledStore::open(dir.path(), 1 << 20).unwrap();
        s.apply((0..200u32).map(|i| (i.to_be_bytes().to_vec(), Some(vec![3; 200]))).collect()).unwrap();
        // Flushed, so the size stays put (sled's own flush would grow it).
        s.tree().db.flush().unwrap();
        let size = || s.tree().db.size_on_disk().unwrap();
        // A pace at which the copy takes 50 s or more.
        let pace = (size() / 50).max(1);
        let far = Instant::now() + Duration::from_secs(600);
        s.maintain_with((0, 0, pace), (1 << 20, 0), far, || ()).unwrap();
        assert_eq!(s.generation().number, 0, "open for less than the copy would take");
        assert!(!generation::sled_dir(dir.path(), 1).exists());
        // As if opened as long ago as the copy takes, and a second more.
        let copy = Duration::from_millis(size() * 1000 / pace) + Duration::from_secs(1);
        s.opened = s.opened.checked_sub(copy).expect("the clock has run that long since boot");
        s.maintain_with((0, 0, pace), (1 << 20, 0), far, || ()).unwrap();
        assert_eq!(s.generation().number, 1);
        assert_eq!(contents(&s).len(), 200);
    }

    /// Invariant: a store whose files grew with its keys since the last
    /// rewrite (a load of new keys) is not copied again at twice its size
    /// after that rewrite; the same files with the keys as they were
    /// (growth by garbage) are.
    #[test]
    fn a_store_grown_by_new_keys_waits_for_its_rewrite() {
        let dir = tempfile::tempdir().unwrap();
        let s = SledStore::open(dir.path(), 1 << 20).unwrap();
        let put = |from: u32, to: u32| {
            s.apply((from..to).map(|i| (i.to_be_bytes().to_vec(), Some(vec![7; 1000]))).collect()).unwrap();
            s.tree().db.flush().unwrap();
        };
        let far = Instant::now() + Duration::from_secs(600);
        let maintain = |keys: u64| s.maintain_with((0, 2, u64::MAX), (1 << 20, keys), far, || ()).unwrap();
        put(0, 2000);
        maintain(2000);
        assert_eq!(s.generation().number, 1, "the first rewrite");
        let base = s.generation().base_bytes;
        put(2000, 5000);
        let size = s.tree().db.size_on_disk().unwrap();
        assert!(size > 2 * base && size < 5 * base, "{size} bytes against {base} after the rewrite");
        maintain(5000);
        assert_eq!(s.generation().number, 1, "2.5 times the keys: the files may grow 2.5 times as much");
        maintain(2000);
        assert_eq!(s.generation().number, 2, "as many keys as at the rewrite: twice its size starts the next");
        assert_eq!(contents(&s).len(), 5000);
    }

    /// The size after a rewrite grown in proportion to the keys since, at
    /// most 16 times, and only from a rewrite of 1000 keys or more.
    #[test]
    fn grown_base_scales_with_the_keys() {
        assert_eq!(grown_base(100, 3000, 1000), 300);
        assert_eq!(grown_base(100, 500, 1000), 100, "fewer keys: the base as it was");
        assert_eq!(grown_base(100, 3000, 0), 100, "no rewrite in this process");
        assert_eq!(grown_base(100, 3000, 999), 100, "a rewrite of too few keys");
        assert_eq!(grown_base(100, 10u64.pow(9), 1000), 1600, "at most 16 times");
        assert_eq!(grown_base(u64::MAX, 2000, 1000), u64::MAX);
    }

    /// A generation file naming a tree whose log is missing is damage,
    /// not an empty store.
    #[test]
    fn a_named_tree_without_its_log_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        closed_store(dir.path());
        generation::write(dir.path(), &Generation { number: 4, id_base: 0, base_bytes: 1 }).unwrap();
        let e = SledStore::open(dir.path(), 1 << 20).err().unwrap();
        assert!(matches!(&e, Error::Corrupted { reason, .. } if reason.contains("generation file")), "{e}");
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
