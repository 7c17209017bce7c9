//! VERIFY: check every stored record.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::bucket::Bucket;
use super::layout;
use super::metas::bucket_end;
use super::record::{self, Catalog, DbRecord, Kind};
use super::store::Store;
use super::stored::{Held, ScanError, StoredPage, StoredPages};
use super::Engine;
use crate::error::{Error, Result};
use crate::geometry::{page_bit, PAGE_BITS};
use crate::page::{fits_group, Page};

/// One problem found by [`crate::Db::verify`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The key concerned, if the record belongs to one.
    pub key: Option<Vec<u8>>,
    /// The page concerned, if the record is a page.
    pub page: Option<u64>,
    /// What is wrong.
    pub reason: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.key {
            Some(k) => write!(f, "key {:?}", String::from_utf8_lossy(k))?,
            None => f.write_str("store")?,
        }
        if let Some(p) = self.page {
            write!(f, " page {p}")?;
        }
        write!(f, ": {}", self.reason)
    }
}

/// What [`crate::Db::verify`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Keys checked.
    pub keys: u64,
    /// Pages checked.
    pub pages: u64,
    /// Pages stored where format 3 would not put them: small pages as page
    /// records of their own (left by format 2; each moves into its group's
    /// record when next written, or at `compact_into`) and large pages in
    /// a group record. Not a problem: both read correctly.
    pub misplaced_pages: u64,
    /// Every problem found; empty when the store is sound.
    pub problems: Vec<Problem>,
}

impl VerifyReport {
    /// Whether no problem was found.
    #[must_use]
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty()
    }
}

struct Tally {
    name: Vec<u8>,
    /// The key's metadata: what it holds, its length, its count of set
    /// bits (the fields the pages are checked against; not the whole
    /// entry, which keeps a million-key verify small).
    kind: Kind,
    len: u64,
    meta_ones: u64,
    /// Set bits the pages hold.
    ones: u64,
    /// A Bloom filter's header page was found (and checked).
    header_seen: bool,
    /// The store failed to read the key's pages, so `ones` and
    /// `header_seen` are incomplete.
    unreadable: bool,
}

/// The check of stored pages against the keys that own them, fed page by
/// page in (bitmap id, page) order.
struct PageCheck {
    /// The paged keys, by bitmap id.
    by_id: HashMap<u64, Tally>,
    /// Bitmap ids whose pages are garbage waiting for reclamation.
    reclaimable: HashSet<u64>,
    /// Pages of bitmap ids that no key owns, by id.
    unowned: BTreeMap<u64, u64>,
    /// The position of the last page seen: to find a page stored twice,
    /// and where to go on from when the scan of all pages stops.
    last: Option<(u64, u64)>,
    /// Group records already reported as damaged, by bitmap id and first
    /// page: a key's pages read again after the scan of all pages stopped
    /// must not report them twice.
    failed_groups: HashSet<(u64, u64)>,
}

