//! The write-back of dirty state to the store as one atomic batch (the
//! pages of values no key in the store names yet before and after it, in
//! batches of their own), the
//! durability barrier, the durable write-back number in the side file, and
//! the reclamation of dead bitmaps and flushed keyspaces.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use parking_lot::MutexGuard;

use super::bucket::Bucket;
use super::delta::{self, Change};
use super::journal::{self, JournalEntry};
use super::layout;
use super::metas::Fold;
use super::pagedelta::{self, Folding, PageLog};
use super::pages::{DirtyPage, PageId};
use super::pagewrites::{page_writes, plan_pages, same_group};
use super::record::{
    self, Catalog, Kind, Meta, FORMAT_V1, FORMAT_V10, FORMAT_V2, FORMAT_V3, FORMAT_V4, FORMAT_V5, FORMAT_V6, FORMAT_V7,
    FORMAT_V8, FORMAT_V9,
};
use super::store::{Store, Write};
use super::tx::inline_meta;
use super::{upgrade, Engine};
use crate::bloom::small;
use crate::error::{Error, Result};

/// Records deleted (pages, buckets) per reclamation step: each write-back
/// and each background tick does at most this much, so a flushed keyspace
/// or a huge deleted bitmap never holds up writes for long.
const RECLAIM_BUDGET: usize = 32_768;

/// Records per reclamation batch.
const RECLAIM_BATCH: usize = 512;

/// How long open spends reclaiming before it hands the rest to the
/// background.
const OPEN_RECLAIM: Duration = Duration::from_secs(1);

/// Bytes of page delta records below which no page fold is due (beyond
/// it, a fold is due once the records are as large as the logged pages).
const PAGE_FOLD_FLOOR: usize = 256 << 10;

/// Bytes of logged pages one step of a page fold writes whole at most, and
/// of records one step deletes: sled holds every leaf a batch touches
/// until the batch ends, so a fold of every logged page in one batch, or
/// the deletion of every record it retires, left a step in resident
/// memory.
const PAGE_FOLD_STEP: usize = 1 << 20;

/// Bytes of records per sled batch for the pages of values no key in the
/// store names yet (still being built, or published since the last
/// write-back), which a write-back stores outside its atomic batch: sled holds
/// what a batch touches until the batch ends (a plain sled tree given
/// 32 MiB batches of 4 KiB values kept about 0.7 GiB; BENCHMARKS.md,
/// "Large values in small batches").
const BUILD_BATCH_BYTES: usize = 1 << 20;

/// How a write-back folds the logged pages.
enum PageFold {
    /// Not at all.
    None,
    /// Every logged page written whole, every page delta record deleted.
    All,
    /// A step of a fold spread over write-backs: the logged pages it
    /// writes whole.
    Step(HashSet<PageId>),
}

/// A delta record's key as the fixed-size array its kind (`what`) uses.
///
/// # Errors
/// [`Error::Corrupted`] for a key of another length.
fn fixed_key<const N: usize>(key: &[u8], what: &str) -> Result<[u8; N]> {
    <[u8; N]>::try_from(key).map_err(|_| Error::Corrupted {
        key: format!("<{what}>"),
        page: None,
        reason: format!("malformed {what} key {key:?}"),
    })
}

/// The bitmap ids a captured journal marks for reclamation.
fn dead_ids(journal: &[JournalEntry]) -> HashSet<u64> {
    journal.iter().filter(|(_, _, v)| v.is_some()).filter_map(|(k, _, _)| layout::parse_reclaim_key(k)).collect()
}

/// The bitmap ids whose reclaim marker a captured journal removes: built
/// values a transaction published (and no later one dropped) since the
/// last write-back's capture. Until the write-back's atomic batch is
/// stored, no key in the store names them.
fn published_ids(journal: &[JournalEntry]) -> HashSet<u64> {
    journal.iter().filter(|(_, _, v)| v.is_none()).filter_map(|(k, _, _)| layout::parse_reclaim_key(k)).collect()
}

/// The side file recording the last write-back a flush made durable.
const SEQUENCE_FILE: &str = "bitsled.seq";

/// What open learns from the store.
pub(super) struct Opened {
    /// Number of the last write-back in the store.
    pub(super) sequence: u64,
    /// Number the side file records (0 if none).
    pub(super) acked: u64,
    pub(super) catalog: Catalog,
}

