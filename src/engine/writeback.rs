//! The write-back of dirty state to the store as one atomic batch, the
//! durability barrier, the durable write-back number in the side file, and
//! the reclamation of dead bitmaps.

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::Ordering;

use parking_lot::MutexGuard;

use super::journal::JournalEntry;
use super::layout;
use super::pages::DirtyPage;
use super::record;
use super::store::{Store, Write};
use super::Engine;
use crate::error::{Error, Result};

/// Reclamation deletes a dead bitmap's pages in batches of this many.
const RECLAIM_BATCH: usize = 512;

/// The side file recording the last write-back a flush made durable.
const SEQUENCE_FILE: &str = "bitsled.seq";

/// At open: checks the superblock (or creates a new store's) and that the
/// store holds every write-back a flush acknowledged; returns the number of
/// the last write-back in the store and the number the side file records
/// (0 if none).
pub(super) fn check_or_create(dir: &Path, store: &dyn Store) -> Result<(u64, u64)> {
    match store.get(&layout::superblock_key())? {
        Some(b) => record::check_superblock(&b)?,
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
            store.apply(vec![(layout::superblock_key(), Some(record::encode_superblock()))])?;
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
    // Every write-back carries its number; every flush records the number
    // it made durable in a side file. A store behind its side file lost
    // acknowledged writes (sled drops a damaged log's tail).
    let stored_seq = match store.get(&layout::sequence_key())? {
        Some(b) => record::decode_sequence(&b, "<sequence>")?,
        None => 0,
    };
    let acked = read_side_sequence(dir)?;
    if let Some(acked) = acked {
        if acked > stored_seq {
            return Err(Error::Corrupted {
                key: "<store>".into(),
                page: None,
                reason: format!(
                    "the store holds write-back {stored_seq} but a flush acknowledged write-back {acked}: \
                     acknowledged writes were lost (damaged log?); restore the directory from a backup"
                ),
            });
        }
    }
    Ok((stored_seq, acked.unwrap_or(0)))
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

    /// Writes every dirty page, key and journal record to the store in one
    /// atomic batch, then reclaims dead bitmaps.
    pub(crate) fn write_back(&self) -> Result<()> {
        let f = self.flush_lock.lock();
        self.write_back_locked(&f)
    }

    /// [`Engine::write_back`] with the write-back lock already held (so the
    /// caller can keep the store still afterwards: no write-back or
    /// reclamation runs until it releases the lock).
    pub(super) fn write_back_locked(&self, _flush_lock: &MutexGuard<'_, ()>) -> Result<()> {
        self.check_writable()?;
        let (pages, metas, journal, building) = {
            let _g = self.gate.write();
            // `building` is read under the gate too, and after the journal:
            // starting a build (not gated) adds to `building` before it
            // journals the build's marker, so every build whose marker is
            // captured is in the captured `building` unless it has ended.
            // Publishing changes the journal under the gate.
            let pages = self.pages.dirty_snapshot();
            let journal = self.journal.snapshot();
            let building = self.building.lock().clone();
            (pages, self.metas.dirty_snapshot(), journal, building)
        };
        if pages.is_empty() && metas.is_empty() && journal.is_empty() {
            return Ok(());
        }
        let pages = self.drop_dead_pages(pages, &journal, &building);
        let mut writes: Vec<Write> = Vec::with_capacity(pages.len() + metas.len() + journal.len() + 1);
        // Write-backs are serialised by `flush_lock`, so this is the next number.
        let seq = self.sequence.load(Ordering::SeqCst) + 1;
        writes.push((layout::sequence_key(), Some(record::encode_sequence(seq))));
        for p in &pages {
            let k = layout::page_key(p.id.0, p.id.1).to_vec();
            writes.push((k, p.page.as_ref().map(|page| page.encode())));
        }
        for m in &metas {
            writes.push((layout::meta_key(&m.name), m.meta.map(|meta| meta.encode())));
        }
        for (k, _, v) in &journal {
            writes.push((k.clone(), v.clone()));
        }
        self.store.apply(writes).inspect_err(|e| self.poison(e))?;
        self.sequence.store(seq, Ordering::SeqCst);
        let stored: Vec<(u64, u64, bool)> = pages.iter().map(|p| (p.id.0, p.id.1, p.page.is_some())).collect();
        self.dirs.apply(&stored);
        self.pages.mark_clean(&pages);
        self.metas.mark_clean(&metas);
        self.journal.mark_clean(&journal);
        self.reclaim().inspect_err(|e| self.poison(e))?;
        self.pages.evict_if_needed();
        Ok(())
    }

    /// Removes from a captured write-back the pages of bitmaps that died
    /// before ever being written (a BITOP result overwritten by the next
    /// one, a key deleted soon after it was set): their reclaim marker is in
    /// this same batch, so writing them would only make work for the
    /// reclaimer. Skipped while a multi-page reader might still read them.
    fn drop_dead_pages(
        &self,
        pages: Vec<DirtyPage>,
        journal: &[JournalEntry],
        building: &HashSet<u64>,
    ) -> Vec<DirtyPage> {
        let dead: HashSet<u64> = journal
            .iter()
            .filter(|(_, _, v)| v.is_some())
            .filter_map(|(k, _, _)| layout::parse_reclaim_key(k))
            .filter(|id| !building.contains(id))
            .collect();
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

    /// Deletes the pages of every bitmap id with a reclaim marker in the
    /// store, unless a running operation still builds it or a newer marker
    /// state waits in the journal, or a stream reads it. Called with
    /// `flush_lock` held.
    pub(super) fn reclaim(&self) -> Result<()> {
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
        let mut batch: Vec<Write> = Vec::with_capacity(RECLAIM_BATCH);
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
            let (from, to) = layout::page_range(id, 0, u64::MAX);
            for r in self.store.scan(&from, &to) {
                let (k, _) = r?;
                batch.push((k.to_vec(), None));
                if batch.len() >= RECLAIM_BATCH {
                    self.store.apply(std::mem::take(&mut batch))?;
                }
            }
            batch.push((layout::reclaim_key(id), None));
            if batch.len() >= RECLAIM_BATCH {
                self.store.apply(std::mem::take(&mut batch))?;
            }
        }
        if !batch.is_empty() {
            self.store.apply(batch)?;
        }
        Ok(())
    }
}
