//! VERIFY: check every stored record.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::bucket::Bucket;
use super::layout;
use super::metas::bucket_end;
use super::record::{self, Catalog, DbRecord, Kind};
use super::stored::{Held, ScanError, StoredPages};
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
}

fn problem(key: Option<&[u8]>, page: Option<u64>, reason: String) -> Problem {
    Problem { key: key.map(<[u8]>::to_vec), page, reason }
}

impl Engine {
    /// Checks every record in the store; see [`crate::Db::verify`]. Writes
    /// pending changes back first so the store is complete, and holds the
    /// write-back lock meanwhile so the store stays still.
    pub(crate) fn verify(&self) -> Result<VerifyReport> {
        let f = self.flush_lock.lock();
        self.write_back_locked(&f, super::metas::Fold::All)?;
        let mut report = VerifyReport::default();
        match self.store.get(&layout::superblock_key())? {
            Some(b) => {
                if let Err(e) = record::check_superblock(&b) {
                    report.problems.push(problem(None, None, e.to_string()));
                }
            }
            None => report.problems.push(problem(None, None, "superblock missing".into())),
        }
        let catalog = match self.store.get(&layout::catalog_key())? {
            Some(b) => Catalog::decode(&b).map_err(|e| report.problems.push(problem(None, None, e.to_string()))).ok(),
            None => {
                report.problems.push(problem(None, None, "keyspace catalog missing".into()));
                None
            }
        };
        // Whether a metadata record (a bucket or a delta) is damaged or out
        // of place: pages that belong to no key may then be a damaged key's.
        let mut metadata_damaged = false;
        let dead: HashSet<u32> = self
            .store
            .scan_prefix(&[layout::NS_DEAD])
            .filter_map(|r| r.ok().and_then(|(k, _)| layout::parse_dead_key(&k)))
            .collect();
        // The fold above wrote every bucket whole and retired every delta
        // record: one left would hold changes no bucket has.
        for r in self.store.scan_prefix(&[layout::NS_DELTA]) {
            let (k, v) = r?;
            let reason = match layout::parse_delta_key(&k) {
                Some((shard, seq, part)) => {
                    match super::delta::decode(usize::from(shard), &format!("{shard}/{seq}/{part}"), &v) {
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
        if self.store.scan_prefix(&[layout::NS_META_V1]).next().is_some() {
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
        for r in self.store.scan_prefix(&[layout::NS_BUCKET]) {
            let (k, v) = r?;
            let Some((ks, start)) = layout::parse_bucket_key(&k) else {
                metadata_damaged = true;
                report.problems.push(problem(None, None, format!("malformed bucket key {k:?}")));
                continue;
            };
            let bucket = match Bucket::decode(ks, start, &v) {
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
                            report.problems.push(problem(Some(name), None, reason));
                        }
                    }
                    continue;
                };
                let tally = Tally {
                    name: name.to_vec(),
                    kind: meta.kind,
                    len: meta.len,
                    meta_ones: meta.ones,
                    ones: 0,
                    header_seen: false,
                };
                if let Some(other) = by_id.insert(id, tally) {
                    report.problems.push(problem(
                        Some(name),
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
            self.store
                .scan_prefix(&[layout::NS_RECLAIM])
                .filter_map(|r| r.ok().and_then(|(k, _)| layout::parse_reclaim_key(&k))),
        );
        let mut unowned: BTreeMap<u64, u64> = BTreeMap::new();
        let mut last: Option<(u64, u64)> = None;
        for r in StoredPages::all(&*self.store) {
            let stored = match r {
                Ok(stored) => stored,
                Err(ScanError::Group { id, page, error }) => {
                    let name = by_id.get(&id).map(|t| t.name.clone());
                    let reason = match &name {
                        Some(_) => error.to_string(),
                        None => format!("bitmap id {id}: {error}"),
                    };
                    report.problems.push(problem(name.as_deref(), Some(page), reason));
                    continue;
                }
                Err(e) => {
                    report.problems.push(problem(None, None, e.into_error(None).to_string()));
                    continue;
                }
            };
            report.pages += 1;
            let (id, page) = (stored.id, stored.page);
            let twice = last == Some((id, page));
            last = Some((id, page));
            let Some(tally) = by_id.get_mut(&id) else {
                if !reclaimable.contains(&id) {
                    *unowned.entry(id).or_insert(0u64) += 1;
                }
                continue;
            };
            if twice {
                report.problems.push(problem(
                    Some(&tally.name),
                    Some(page),
                    "stored twice: as a page record and in its group's record".into(),
                ));
                continue;
            }
            tally.header_seen |= page == crate::bloom::HEADER_PAGE;
            let grouped = matches!(stored.held, Held::Page(_));
            match stored.held.into_page(Some(&tally.name), id, page) {
                Ok(p) => {
                    if fits_group(&p.encode()) != grouped {
                        report.misplaced_pages += 1;
                    }
                    check_page(&mut report, tally, page, &p);
                }
                Err(Error::Corrupted { reason, .. }) => {
                    report.problems.push(problem(Some(&tally.name), Some(page), reason))
                }
                Err(e) => return Err(e),
            }
        }
        // A problem naming a key is a key whose metadata or pages are
        // damaged, too.
        metadata_damaged |= report.problems.iter().any(|p| p.key.is_some());
        for (id, n) in unowned {
            let hint = if metadata_damaged { " (their key's metadata may be damaged)" } else { "" };
            report.problems.push(problem(None, None, format!("{n} pages of bitmap id {id} belong to no key{hint}")));
        }
        let mut tallies: Vec<&Tally> = by_id.values().collect();
        tallies.sort_by(|a, b| a.name.cmp(&b.name));
        for t in tallies {
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