/// At open: checks the superblock (or creates a new store with `databases`
/// databases, or upgrades a format 1 store), and that the store holds every
/// write-back a flush acknowledged.
pub(super) fn check_or_create(dir: &Path, store: &dyn Store, databases: u16) -> Result<Opened> {
    match store.get(&layout::superblock_key())? {
        Some(b) => {
            let version = record::check_superblock(&b)?;
            if version == FORMAT_V1 {
                upgrade::from_v1(store, databases)?;
            } else if store.scan_prefix(&[layout::NS_META_V1]).next().is_some() {
                upgrade::remove_v1_leftovers(store)?;
            }
            if [FORMAT_V2, FORMAT_V3, FORMAT_V4, FORMAT_V5, FORMAT_V6, FORMAT_V7, FORMAT_V8, FORMAT_V9, FORMAT_V10]
                .contains(&version)
            {
                upgrade::to_current(store)?;
            }
            upgrade::remove_expiry_index(store)?;
        }
        // A new store's superblock is made durable, and then the side
        // file written, before anything else: an empty store beside a
        // side file means sled dropped damaged records. Do not start
        // afresh over them. (Without a side file, creation itself was
        // cut short, and nothing was ever acknowledged.)
        None if store.is_empty() && read_side_sequence(dir)?.is_some() => {
            return Err(Error::Corrupted {
                key: "<store>".into(),
                page: None,
                reason: format!(
                    "sled recovered no records from a {}-byte log (damaged?), but this database was created and \
                     flushed before; refusing to create a new database over it: restore the directory from a \
                     backup, or remove it to start afresh",
                    store.log_bytes()
                ),
            });
        }
        None if store.is_empty() => {
            store.apply(vec![
                (layout::superblock_key(), Some(record::encode_superblock())),
                (layout::catalog_key(), Some(Catalog::new(databases).encode())),
            ])?;
            store.sync()?;
            write_side_sequence(dir, 0)?;
        }
        None => {
            return Err(Error::Corrupted {
                key: "<superblock>".into(),
                page: None,
                reason: "store has records but no bitsled superblock".into(),
            })
        }
    }
    let catalog = read_catalog(store)?;
    // Every write-back carries its number; every flush records the number
    // it made durable in a side file. A store behind its side file lost
    // acknowledged writes (sled drops a damaged log's tail).
    let sequence = match store.get(&layout::sequence_key())? {
        Some(b) => record::decode_sequence(&b, "<sequence>")?,
        None => 0,
    };
    let acked = read_side_sequence(dir)?;
    if let Some(acked) = acked {
        if acked > sequence {
            return Err(Error::Corrupted {
                key: "<store>".into(),
                page: None,
                reason: format!(
                    "the store holds write-back {sequence} but a flush acknowledged write-back {acked}: \
                     acknowledged writes were lost (damaged log?); restore the directory from a backup"
                ),
            });
        }
    }
    Ok(Opened { sequence, acked: acked.unwrap_or(0), catalog })
}

/// The store's keyspace catalog.
///
/// # Errors
/// [`Error::Corrupted`] if it is missing or damaged; a store error.
pub(super) fn read_catalog(store: &dyn Store) -> Result<Catalog> {
    match store.get(&layout::catalog_key())? {
        Some(b) => Catalog::decode(&b),
        None => Err(Error::Corrupted {
            key: "<catalog>".into(),
            page: None,
            reason: "the keyspace catalog is missing".into(),
        }),
    }
}