impl PageCheck {
    /// Checks one stored page.
    ///
    /// # Errors
    /// A failure other than the page not decoding.
    fn page(&mut self, report: &mut VerifyReport, stored: StoredPage) -> Result<()> {
        report.pages += 1;
        let (id, page) = (stored.id, stored.page);
        let twice = self.last == Some((id, page));
        self.last = Some((id, page));
        let Some(tally) = self.by_id.get_mut(&id) else {
            if !self.reclaimable.contains(&id) {
                *self.unowned.entry(id).or_insert(0u64) += 1;
            }
            return Ok(());
        };
        if twice {
            report.problems.push(problem(
                Some(&tally.name),
                Some(page),
                "stored twice: as a page record and in its group's record".into(),
            ));
            return Ok(());
        }
        tally.header_seen |= page == crate::bloom::HEADER_PAGE;
        let grouped = matches!(stored.held, Held::Page(_));
        match stored.held.into_page(Some(&tally.name), id, page) {
            Ok(p) => {
                if fits_group(&p.encode()) != grouped {
                    report.misplaced_pages += 1;
                }
                check_page(report, tally, page, &p);
            }
            Err(Error::Corrupted { reason, .. }) => {
                report.problems.push(problem(Some(&tally.name), Some(page), reason));
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// Reports a record the scan could not turn into pages: a group that
    /// does not decode (once), or a malformed key. Not for store errors.
    fn scan_error(&mut self, report: &mut VerifyReport, e: ScanError) {
        match e {
            ScanError::Group { id, page, error } => {
                if !self.failed_groups.insert((id, page)) {
                    return;
                }
                let name = self.by_id.get(&id).map(|t| t.name.clone());
                let reason = match &name {
                    Some(_) => error.to_string(),
                    None => format!("bitmap id {id}: {error}"),
                };
                report.problems.push(problem(name.as_deref(), Some(page), reason));
            }
            other => report.problems.push(problem(None, None, other.into_error(None).to_string())),
        }
    }

    /// Reports that the store failed reading the pages of bitmap `id`.
    fn unreadable(&mut self, report: &mut VerifyReport, id: u64, e: &Error) {
        match self.by_id.get_mut(&id) {
            Some(tally) => {
                tally.unreadable = true;
                report.problems.push(problem(Some(&tally.name), None, format!("its pages cannot be read: {e}")));
            }
            None => report.problems.push(problem(None, None, format!("pages of bitmap id {id} cannot be read: {e}"))),
        }
    }
}

fn problem(key: Option<&[u8]>, page: Option<u64>, reason: String) -> Problem {
    Problem { key: key.map(<[u8]>::to_vec), page, reason }
}

impl Engine {
    /// Checks every record in the store; see [`crate::Db::verify`]. Writes
    /// pending changes back first so the store is complete, and holds the
    /// write-back lock meanwhile so the store stays still.
    pub(crate) fn verify(&self) -> Result<VerifyReport> {
        // A follower may not fold its master's delta records: it checks
        // its store with the fold's writes laid over it (`follow.rs`).
        if self.follow.on() {
            return self.verify_follower();
        }
        let f = self.flush_lock.lock();
        self.write_back_locked(&f, super::metas::Fold::All)?;
        self.check_store(&*self.store)
    }

    /// The checks of [`Engine::verify`], on `store` (complete: folded).
    pub(super) fn check_store(&self, store: &dyn Store) -> Result<VerifyReport> {
        let mut report = VerifyReport::default();
        match store.get(&layout::superblock_key())? {
            Some(b) => {
                if let Err(e) = record::check_superblock(&b) {
                    report.problems.push(problem(None, None, e.to_string()));
                }
            }
            None => report.problems.push(problem(None, None, "superblock missing".into())),
        }
        let catalog = if let Some(b) = store.get(&layout::catalog_key())? {
            Catalog::decode(&b).map_err(|e| report.problems.push(problem(None, None, e.to_string()))).ok()
        } else {
            report.problems.push(problem(None, None, "keyspace catalog missing".into()));
            None
        };
        // Whether a metadata record (a bucket or a delta) is damaged or out
        // of place: pages that belong to no key may then be a damaged key's.
        let mut metadata_damaged = false;
        // A store error here ends the check: the markers decide which
        // buckets and pages are garbage, and guessing would report live
        // keys or garbage falsely.
        let dead: HashSet<u32> = self
            .store
            .scan_prefix(&[layout::NS_DEAD])
            .map(|r| r.map(|(k, _)| layout::parse_dead_key(&k)))
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .flatten()
            .collect();
        // The fold above wrote every bucket whole and retired every delta
        // record: one left would hold changes no bucket has.
        for r in store.scan_prefix(&[layout::NS_DELTA]) {
            let (k, v) = r?;
            let reason = match layout::parse_delta_key(&k) {
                Some((shard, seq, part)) => {
                    match super::delta::decode(
                        self.metas.key_hash(),
                        usize::from(shard),
                        &format!("{shard}/{seq}/{part}"),
                        &v,
                    ) {
                        Ok(entries) => format!(
                            "metadata delta {shard}/{seq}/{part} ({} entries) left after a full fold",
                            entries.len()
                        ),
                        Err(e) => e.to_string(),
                    }
                }
                None => format!("malformed metadata delta key {k:?}"),
            };
            metadata_damaged = true;
            report.problems.push(problem(None, None, reason));
        }
        // Likewise every page delta record: one left would hold bits no
        // page has.
        for r in store.scan_prefix(&[layout::NS_PAGE_DELTA]) {
            let (k, v) = r?;
            let reason = match layout::parse_page_delta_key(&k) {
                Some((seq, part)) => match super::pagedelta::decode(&format!("{seq}/{part}"), &v) {
                    Ok(deltas) => format!("page delta {seq}/{part} ({} pages) left after a full fold", deltas.len()),
                    Err(e) => e.to_string(),
                },
                None => format!("malformed page delta key {k:?}"),
            };
            report.problems.push(problem(None, None, reason));
        }
        if store.scan_prefix(&[layout::NS_META_V1]).next().is_some() {
            report.problems.push(problem(None, None, "format 1 metadata records left after the upgrade".into()));
        }
        let live: HashMap<u32, usize> =
            catalog.iter().flat_map(|c| c.dbs.iter().enumerate().map(|(db, d)| (d.keyspace, db))).collect();
        let mut counted: HashMap<u32, DbRecord> = HashMap::new();
        let mut by_id: HashMap<u64, Tally> = HashMap::new();
        let mut reclaimable: HashSet<u64> = HashSet::new();
        // The end of the last bucket seen, per keyspace: buckets must not
        // overlap.
        let mut last_end: HashMap<u32, u64> = HashMap::new();
        // Keyspaces with a damaged bucket: their counts cannot be checked.
        let mut damaged: HashSet<u32> = HashSet::new();
        for r in store.scan_prefix(&[layout::NS_BUCKET]) {
            let (k, v) = r?;
            let Some((ks, start)) = layout::parse_bucket_key(&k) else {
                metadata_damaged = true;
                report.problems.push(problem(None, None, format!("malformed bucket key {k:?}")));
                continue;
            };
            let bucket = match Bucket::decode(self.metas.key_hash(), ks, start, &v) {
                Ok(b) => b,
                Err(e) => {
                    report.problems.push(problem(None, None, e.to_string()));
                    metadata_damaged = true;
                    damaged.insert(ks);
                    continue;
                }
            };
            if dead.contains(&ks) {
                // A flushed keyspace waiting for reclamation.
                reclaimable.extend(bucket.ids());
                continue;
            }
            if !live.contains_key(&ks) {
                metadata_damaged = true;
                report.problems.push(problem(None, None, format!("bucket {ks}/{start:#010x} of no database")));
                continue;
            }
            let end = bucket_end(start, bucket.depth);
            if last_end.insert(ks, end).is_some_and(|prev| u64::from(start) < prev) {
                metadata_damaged = true;
                report.problems.push(problem(None, None, format!("bucket {ks}/{start:#010x} overlaps the one before")));
            }
            let c = counted.entry(ks).or_default();
            for (name, meta) in bucket.iter() {
                report.keys += 1;
                c.keys += 1;
                if meta.expire_at_ms != 0 {
                    c.expires += 1;
                    c.expire_secs += meta.expire_at_ms / 1000;
                }
                let Some(id) = meta.id() else {
                    if meta.kind == Kind::Bloom {
                        if let Some(reason) = crate::bloom::check_small(meta.inline_value()) {
                            report.problems.push(problem(Some(&name), None, reason));
                        }
                    }
                    continue;
                };
                let tally = Tally {
                    name: name.clone(),
                    kind: meta.kind,
                    len: meta.len,
                    meta_ones: meta.ones,
                    ones: 0,
                    header_seen: false,
                    unreadable: false,
                };
                if let Some(other) = by_id.insert(id, tally) {
                    report.problems.push(problem(
                        Some(&name),
                        None,
                        format!("shares bitmap id {id} with key {:?}", String::from_utf8_lossy(&other.name)),
                    ));
                }
            }
        }
        for d in catalog.iter().flat_map(|c| &c.dbs).filter(|d| !damaged.contains(&d.keyspace)) {
            let c = counted.get(&d.keyspace).copied().unwrap_or_default();
            let db = live.get(&d.keyspace).copied().unwrap_or(0);
            if (c.keys, c.expires, c.expire_secs) != (d.keys, d.expires, d.expire_secs) {
                // Buckets may have lost keys.
                metadata_damaged = true;
                report.problems.push(problem(
                    None,
                    None,
                    format!(
                        "database {db}: the catalog counts {} keys ({} with an expiry), the buckets hold {} ({})",
                        d.keys, d.expires, c.keys, c.expires
                    ),
                ));
            }
        }
        reclaimable.extend(
            store
                .scan_prefix(&[layout::NS_RECLAIM])
                .map(|r| r.map(|(k, _)| layout::parse_reclaim_key(&k)))
                .collect::<Result<Vec<_>>>()?
                .into_iter()
                .flatten(),
        );
        let mut pages =
            PageCheck { by_id, reclaimable, unowned: BTreeMap::new(), last: None, failed_groups: HashSet::new() };
        let mut stopped = None;
        for r in StoredPages::all(store) {
            match r {
                Ok(stored) => pages.page(&mut report, stored)?,
                Err(ScanError::Store(e)) => {
                    stopped = Some(e);
                    break;
                }
                Err(e) => pages.scan_error(&mut report, e),
            }
        }
        if let Some(e) = stopped {
            // The store could not be read past some record, and a scan ends
            // at its first error. Counting on would blame every key whose
            // pages lie beyond it for pages never read: each remaining key's
            // pages are read on their own instead, so only the keys whose
            // own pages cannot be read are reported.
            report.problems.push(problem(
                None,
                None,
                format!(
                    "the scan of all pages stopped ({e}); the keys after it were checked one by one, and \
                     pages of no key after it were not looked for"
                ),
            ));
            let mut ids: Vec<u64> = pages.by_id.keys().copied().collect();
            ids.sort_unstable();
            let resume = pages.last;
            for id in ids.into_iter().filter(|&id| resume.is_none_or(|(at, _)| id >= at)) {
                let from = match resume {
                    Some((at, page)) if at == id => match page.checked_add(1) {
                        Some(next) => next,
                        None => continue,
                    },
                    _ => 0,
                };
                for r in StoredPages::of_bitmap(store, id, from, u64::MAX) {
                    match r {
                        Ok(stored) => pages.page(&mut report, stored)?,
                        Err(ScanError::Store(e)) => {
                            pages.unreadable(&mut report, id, &e);
                            break;
                        }
                        Err(e) => pages.scan_error(&mut report, e),
                    }
                }
            }
        }
        let PageCheck { by_id, unowned, .. } = pages;
        // A problem naming a key is a key whose metadata or pages are
        // damaged, too.
        metadata_damaged |= report.problems.iter().any(|p| p.key.is_some());
        for (id, n) in unowned {
            let hint = if metadata_damaged { " (their key's metadata may be damaged)" } else { "" };
            report.problems.push(problem(None, None, format!("{n} pages of bitmap id {id} belong to no key{hint}")));
        }
        let mut tallies: Vec<&Tally> = by_id.values().collect();
        tallies.sort_by(|a, b| a.name.cmp(&b.name));
        // A key whose pages could not be read is reported once, above.
        for t in tallies.into_iter().filter(|t| !t.unreadable) {
            if t.kind == Kind::Bloom && !t.header_seen {
                report.problems.push(problem(
                    Some(&t.name),
                    Some(crate::bloom::HEADER_PAGE),
                    "Bloom filter header page is missing".into(),
                ));
            }
            if t.ones != t.meta_ones {
                report.problems.push(problem(
                    Some(&t.name),
                    None,
                    format!("metadata counts {} set bits, pages hold {}", t.meta_ones, t.ones),
                ));
            }
        }
        Ok(report)
    }
}

/// Checks one decoded page of the key `tally` counts: a Bloom header's
/// format, and no bits past the key's length.
fn check_page(report: &mut VerifyReport, tally: &mut Tally, page: u64, p: &Page) {
    if tally.kind == Kind::Bloom && page == crate::bloom::HEADER_PAGE {
        if let Some(reason) = crate::bloom::check_stored_header(tally.len, p) {
            report.problems.push(problem(Some(&tally.name), Some(page), reason));
        }
    }
    tally.ones += u64::from(p.count_ones());
    let end_bit = tally.len.saturating_mul(8);
    let page_start = page.saturating_mul(PAGE_BITS);
    let beyond = if end_bit <= page_start {
        p.count_ones()
    } else if end_bit - page_start < PAGE_BITS {
        p.count_range(page_bit(end_bit - page_start), page_bit(PAGE_BITS - 1) + 1)
    } else {
        0
    };
    if beyond > 0 {
        report.problems.push(problem(
            Some(&tally.name),
            Some(page),
            format!("{beyond} bits set past the key's length of {} bytes", tally.len),
        ));
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::store::{Bytes, Scan, SledStore, Store, Write};
    use super::*;
    use crate::{Config, Db};

    /// A sled store whose records of one bitmap id cannot be read, as when
    /// sled's node holding them is damaged: reading one fails, and a scan
    /// that reaches one yields the error as its last item.
    struct Unreadable {
        inner: SledStore,
        id: u64,
    }

    /// Whether `key` is a page or group record of bitmap `id`.
    fn of_id(key: &[u8], id: u64) -> bool {
        let at = layout::parse_page_key(key).or_else(|| layout::parse_group_key(key));
        at.is_some_and(|(i, _)| i == id)
    }

    impl Unreadable {
        fn hit(&self, key: &[u8]) -> bool {
            of_id(key, self.id)
        }

        fn error() -> Error {
            Error::Corrupted { key: "<sled log>".into(), page: None, reason: "unreadable node".into() }
        }

        fn cut(&self, scan: Scan) -> Scan {
            let id = self.id;
            let mut scan = Some(scan);
            Box::new(std::iter::from_fn(move || {
                let r = scan.as_mut()?.next()?;
                if r.as_ref().map_or(true, |(k, _)| of_id(k, id)) {
                    scan = None;
                    return Some(Err(Unreadable::error()));
                }
                Some(r)
            }))
        }
    }

    impl Store for Unreadable {
        fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
            if self.hit(key) {
                return Err(Unreadable::error());
            }
            self.inner.get(key)
        }
        fn scan(&self, from: &[u8], to: &[u8]) -> Scan {
            self.cut(self.inner.scan(from, to))
        }
        fn scan_prefix(&self, prefix: &[u8]) -> Scan {
            self.cut(self.inner.scan_prefix(prefix))
        }
        fn last_at_or_before(&self, key: &[u8]) -> Result<Option<(Bytes, Bytes)>> {
            match self.inner.last_at_or_before(key)? {
                Some((k, _)) if self.hit(&k) => Err(Unreadable::error()),
                other => Ok(other),
            }
        }
        fn apply(&self, writes: Vec<Write>) -> Result<()> {
            self.inner.apply(writes)
        }
        fn next_id(&self) -> Result<u64> {
            self.inner.next_id()
        }
        fn sync(&self) -> Result<()> {
            self.inner.sync()
        }
        fn size_on_disk(&self) -> Result<u64> {
            self.inner.size_on_disk()
        }
        fn is_empty(&self) -> bool {
            self.inner.is_empty()
        }
        fn available_bytes(&self) -> Result<Option<u64>> {
            self.inner.available_bytes()
        }
    }

    fn config(dir: &Path) -> Config {
        Config::new(dir).flush_interval(None)
    }

    /// Invariant: when the store cannot read some records, `verify`
    /// finishes, and the keys it names are exactly the keys that cannot be
    /// read: the keys whose pages lie after the unreadable records in
    /// store order are checked, not blamed for pages the scan never
    /// reached; a damaged group met before the read error is reported
    /// once.
    #[test]
    fn unreadable_records_blame_only_their_keys() {
        let dir = tempfile::tempdir().unwrap();
        let names: Vec<Vec<u8>> = (0..10).map(|i| format!("k{i}").into_bytes()).collect();
        {
            let db = Db::open_with(config(dir.path())).unwrap();
            for (i, name) in (0u64..).zip(&names) {
                // Small pages only (group records): pages 0..=2 in group
                // 0, page 64 in group 1.
                let offsets: Vec<u64> = (0..4).map(|p| [0, 1, 2, 64][p] * PAGE_BITS + i * 7 + 3).collect();
                db.set_bits(name, &offsets, true).unwrap();
            }
            db.flush().unwrap();
        }
        // The bitmap ids in store order; damage the last group of the
        // fourth, and make the fifth unreadable.
        let store = SledStore::open(dir.path(), 1 << 20).unwrap();
        let mut ids: Vec<u64> =
            store.scan_prefix(&[layout::NS_GROUP]).map(|r| layout::parse_group_key(&r.unwrap().0).unwrap().0).collect();
        ids.dedup();
        assert_eq!(ids.len(), names.len());
        let (damaged, unreadable) = (ids[3], ids[4]);
        let key = layout::group_key(damaged, 1);
        let mut bytes = store.get(&key).unwrap().unwrap().to_vec();
        bytes[2] ^= 0x40;
        store.apply(vec![(key.to_vec(), Some(bytes))]).unwrap();
        store.sync().unwrap();

        let engine =
            super::super::Engine::open_on(config(dir.path()), Box::new(Unreadable { inner: store, id: unreadable }))
                .unwrap();
        let db = Db::handle(engine, 0);
        let report = db.verify().unwrap();
        let failing: HashSet<&[u8]> = names.iter().filter(|n| db.get(n).is_err()).map(Vec::as_slice).collect();
        let named: HashSet<&[u8]> = report.problems.iter().filter_map(|p| p.key.as_deref()).collect();
        assert_eq!(failing.len(), 2, "{report:#?}");
        assert_eq!(named, failing, "{report:#?}");
        let group_reports = report.problems.iter().filter(|p| p.page == Some(64)).count();
        assert_eq!(group_reports, 1, "{report:#?}");
        assert!(report.problems.iter().any(|p| p.key.is_none() && p.reason.contains("stopped")), "{report:#?}");
        assert_eq!(report.keys, 10);
    }
}