/// The sequence number in the side file, if there is one.
fn read_side_sequence(dir: &Path) -> Result<Option<u64>> {
    match std::fs::read(dir.join(SEQUENCE_FILE)) {
        Ok(b) => record::decode_sequence(&b, "<side file bitsled.seq>").map(Some),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Records durably that write-back `seq` is on disk: a new file, synced,
/// renamed over the old one, and the directory synced.
fn write_side_sequence(dir: &Path, seq: u64) -> Result<()> {
    use std::io::Write as _;
    let tmp = dir.join("bitsled.seq.tmp");
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(&record::encode_sequence(seq))?;
    f.sync_all()?;
    std::fs::rename(&tmp, dir.join(SEQUENCE_FILE))?;
    std::fs::File::open(dir)?.sync_all()?;
    Ok(())
}

impl Engine {
    /// Applies a batch of reclamation to the store, publishing it to the
    /// change feed.
    fn apply_published(&self, batch: Vec<Write>) -> Result<()> {
        let frame = self.frame_of(&batch);
        self.store.apply(batch)?;
        self.publish(frame);
        Ok(())
    }

    /// Records in the side file that nothing is acknowledged yet (before
    /// a follower empties its store to load a master's).
    pub(super) fn reset_side_sequence(&self) -> Result<()> {
        let mut side = self.side_sequence.lock();
        write_side_sequence(&self.config.path, 0)?;
        *side = 0;
        Ok(())
    }

    /// Records in the side file the write-back number the store holds now
    /// (after a follower synced a master's snapshot).
    pub(super) fn record_side_sequence(&self) -> Result<()> {
        let mut side = self.side_sequence.lock();
        let seq = self.sequence.load(Ordering::SeqCst);
        write_side_sequence(&self.config.path, seq)?;
        *side = seq;
        Ok(())
    }

    /// Writes back everything and makes it durable: when this returns `Ok`,
    /// every transaction that finished before the call survives a crash.
    pub(crate) fn flush(&self) -> Result<()> {
        self.write_back()?;
        // One barrier at a time: two flushes (the background one and an
        // explicit one) must not write the side file together, or one
        // could rename the other's half-written file into place.
        let mut side = self.side_sequence.lock();
        // Read before the sync: everything up to it is then durable.
        let seq = self.sequence.load(Ordering::SeqCst);
        self.store.sync().inspect_err(|e| self.poison(e))?;
        if seq > *side {
            write_side_sequence(&self.config.path, seq).inspect_err(|e| self.poison(e))?;
            *side = seq;
        }
        Ok(())
    }

    /// Writes every dirty page, bucket and journal record and the catalog
    /// to the store in one atomic batch (the pages of values no key in the
    /// store names yet go before and after it in batches of their own),
    /// then does a step of reclamation.
    pub(crate) fn write_back(&self) -> Result<()> {
        let f = self.flush_lock.lock();
        self.write_back_locked(&f, Fold::Auto)
    }

    /// [`Engine::write_back`] with the write-back lock already held (so the
    /// caller can keep the store still afterwards: no write-back or
    /// reclamation runs until it releases the lock), folding the shards
    /// `fold` names. A write-back that records a flushed keyspace folds
    /// every shard, so that the reclaimer, which reads the keyspace's
    /// stored buckets, finds every value they hold.
    pub(super) fn write_back_locked(&self, flush_lock: &MutexGuard<'_, ()>, fold: Fold) -> Result<()> {
        // A follower writes only its master's batches (`follow.rs`).
        if self.follow.on() {
            return Ok(());
        }
        self.write_back_into(flush_lock, fold, None)
    }

    /// The writes a write-back folding as `fold` would make, captured and
    /// not applied (a follower's `verify` lays them over its store). The
    /// capture leaves the caches' marks as a write-back's capture does,
    /// so the caller rebuilds the memory from the store afterwards.
    pub(super) fn fold_writes(&self, flush_lock: &MutexGuard<'_, ()>, fold: Fold) -> Result<Vec<Write>> {
        let mut out = Vec::new();
        self.write_back_into(flush_lock, fold, Some(&mut out))?;
        Ok(out)
    }

    /// [`Engine::write_back_locked`]; with `dry`, the batch goes there
    /// instead of to the store, and nothing after the capture happens.
    fn write_back_into(&self, flush_lock: &MutexGuard<'_, ()>, fold: Fold, dry: Option<&mut Vec<Write>>) -> Result<()> {
        if dry.is_none() {
            self.check_writable()?;
        }
        // Before anything is captured: short of space, every change stays
        // in memory, as it was. With nothing to write, a flush succeeds
        // (the shortage, recorded, still refuses writes).
        // A flushed keyspace makes this write-back fold every shard.
        let check = if self.journal.records_flush() { Fold::All } else { fold };
        if let Err(e) = self.check_space(check, 0) {
            // A full fold (`verify`) also owes the fold of whatever delta
            // records the store holds: without it the store is not complete.
            let owed =
                matches!(check, Fold::All) && (self.metas.pinned_bytes() > 0 || !self.page_log.lock().keys.is_empty());
            return if self.has_pending_writes() || owed { Err(e) } else { Ok(()) };
        }
        // Write-backs are serialised by `flush_lock`, so this is the next number.
        let seq = self.sequence.load(Ordering::SeqCst) + 1;
        let (pages, fold_pages, step, page_fold_work, dead, metas, journal, building, catalog, catalog_changed) = {
            let _g = self.gate.write();
            // `building` is read under the gate too, and after the journal:
            // starting a build (not gated) adds to `building` before it
            // journals the build's marker, so every build whose marker is
            // captured is in the captured `building` unless it has ended.
            // Publishing changes the journal under the gate. The catalog's
            // counts match the captured buckets: no transaction runs.
            let journal = self.journal.snapshot();
            let building = self.building.lock().clone();
            let changed = self.keyspaces.take_changed();
            let flushed = journal.iter().any(|(k, _, v)| journal::is_flush(k, v.as_ref()));
            let fold = if flushed { Fold::All } else { fold };
            let dead = dead_ids(&journal);
            let (page_fold, page_fold_work) = self.page_fold_due(fold, &dead);
            let (fold_pages, step) = match page_fold {
                PageFold::None => (false, HashSet::new()),
                PageFold::All => (true, HashSet::new()),
                PageFold::Step(step) => (false, step),
            };
            let pages = self.pages.dirty_snapshot(fold_pages, &step);
            let metas = self.metas.cut(seq, fold, self.meta_budget());
            let catalog = self.keyspaces.catalog();
            (pages, fold_pages, step, page_fold_work, dead, metas, journal, building, catalog, changed)
        };
        let mut metas = metas;
        self.metas.drain(seq, &mut metas);
        if pages.is_empty()
            && !page_fold_work
            && metas.deltas.is_empty()
            && metas.folds.is_empty()
            && metas.retired.is_empty()
            && journal.is_empty()
            && !catalog_changed
        {
            if dry.is_some() {
                return Ok(());
            }
            return self.reclaim_step(flush_lock, RECLAIM_BUDGET).map(|_| ());
        }
        let pages = self.drop_dead_pages(pages, &dead, &building);
        // New pages are logged up to half the limit: a logged page's bytes
        // grow afterwards (more bits; the copy a change keeps beside it),
        // and a fold only when they pass the whole limit keeps folds rare.
        let room = (self.logged_limit() / 2).saturating_sub(self.pages.logged_bytes());
        let mut plan = plan_pages(pages, fold_pages, &step, &dead, room);
        let mut writes: Vec<Write> = Vec::with_capacity(
            plan.whole.len() + metas.deltas.len() + metas.folds.len() + metas.retired.len() + journal.len() + 4,
        );
        writes.push((layout::sequence_key(), Some(record::encode_sequence(seq))));
        writes.push((layout::catalog_key(), Some(catalog.encode())));
        // From here on the captured changes are out of the cache's marks
        // and logs: a failure before they are stored poisons the handle, as
        // a failed batch does (later writes would otherwise build on a
        // state the store never got).
        // Pages of values no key in the store names yet leave the atomic
        // batch for batches of their own, so a large value never makes one
        // large batch (sled holds what a batch touches until it ends):
        // - values still being built follow the atomic batch, which stores
        //   each such id's reclaim marker (again: a build that began while
        //   this write-back captured may have put a page whose marker the
        //   journal's capture missed);
        // - values published since the last capture (the atomic batch
        //   removes their markers and names them) precede it, each id's
        //   marker stored again in its first batch.
        // A crash between the batches leaves ids no key names and whose
        // marker is stored, which the reclaimer removes. Not while a
        // change feed wants the write-back as one frame (the feed starts
        // and stops under the write-back lock, so this holds for the whole
        // write-back). The split is by id, which keeps each id's pages
        // together and in order; a page of a published value that a later
        // change logged stays in the atomic batch as a page delta.
        let whole = std::mem::take(&mut plan.whole);
        let (mut now, mut early, mut built) = (Vec::new(), Vec::new(), Vec::new());
        if dry.is_none() && !self.feeding() {
            let published = published_ids(&journal);
            for p in whole {
                if building.contains(&p.id.0) {
                    built.push(p);
                } else if published.contains(&p.id.0) {
                    early.push(p);
                } else {
                    now.push(p);
                }
            }
        } else {
            now = whole;
        }
        for pages in built.chunk_by(|a, b| a.id.0 == b.id.0) {
            writes.push((layout::reclaim_key(pages[0].id.0), Some(Vec::new())));
        }
        let stored = page_writes(&*self.store, &now, &mut writes);
        plan.whole = now;
        let (early_from, deferred) = (plan.whole.len(), plan.whole.len() + early.len());
        plan.whole.extend(early);
        plan.whole.extend(built);
        stored.inspect_err(|e| self.poison(e))?;
        let mut log = self.page_log.lock();
        let logged_keys: Vec<[u8; layout::PAGE_DELTA_KEY_LEN]> = (0..plan.records.len())
            .map(|part| layout::page_delta_key(seq, u32::try_from(part).unwrap_or(u32::MAX)))
            .collect();
        let logged_sizes: Vec<usize> = plan.records.iter().map(Vec::len).collect();
        // Once a fold has written every page it owed, it deletes the
        // records written before it began, oldest first, a step's bytes per
        // write-back: every page they change has been written whole since,
        // so replay ignores their flips whether or not they are still there.
        let (retired, fold_ends) = match &log.folding {
            _ if fold_pages => (log.keys.len(), true),
            Some(f) if f.owed.is_empty() => {
                let (mut n, mut bytes, budget) = (0, 0, self.page_fold_step_bytes());
                while n < f.older && bytes < budget {
                    bytes += log.keys[n].1;
                    n += 1;
                }
                (n, n == f.older)
            }
            _ => (0, false),
        };
        writes.extend(log.keys[..retired].iter().map(|(k, _)| (k.to_vec(), None)));
        writes.extend(logged_keys.iter().zip(plan.records).map(|(k, v)| (k.to_vec(), Some(v))));
        for b in &metas.folds {
            writes.push((layout::bucket_key(b.ks, b.start).to_vec(), Some(b.bucket.encode())));
        }
        writes.extend(metas.retired.iter().map(|k| (k.clone(), None)));
        writes.extend(std::mem::take(&mut metas.deltas).into_iter().map(|(k, v)| (k, Some(v))));
        for (k, _, v) in &journal {
            writes.push((k.clone(), v.clone()));
        }
        if let Some(out) = dry {
            *out = writes;
            return Ok(());
        }
        let frame = self.frame_of(&writes);
        self.store_built_pages(&plan.whole[early_from..deferred], true).inspect_err(|e| self.poison(e))?;
        self.store.apply(writes).inspect_err(|e| self.poison(e))?;
        self.store_built_pages(&plan.whole[deferred..], false).inspect_err(|e| self.poison(e))?;
        self.publish(frame);
        self.sequence.store(seq, Ordering::SeqCst);
        let gone: usize = log.keys.drain(..retired).map(|(_, n)| n).sum();
        log.bytes -= gone;
        if fold_pages {
            // Every record is gone: nothing replayed is owed a fold any more.
            log.fold_owed = false;
        }
        if fold_ends {
            log.folding = None;
        } else if let Some(f) = log.folding.as_mut() {
            f.older -= retired;
        }
        log.bytes += logged_sizes.iter().sum::<usize>();
        log.keys.extend(logged_keys.into_iter().zip(logged_sizes));
        let folding = log.folding.is_some();
        drop(log);
        let stored: Vec<(u64, u64, bool)> = plan.whole.iter().map(|p| (p.id.0, p.id.1, p.page.is_some())).collect();
        self.dirs.apply(&stored);
        // In a step, the logged pages written whole are the step's.
        self.pages.mark_clean(&plan.whole, false, fold_pages || !step.is_empty());
        self.pages.mark_clean(&plan.logged, true, false);
        self.pages.mark_clean(&plan.unchanged, false, false);
        self.metas.mark_folded(metas.folds);
        if metas.folds_waiting || folding {
            self.kick_background();
        }
        self.journal.mark_clean(&journal);
        self.reclaim_step(flush_lock, RECLAIM_BUDGET).inspect_err(|e| self.poison(e))?;
        self.balance_caches();
        Ok(())
    }

    /// Stores the pages of values no key in the store names that a
    /// write-back left out of its atomic batch, a group of pages at a
    /// time, in batches of about [`BUILD_BATCH_BYTES`] of records each;
    /// with `mark`, each id's reclaim marker in the batch of its first
    /// pages.
    fn store_built_pages(&self, pages: &[DirtyPage], mark: bool) -> Result<()> {
        let (mut batch, mut bytes): (Vec<Write>, usize) = (Vec::new(), 0);
        let mut marked = None;
        for group in pages.chunk_by(same_group) {
            let from = batch.len();
            let id = group[0].id.0;
            if mark && marked != Some(id) {
                batch.push((layout::reclaim_key(id), Some(Vec::new())));
                marked = Some(id);
            }
            page_writes(&*self.store, group, &mut batch)?;
            bytes += batch[from..].iter().map(|(k, v)| k.len() + v.as_ref().map_or(0, Vec::len)).sum::<usize>();
            if bytes >= BUILD_BATCH_BYTES {
                self.store.apply(std::mem::take(&mut batch))?;
                bytes = 0;
            }
        }
        if !batch.is_empty() {
            self.store.apply(batch)?;
        }
        Ok(())
    }

    /// How this write-back folds the logged pages. All of them at once
    /// (and logs none) when the metadata fold is `Fold::All` (a flushed
    /// keyspace, whose bitmaps the reclaimer deletes, or `verify`), when a
    /// replay at open left a fold owed or a reader of page records asked
    /// for one, and when a bitmap with logged pages died (its id is in
    /// `dead`: the reclaimer must never delete a page that a record would
    /// replay onto), and when the logged pages pass their limit by half
    /// again. A step of a fold spread over write-backs while one is under
    /// way, or when one falls due: the page delta records have grown as
    /// large as the logged pages, or the logged pages pass their limit;
    /// the step takes its pages from the fold's owed list. Also says
    /// whether the write-back deletes page delta records (work even
    /// without a page to write).
    fn page_fold_due(&self, fold: Fold, dead: &HashSet<u64>) -> (PageFold, bool) {
        let mut log = self.page_log.lock();
        // A fold deletes records when it folds everything, or once a spread
        // fold has written every page it owed.
        let retires = |log: &PageLog, all: bool| {
            (all && !log.keys.is_empty()) || log.folding.as_ref().is_some_and(|f| f.owed.is_empty())
        };
        if matches!(fold, Fold::All) {
            return (PageFold::All, retires(&log, true));
        }
        let asked = std::mem::take(&mut log.fold_asked);
        let logged = self.pages.logged_bytes();
        if log.keys.is_empty() && self.pages.logged_pages() == 0 {
            return (PageFold::None, retires(&log, false));
        }
        // Past half as much again as their limit (a spread fold not keeping
        // up with logged pages that grow), all at once.
        let limit = self.logged_limit();
        if log.fold_owed || asked || logged > limit + limit / 2 || dead.iter().any(|&id| self.pages.has_logged(id)) {
            return (PageFold::All, retires(&log, true));
        }
        if log.folding.is_none() && (log.bytes >= PAGE_FOLD_FLOOR.max(logged) || logged > limit) {
            let mut owed = self.pages.logged_ids();
            owed.reverse();
            log.folding = Some(Folding { owed, older: log.keys.len() });
        }
        let budget = self.page_fold_step_bytes();
        let fold = match log.folding.as_mut() {
            Some(folding) => PageFold::Step(self.pages.fold_step(&mut folding.owed, budget)),
            None => PageFold::None,
        };
        (fold, retires(&log, false))
    }

    /// The bytes one step of a page fold writes or deletes: an eighth of
    /// the logged pages' limit, at most [`PAGE_FOLD_STEP`].
    fn page_fold_step_bytes(&self) -> usize {
        (self.logged_limit() / 8).min(PAGE_FOLD_STEP)
    }

    /// The bytes logged pages may hold in the cache: half of it, or the
    /// dirty budget if that is more.
    pub(super) fn logged_limit(&self) -> usize {
        self.settings.dirty_bytes().max(self.settings.cache_bytes() / 2)
    }

    /// At open: replays the store's page delta records onto the stored
    /// pages in write-back order and folds them (the pages written whole,
    /// the records deleted, in one batch).
    ///
    /// # Errors
    /// [`Error::Corrupted`] for a record that does not decode, or that
    /// changes a page the store does not hold (the store is then refused);
    /// a store error.
    pub(super) fn replay_page_deltas(&self) -> Result<()> {
        let f = self.flush_lock.lock();
        self.replay_page_deltas_locked(&f)
    }

    /// [`Engine::replay_page_deltas`] with the write-back lock held.
    pub(super) fn replay_page_deltas_locked(&self, f: &MutexGuard<'_, ()>) -> Result<()> {
        let records: Vec<(Vec<u8>, Vec<u8>)> = self
            .store
            .scan_prefix(&[layout::NS_PAGE_DELTA])
            .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect::<Result<_>>()?;
        if records.is_empty() {
            return Ok(());
        }
        let mut log = PageLog::default();
        self.replay_page_records(records, &mut log)?;
        // A fold, whatever the sizes: the replayed pages are dirty, not
        // logged, so no later write-back could log them against these
        // records.
        log.fold_owed = true;
        *self.page_log.lock() = log;
        match self.write_back_locked(f, Fold::Auto) {
            // Short of disk space, the store still opens: the replayed
            // pages stay in memory (reads see them) until a write-back
            // finds room.
            Err(Error::DiskFull { .. }) => Ok(()),
            r => r,
        }
    }

    /// Applies page delta records `records` (in key order) to the cached
    /// pages, which become dirty, and notes them in `log`. A page with a
    /// reset among them is dropped from the cache first (the store holds
    /// it whole as of its last reset) and takes only the flips after that
    /// reset.
    ///
    /// # Errors
    /// [`Error::Corrupted`] for a record that does not decode or names a
    /// page the store does not hold; a store error.
    pub(super) fn replay_page_records(&self, records: Vec<(Vec<u8>, Vec<u8>)>, log: &mut PageLog) -> Result<()> {
        let mut decoded = Vec::with_capacity(records.len());
        for (key, value) in records {
            let fixed: [u8; layout::PAGE_DELTA_KEY_LEN] = fixed_key(&key, "page delta")?;
            let what = match layout::parse_page_delta_key(&fixed) {
                Some((seq, part)) => format!("{seq}/{part}"),
                None => format!("{key:?}"),
            };
            decoded.push((pagedelta::decode(&what, &value)?, what));
            log.keys.push((fixed, value.len()));
            log.bytes += value.len();
        }
        // Where each page's last reset is: (record, entry).
        let mut last_reset: std::collections::HashMap<PageId, (usize, usize)> = std::collections::HashMap::new();
        for (r, (deltas, _)) in decoded.iter().enumerate() {
            for (e, d) in deltas.iter().enumerate().filter(|(_, d)| d.is_reset()) {
                last_reset.insert(d.id, (r, e));
            }
        }
        let reset: Vec<PageId> = last_reset.keys().copied().collect();
        self.pages.discard(&reset);
        let mut seen = HashSet::new();
        for (r, (deltas, what)) in decoded.iter().enumerate() {
            for (e, d) in deltas.iter().enumerate() {
                if d.is_reset() || last_reset.get(&d.id).is_some_and(|&at| (r, e) < at) {
                    continue;
                }
                let load = |_| self.fetch_page(b"<page delta>", d.id.0, d.id.1);
                if seen.insert(d.id) && self.pages.get(d.id, load)?.is_none() {
                    return Err(Error::Corrupted {
                        key: format!("<page delta {what}>"),
                        page: Some(d.id.1),
                        reason: format!("page delta: page {} of bitmap {} is not in the store", d.id.1, d.id.0),
                    });
                }
                self.pages.update(d.id, load, |p| {
                    for &bit in &d.flips {
                        let bit = u32::from(bit);
                        p.set(bit, !p.get(bit));
                    }
                })?;
            }
        }
        Ok(())
    }

    /// Removes from a captured write-back the pages of bitmaps that died
    /// before ever being written (a BITOP result overwritten by the next
    /// one, a key deleted soon after it was set): their reclaim marker is in
    /// this same batch, so writing them would only make work for the
    /// reclaimer. Skipped while a multi-page reader might still read them.
    fn drop_dead_pages(&self, pages: Vec<DirtyPage>, dead: &HashSet<u64>, building: &HashSet<u64>) -> Vec<DirtyPage> {
        let dead: HashSet<u64> = dead.iter().copied().filter(|id| !building.contains(id)).collect();
        if dead.is_empty() {
            return pages;
        }
        let pins = self.pins.lock();
        let dead: HashSet<u64> = dead.into_iter().filter(|id| !pins.contains_key(id)).collect();
        drop(pins);
        let (gone, keep): (Vec<DirtyPage>, Vec<DirtyPage>) = pages.into_iter().partition(|p| dead.contains(&p.id.0));
        let ids: Vec<_> = gone.iter().map(|p| p.id).collect();
        self.pages.discard(&ids);
        keep
    }

    /// At open: replays the store's metadata delta records into their
    /// buckets, shard by shard in write-back order, and folds each shard
    /// (its buckets written whole, its delta records deleted, in one
    /// batch). Memory holds one shard's changed buckets at a time.
    ///
    /// # Errors
    /// [`Error::Corrupted`] for a delta record that does not decode (the
    /// store is then refused: its keys' metadata would be incomplete); a
    /// store error.
    pub(super) fn replay_deltas(&self) -> Result<()> {
        let f = self.flush_lock.lock();
        self.replay_deltas_locked(&f)
    }

    /// [`Engine::replay_deltas`] with the write-back lock held.
    pub(super) fn replay_deltas_locked(&self, f: &MutexGuard<'_, ()>) -> Result<()> {
        for shard in 0..=u8::MAX {
            // Read whole before the fold deletes them: sled's iterators
            // are not snapshots.
            let records: Vec<(Vec<u8>, Vec<u8>)> = self
                .store
                .scan_prefix(&[layout::NS_DELTA, shard])
                .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
                .collect::<Result<_>>()?;
            if !records.is_empty() {
                self.replay_shard(usize::from(shard), records)?;
                match self.write_back_locked(f, Fold::Shard(usize::from(shard))) {
                    // Short of disk space, the store still opens: the
                    // replayed buckets stay in memory (reads see them)
                    // until a write-back finds room.
                    Err(Error::DiskFull { .. }) => {}
                    r => r?,
                }
            }
        }
        Ok(())
    }

    /// Applies the delta records `records` (all of shard `shard`, in key
    /// order) to the cached buckets.
    pub(super) fn replay_shard(&self, shard: usize, records: Vec<(Vec<u8>, Vec<u8>)>) -> Result<()> {
        let mut g = self.metas.lock_shard(shard);
        for (key, value) in records {
            let fixed: [u8; layout::DELTA_KEY_LEN] = fixed_key(&key, "metadata delta")?;
            let what = match layout::parse_delta_key(&fixed) {
                Some((s, seq, part)) => format!("{s}/{seq}/{part}"),
                None => format!("{key:?}"),
            };
            for e in delta::decode(self.metas.key_hash(), shard, &what, &value)? {
                let h = self.key_hash(&e.name);
                let start = g.locate(e.ks, h, &*self.store)?;
                let meta = match e.change {
                    Change::Removed => None,
                    Change::Entry(m) => Some(m),
                    Change::BloomBits { items, positions } => {
                        let old = g.get(e.ks, start).and_then(|l| l.bucket.find(&e.name, h, 0)).map(|(_, m)| m);
                        Some(bloom_bits_applied(old, items, &positions).map_err(|reason| Error::Corrupted {
                            key: format!("<metadata delta {what}>"),
                            page: None,
                            reason: format!("metadata delta: key {:?}: {reason}", String::from_utf8_lossy(&e.name)),
                        })?)
                    }
                };
                g.update(e.ks, start, |b| match meta {
                    Some(m) => {
                        b.upsert(&e.name, h, &m);
                    }
                    None => {
                        b.remove(&e.name, h);
                    }
                });
            }
            g.note_stored_delta(fixed, value.len());
        }
        Ok(())
    }

    /// Reclaims until nothing is left or `limit` has passed (at open).
    pub(super) fn reclaim_for(&self, limit: Duration) -> Result<()> {
        let f = self.flush_lock.lock();
        let deadline = Instant::now() + limit;
        while self.reclaim_step(&f, RECLAIM_BUDGET)? && Instant::now() < deadline {}
        Ok(())
    }

    /// Reclaims at the opening of a store; the rest goes to the background.
    pub(super) fn reclaim_at_open(&self) -> Result<()> {
        // Deleting writes too: short of space, it waits for the
        // background write-backs.
        if self.check_space(Fold::Auto, 0).is_err() {
            return Ok(());
        }
        self.reclaim_for(OPEN_RECLAIM)
    }

    /// One step of reclamation, deleting at most about `budget` records:
    /// flushed keyspaces turn into reclaim markers of the bitmaps their keys
    /// held, then the pages of marked bitmaps are deleted. Returns whether
    /// work is left.
    pub(super) fn reclaim_step(&self, _flush_lock: &MutexGuard<'_, ()>, budget: usize) -> Result<bool> {
        if self.follow.on() {
            return Ok(false);
        }
        let mut budget = budget;
        let mut batch: Vec<Write> = Vec::with_capacity(RECLAIM_BATCH);
        let left_keyspaces = self.reclaim_keyspaces(&mut batch, &mut budget)?;
        let left_pages = self.reclaim_pages(&mut batch, &mut budget)?;
        if !batch.is_empty() {
            self.apply_published(batch)?;
        }
        Ok(left_keyspaces || left_pages)
    }

    /// Applies `batch` once it is full.
    fn apply_full(&self, batch: &mut Vec<Write>) -> Result<()> {
        if batch.len() >= RECLAIM_BATCH {
            self.apply_published(std::mem::take(batch))?;
        }
        Ok(())
    }

    /// Deletes the buckets of flushed keyspaces, marking the bitmaps of
    /// their paged values for reclamation (in the same batch, before the
    /// bucket goes). Returns whether work is left.
    fn reclaim_keyspaces(&self, batch: &mut Vec<Write>, budget: &mut usize) -> Result<bool> {
        let dead: Vec<(Vec<u8>, u32)> = self
            .store
            .scan_prefix(&[layout::NS_DEAD])
            .map(|r| r.map(|(k, _)| layout::parse_dead_key(&k).map(|ks| (k.to_vec(), ks))))
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .flatten()
            .collect();
        for (marker, ks) in dead {
            if self.journal.contains(&marker) {
                // Its marker is not even stored yet.
                continue;
            }
            let (lo, hi) = (layout::bucket_key(ks, 0), layout::bucket_key(ks, u32::MAX));
            for r in self.store.scan(&lo, &hi) {
                if *budget == 0 {
                    return Ok(true);
                }
                let (k, v) = r?;
                if let Some((_, start)) = layout::parse_bucket_key(&k) {
                    // A damaged bucket's values cannot be found; they are
                    // reported by verify as pages of no key.
                    if let Ok(bucket) = Bucket::decode(self.metas.key_hash(), ks, start, &v) {
                        for id in bucket.ids() {
                            batch.push((layout::reclaim_key(id), Some(Vec::new())));
                        }
                    }
                }
                batch.push((k.to_vec(), None));
                *budget = budget.saturating_sub(1);
                self.apply_full(batch)?;
            }
            batch.push((marker, None));
            self.apply_full(batch)?;
        }
        Ok(false)
    }

    /// Deletes the pages (page and group records) of every bitmap id with
    /// a reclaim marker in the store, unless a running operation still builds it or a newer marker
    /// state waits in the journal, or a stream reads it; an id whose pages
    /// are all gone loses its marker. Returns whether work is left.
    fn reclaim_pages(&self, batch: &mut Vec<Write>, budget: &mut usize) -> Result<bool> {
        // The batch may hold new markers (from flushed keyspaces): apply it
        // first so they are seen.
        if !batch.is_empty() {
            self.apply_published(std::mem::take(batch))?;
        }
        let markers: Vec<u64> = self
            .store
            .scan_prefix(&[layout::NS_RECLAIM])
            .map(|r| r.map(|(k, _)| layout::parse_reclaim_key(&k)))
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .flatten()
            .collect();
        // Deletions of many ids share batches; an id's marker is queued
        // after its pages, and batches apply in order, so a marker never
        // goes before the pages it stands for.
        for id in markers {
            // Order matters: publishing removes the journal marker before it
            // leaves `building`.
            if self.building.lock().contains(&id)
                || self.journal.contains(&layout::reclaim_key(id))
                || self.pins.lock().contains_key(&id)
            {
                continue;
            }
            self.dirs.remove(id);
            let records = layout::page_range(id, 0, u64::MAX);
            let groups = layout::group_range(id, 0, u64::MAX);
            for (from, to) in [records, groups] {
                for r in self.store.scan(&from, &to) {
                    if *budget == 0 {
                        return Ok(true);
                    }
                    let (k, _) = r?;
                    batch.push((k.to_vec(), None));
                    *budget -= 1;
                    self.apply_full(batch)?;
                }
            }
            batch.push((layout::reclaim_key(id), None));
            self.apply_full(batch)?;
        }
        Ok(false)
    }
}

/// The entry of a small Bloom filter whose entry was `old` after a delta
/// record's bit change (`items` now, the bits at `positions` set).
///
/// # Errors
/// Why the change does not apply: no entry, another kind, a filter in
/// pages, or what [`small::with_recorded_bits`] refuses.
fn bloom_bits_applied(old: Option<Meta>, items: u64, positions: &[u64]) -> std::result::Result<Meta, String> {
    let old = old.ok_or("Bloom bits for a key with no entry")?;
    if old.kind != Kind::Bloom || !old.is_inline() {
        return Err(format!("Bloom bits for a {:?} value that is not a small filter", old.kind));
    }
    let value =
        small::with_recorded_bits(old.inline_value(), items, positions).map_err(|r| format!("Bloom bits: {r}"))?;
    inline_meta(Kind::Bloom, &value, old.expire_at_ms).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invariant: Bloom bits apply only to a small filter's entry (its
    /// expiry kept); no entry, another type or a paged filter is refused
    /// with a reason, never a panic.
    #[test]
    fn bloom_bits_apply_only_to_small_filters() {
        let header = crate::bloom::Header::new(0.01, 100, 2, false).unwrap();
        let value = small::Small::empty(header).encode();
        let mut meta = inline_meta(Kind::Bloom, &value, 1234).unwrap();
        let after = bloom_bits_applied(Some(meta.clone()), 1, &[3]).unwrap();
        assert_eq!(after.expire_at_ms, 1234);
        assert!(small::bit(&after.inline_value()[small::peek(after.inline_value()).unwrap().bits_at..], 3));
        let missing = bloom_bits_applied(None, 1, &[3]).unwrap_err();
        assert!(missing.contains("no entry"), "{missing}");
        meta.kind = Kind::String;
        let string = bloom_bits_applied(Some(meta), 1, &[3]).unwrap_err();
        assert!(string.contains("not a small filter"), "{string}");
        let paged = bloom_bits_applied(Some(Meta::paged(Kind::Bloom, 9, 8192, 0, 0)), 1, &[3]).unwrap_err();
        assert!(paged.contains("not a small filter"), "{paged}");
    }
}
