//! Scalable Bloom filters (RedisBloom's BF.* commands) on the store.
//!
//! A filter is a key of type [`Kind::Bloom`] whose bitmap holds the header
//! in page 0 and each sub-filter's bit array from its own first page on
//! (see `crate::bloom` and DESIGN.md). Bits are set and read through the
//! page cache like a string's, so a filter larger than memory pages from
//! disk, and each command is one atomic change under the key's lock.

pub(crate) mod dump;

use smallvec::SmallVec;

use crate::bloom::hash::ItemHash;
use crate::bloom::small::{self, Peeked, Small};
use crate::bloom::{
    BloomAdd, BloomInfo, BloomOptions, Header, DEFAULT_CAPACITY, DEFAULT_ERROR_RATE, ERROR_RATE_CAP, HEADER_PAGE,
    MAX_CAPACITY, MAX_EXPANSION,
};
use crate::db::Db;
use crate::engine::idhash::FastSet;
use crate::engine::{Kind, Meta, ReadTx, WriteTx};
use crate::error::{Error, Result};
use crate::geometry::{locate, PAGE_BITS, PAGE_BYTES, PAGE_LEN};
use crate::page::Page;

/// RedisBloom's reply when a sub-filter cannot be added.
const ERR_INSERT: &str = "problem inserting into filter";

fn corrupt(key: &[u8], reason: &str) -> Error {
    Error::Corrupted {
        key: String::from_utf8_lossy(key).into_owned(),
        page: Some(HEADER_PAGE),
        reason: format!("Bloom filter header: {reason}"),
    }
}

/// Reads and validates the header of the filter `meta` describes.
fn read_header(tx: &ReadTx<'_>, key: &[u8], meta: &Meta) -> Result<Header> {
    let page = tx.page(key, meta, HEADER_PAGE)?.ok_or_else(|| corrupt(key, "the header page is missing"))?;
    let mut buf = vec![0u8; PAGE_LEN];
    page.write_bytes(&mut buf);
    let header = Header::decode(&buf).map_err(|r| corrupt(key, &r))?;
    if header.end_page().checked_mul(PAGE_BYTES) != Some(meta.len) {
        return Err(corrupt(
            key,
            &format!("the key's length of {} bytes is not the {} pages the filter spans", meta.len, header.end_page()),
        ));
    }
    Ok(header)
}

/// The header page holding `header`.
fn header_page(header: &Header) -> Page {
    let mut buf = header.encode();
    buf.resize(PAGE_LEN, 0);
    Page::from_bytes(&buf)
}

/// A validated header for a new filter, with RedisBloom's bounds; an error
/// rate above [`ERROR_RATE_CAP`] is lowered to it.
fn new_header(error_rate: f64, capacity: u64, options: BloomOptions) -> Result<Header> {
    if !(error_rate > 0.0 && error_rate < 1.0) {
        return Err(Error::InvalidArgument("error rate must be in the range (0.000000, 1.000000)".into()));
    }
    if capacity == 0 || capacity > MAX_CAPACITY {
        return Err(Error::InvalidArgument(format!("capacity must be in the range [1, {MAX_CAPACITY}]")));
    }
    if options.expansion > MAX_EXPANSION {
        return Err(Error::InvalidArgument(format!("expansion must be in the range [0, {MAX_EXPANSION}]")));
    }
    Header::new(error_rate.min(ERROR_RATE_CAP), capacity, options.expansion, options.nonscaling)
        .map_err(Error::InvalidArgument)
}

/// One filter while a command works on it.
struct Filter {
    meta: Meta,
    header: Header,
    /// The bits of a small filter (kept inline in its metadata entry, see
    /// `crate::bloom::small`); `None` for a filter in pages.
    small: Option<Vec<u8>>,
    /// Made by this command: nothing of it is stored yet.
    created: bool,
}

impl Filter {
    /// A new filter: small if its one sub-filter fits inline.
    fn create(tx: &WriteTx<'_>, header: Header) -> Result<Filter> {
        if header.filters.len() == 1 && small::encoded_len(&header) as u64 <= Kind::Bloom.inline_max() {
            let bits = Small::empty(header.clone()).bits;
            return Ok(Filter { meta: tx.new_value(Kind::Bloom), header, small: Some(bits), created: true });
        }
        let mut meta = tx.new_paged(Kind::Bloom)?;
        meta.len = header.end_page().saturating_mul(PAGE_BYTES);
        Ok(Filter { meta, header, small: None, created: true })
    }

    /// The stored filter `meta` describes, small or in pages.
    fn load(tx: &ReadTx<'_>, key: &[u8], meta: &Meta) -> Result<Filter> {
        if meta.is_inline() {
            let s = Small::decode(meta.inline_value()).map_err(|r| small_damage(key, &r))?;
            return Ok(Filter { meta: meta.clone(), header: s.header, small: Some(s.bits), created: false });
        }
        Ok(Filter { header: read_header(tx, key, meta)?, meta: meta.clone(), small: None, created: false })
    }
}

/// The error for the small filter of `key` whose bytes do not decode
/// (`reason` says why).
fn small_damage(key: &[u8], reason: &str) -> Error {
    Error::Corrupted {
        key: String::from_utf8_lossy(key).into_owned(),
        page: None,
        reason: format!("small Bloom filter: {reason}"),
    }
}

#[cfg(test)]
thread_local! {
    /// Tests turn the one-item fast paths off to compare them with the
    /// general path.
    static GENERAL_ONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the one-item fast paths may run (always, outside tests).
fn fast_paths() -> bool {
    #[cfg(test)]
    if GENERAL_ONLY.with(std::cell::Cell::get) {
        return false;
    }
    true
}

/// A small filter read where it lies, probed for one item.
struct SmallProbe {
    peeked: Peeked,
    /// The positions of the item's bits that are clear, sorted, no
    /// repeats: none when the item is held.
    clear: SmallVec<[u64; 16]>,
}

/// The small form `b` of `key`'s filter, probed for the item of hash `h`.
///
/// # Errors
/// [`Error::Corrupted`] if `b` is no small form.
fn probe_bytes(key: &[u8], b: &[u8], h: &ItemHash) -> Result<SmallProbe> {
    let p = small::peek(b).map_err(|r| small_damage(key, &r))?;
    let f = p.filter;
    let bits = &b[p.bits_at..];
    let mut clear: SmallVec<[u64; 16]> =
        (0..f.hashes).map(|i| h.position(i, f.bits)).filter(|&x| !small::bit(bits, x)).collect();
    clear.sort_unstable();
    clear.dedup();
    Ok(SmallProbe { peeked: p, clear })
}

/// The small filter `meta` describes, probed for `item`; `None` for a
/// filter in pages (or with the fast paths off).
fn probe_small(key: &[u8], meta: &Meta, item: &[u8]) -> Result<Option<SmallProbe>> {
    if !meta.is_inline() || !fast_paths() {
        return Ok(None);
    }
    probe_bytes(key, meta.inline_value(), &ItemHash::of(item)).map(Some)
}

/// A small filter of `key` (inline, not expired) probed for `item` where
/// its bytes lie in the key's entry, with no metadata decoded: `None`
/// where the key must be read whole first (missing, expired, another
/// type, a filter in pages, the fast paths off).
fn peek_small(tx: &mut ReadTx<'_>, key: &[u8], item: &[u8]) -> Result<Option<SmallProbe>> {
    if !fast_paths() {
        return Ok(None);
    }
    let h = ItemHash::of(item);
    tx.peek_inline(key, Kind::Bloom, |b| probe_bytes(key, b, &h))?.transpose()
}

/// [`add_one_small`] from a [`peek_small`] of the key: `None` where the
/// key must be read whole first (as `peek_small`), or for an item that
/// changes more than the count and bits in place (a filter at its
/// capacity; the count's varint growing a byte).
fn add_one_peeked(tx: &mut WriteTx<'_>, key: &[u8], item: &[u8]) -> Result<Option<BloomAdd>> {
    let Some(SmallProbe { peeked: p, clear }) = peek_small(tx, key, item)? else { return Ok(None) };
    if clear.is_empty() {
        return Ok(Some(BloomAdd::Exists));
    }
    let items = p.filter.items + 1;
    if items > p.filter.capacity || !small::fits_in_place(&p, items) {
        return Ok(None);
    }
    let added = tx
        .patch_inline(key, Kind::Bloom, Some((items, &clear)), |bytes| small::add_in_place(bytes, &p, items, &clear))?;
    Ok(added.then_some(BloomAdd::Added))
}

/// One item's BF.ADD to the small filter `meta` describes, its entry
/// rewritten (where [`add_one_peeked`] does not apply: the count's varint
/// grows a byte): the answer, or `None` where the general path must run
/// (a filter in pages; a new item for a filter at its capacity, which
/// grows the chain or is refused). Answers and stored bytes are the
/// general path's.
fn add_one_small(tx: &mut WriteTx<'_>, key: &[u8], meta: &Meta, item: &[u8]) -> Result<Option<BloomAdd>> {
    let Some(SmallProbe { peeked: p, clear }) = probe_small(key, meta, item)? else {
        return Ok(None);
    };
    let b = meta.inline_value();
    let f = p.filter;
    if clear.is_empty() {
        return Ok(Some(BloomAdd::Exists));
    }
    if f.items >= f.capacity {
        return Ok(None);
    }
    let value = small::with_items(b, &p, f.items + 1, &clear);
    tx.add_to_small_bloom(key, meta, &value, f.items + 1, &clear)?;
    Ok(Some(BloomAdd::Added))
}

/// For each item `j` and stored sub-filter `f`, at index `j * filters + f`,
/// the bitmap offsets of the item's bits that are clear. The item is in
/// sub-filter `f` when that list is empty.
///
/// Cost: a small filter's bits are at hand; otherwise one page read per
/// page touched (all positions are computed, sorted and grouped by page
/// first).
fn probe(tx: &ReadTx<'_>, key: &[u8], filter: &Filter, hashes: &[ItemHash]) -> Result<Vec<Vec<u64>>> {
    let header = &filter.header;
    let nf = header.filters.len();
    let mut missing = vec![Vec::new(); hashes.len() * nf];
    if let Some(bits) = &filter.small {
        // One sub-filter, whose array starts at page 1 as in pages.
        let sf = header.filters[0];
        for (j, h) in hashes.iter().enumerate() {
            for i in 0..sf.hashes {
                let pos = h.position(i, sf.bits);
                if !small::bit(bits, pos) {
                    missing[j].push(sf.offset(pos));
                }
            }
        }
        return Ok(missing);
    }
    let mut wanted: Vec<(u64, usize)> = Vec::new();
    for (j, h) in hashes.iter().enumerate() {
        for (f, sf) in header.filters.iter().enumerate() {
            for i in 0..sf.hashes {
                wanted.push((sf.offset(h.position(i, sf.bits)), j * nf + f));
            }
        }
    }
    wanted.sort_unstable();
    for same_page in wanted.chunk_by(|a, b| a.0 / PAGE_BITS == b.0 / PAGE_BITS) {
        let page = tx.page(key, &filter.meta, same_page[0].0 / PAGE_BITS)?;
        for &(offset, slot) in same_page {
            if !page.as_ref().is_some_and(|p| p.get(locate(offset).bit)) {
                missing[slot].push(offset);
            }
        }
    }
    Ok(missing)
}

/// Adds `items` in order, as consecutive BF.ADDs would: an item is new if
/// it is in no sub-filter (counting the bits set for earlier items of the
/// batch), and goes to the newest sub-filter, which grows the chain first
/// if it is full. Returns the answers and the bitmap offsets to set. Stops
/// after the first [`BloomAdd::Full`].
fn plan_adds<T: AsRef<[u8]>>(
    tx: &ReadTx<'_>,
    key: &[u8],
    filter: &mut Filter,
    items: &[T],
) -> Result<(Vec<BloomAdd>, FastSet<u64>)> {
    let hashes: Vec<ItemHash> = items.iter().map(|i| ItemHash::of(i.as_ref())).collect();
    let stored = if filter.created { 0 } else { filter.header.filters.len() };
    let missing = if stored > 0 { probe(tx, key, filter, &hashes)? } else { Vec::new() };
    let mut to_set = FastSet::default();
    let mut out = Vec::with_capacity(items.len());
    for (j, h) in hashes.iter().enumerate() {
        let present = filter.header.filters.iter().enumerate().any(|(f, sf)| {
            if f < stored {
                missing[j * stored + f].iter().all(|o| to_set.contains(o))
            } else {
                (0..sf.hashes).all(|i| to_set.contains(&sf.offset(h.position(i, sf.bits))))
            }
        });
        if present {
            out.push(BloomAdd::Exists);
            continue;
        }
        if filter.header.is_full() {
            if filter.header.nonscaling {
                out.push(BloomAdd::Full);
                break;
            }
            filter.header.grow().map_err(|_| Error::InvalidArgument(ERR_INSERT.into()))?;
        }
        let sf = *filter.header.newest();
        to_set.extend((0..sf.hashes).map(|i| sf.offset(h.position(i, sf.bits))));
        filter.header.count_added();
        out.push(BloomAdd::Added);
    }
    Ok((out, to_set))
}

/// Sets the bits `to_set` and records the filter: a small filter whose
/// chain is still one sub-filter long is rewritten inline; one that grew
/// moves to pages first (its bits become page 1, where its sub-filter
/// starts in the paged layout). In pages: one read-modify-write per page
/// touched, the header page rewritten, the key's metadata recorded.
fn store_filter(tx: &mut WriteTx<'_>, key: &[u8], filter: &mut Filter, to_set: FastSet<u64>) -> Result<()> {
    if let Some(mut bits) = filter.small.take() {
        let first = filter.header.filters[0];
        if filter.header.filters.len() == 1 {
            for &o in &to_set {
                small::set_bit(&mut bits, o - first.offset(0));
            }
            tx.rewrite_inline(key, &filter.meta, &small::encode(&filter.header, &bits))?;
            filter.small = Some(bits);
            filter.created = false;
            return Ok(());
        }
        let mut meta = tx.new_paged(Kind::Bloom)?;
        meta.expire_at_ms = filter.meta.expire_at_ms;
        let page = Page::from_bytes(&bits);
        tx.update_page(key, &mut meta, first.first_page, |p| *p = page)?;
        filter.meta = meta;
    }
    let mut meta = filter.meta.clone();
    let mut offsets: Vec<u64> = to_set.into_iter().collect();
    offsets.sort_unstable();
    for same_page in offsets.chunk_by(|a, b| a / PAGE_BITS == b / PAGE_BITS) {
        tx.update_page(key, &mut meta, same_page[0] / PAGE_BITS, |p| {
            for &o in same_page {
                p.set(locate(o).bit, true);
            }
        })?;
    }
    let page = header_page(&filter.header);
    tx.update_page(key, &mut meta, HEADER_PAGE, |p| *p = page)?;
    meta.len = filter.header.end_page().saturating_mul(PAGE_BYTES);
    tx.set(key, &meta)?;
    filter.meta = meta;
    filter.created = false;
    Ok(())
}

/// Probed bit positions held in memory at once: a batch is worked through
/// in chunks of items whose positions stay below this (16 bytes each), so
/// memory stays bounded whatever the batch size and the hash count.
const MAX_POSITIONS: usize = 1 << 20;

/// Items per chunk for a filter whose sub-filters take `header`'s hashes.
fn chunk_items(header: &Header) -> usize {
    let per_item: usize = header.filters.iter().map(|f| f.hashes as usize).sum();
    (MAX_POSITIONS / per_item.max(1)).max(1)
}

fn info_of(filter: &Filter) -> BloomInfo {
    let header = &filter.header;
    BloomInfo {
        capacity: header.capacity(),
        size: header.redis_size(),
        filters: header.filters.len() as u64,
        items: header.items(),
        expansion: (!header.nonscaling).then_some(header.expansion),
        span_bytes: if filter.small.is_some() { filter.meta.len } else { header.end_page().saturating_mul(PAGE_BYTES) },
    }
}

impl Db {
    /// BF.RESERVE; see [`Bloom::reserve`].
    pub(crate) fn bf_reserve(&self, key: &[u8], error_rate: f64, capacity: u64, options: BloomOptions) -> Result<bool> {
        let header = new_header(error_rate, capacity, options)?;
        self.engine.write(self.index, &[key], |tx| {
            if tx.typed(key, Kind::Bloom)?.is_some() {
                return Ok(false);
            }
            let mut filter = Filter::create(tx, header)?;
            store_filter(tx, key, &mut filter, FastSet::default())?;
            Ok(true)
        })
    }

    /// BF.ADD; see [`Bloom::add`].
    pub(crate) fn bf_add(&self, key: &[u8], item: &[u8]) -> Result<BloomAdd> {
        let r = self.bf_add_many(key, &[item])?;
        r.first().copied().ok_or_else(|| Error::InvalidArgument(ERR_INSERT.into()))
    }

    /// BF.MADD; see [`Bloom::add_many`].
    pub(crate) fn bf_add_many<T: AsRef<[u8]>>(&self, key: &[u8], items: &[T]) -> Result<Vec<BloomAdd>> {
        let create = || new_header(DEFAULT_ERROR_RATE, DEFAULT_CAPACITY, BloomOptions::default());
        self.add_with(key, items, Some(&create))
    }

    /// BF.INSERT; see [`Bloom::insert`].
    pub(crate) fn bf_insert<T: AsRef<[u8]>>(
        &self,
        key: &[u8],
        items: &[T],
        create: Option<(f64, u64, BloomOptions)>,
    ) -> Result<Vec<BloomAdd>> {
        let make = create.map(|(rate, capacity, options)| move || new_header(rate, capacity, options));
        self.add_with(key, items, make.as_ref().map(|m| m as &dyn Fn() -> Result<Header>))
    }

    fn add_with<T: AsRef<[u8]>>(
        &self,
        key: &[u8],
        items: &[T],
        create: Option<&dyn Fn() -> Result<Header>>,
    ) -> Result<Vec<BloomAdd>> {
        self.engine.write(self.index, &[key], |tx| {
            if let [item] = items {
                if let Some(answer) = add_one_peeked(tx, key, item.as_ref())? {
                    return Ok(vec![answer]);
                }
            }
            let stored = tx.typed(key, Kind::Bloom)?;
            if let (Some(meta), [item]) = (&stored, items) {
                if let Some(answer) = add_one_small(tx, key, meta, item.as_ref())? {
                    return Ok(vec![answer]);
                }
            }
            let mut filter = match stored {
                Some(meta) => Filter::load(tx, key, &meta)?,
                None => match create {
                    Some(make) => Filter::create(tx, make()?)?,
                    None => return Err(Error::InvalidArgument("not found".into())),
                },
            };
            // In chunks of bounded memory, all under the one lock: the
            // command stays atomic.
            let mut out = Vec::with_capacity(items.len());
            let mut rest = items;
            while !rest.is_empty() || filter.created {
                let (chunk, tail) = rest.split_at(chunk_items(&filter.header).min(rest.len()));
                rest = tail;
                let (answers, to_set) = plan_adds(tx, key, &mut filter, chunk)?;
                if filter.created || answers.contains(&BloomAdd::Added) {
                    store_filter(tx, key, &mut filter, to_set)?;
                }
                let full = answers.contains(&BloomAdd::Full);
                out.extend(answers);
                if full {
                    break;
                }
            }
            Ok(out)
        })
    }

    /// BF.EXISTS; see [`Bloom::contains`].
    pub(crate) fn bf_contains(&self, key: &[u8], item: &[u8]) -> Result<bool> {
        Ok(self.bf_contains_many(key, &[item])?.first().copied().unwrap_or(false))
    }

    /// BF.MEXISTS; see [`Bloom::contains_many`].
    pub(crate) fn bf_contains_many<T: AsRef<[u8]>>(&self, key: &[u8], items: &[T]) -> Result<Vec<bool>> {
        // The key's lock is held while pages are read, so the bitmap cannot
        // be replaced (and its pages discarded) meanwhile.
        self.engine.read(self.index, &[key], |tx| {
            if let [item] = items {
                if let Some(probe) = peek_small(tx, key, item.as_ref())? {
                    return Ok(vec![probe.clear.is_empty()]);
                }
            }
            let Some(meta) = tx.typed(key, Kind::Bloom)? else { return Ok(vec![false; items.len()]) };
            if let [item] = items {
                if let Some(probe) = probe_small(key, &meta, item.as_ref())? {
                    return Ok(vec![probe.clear.is_empty()]);
                }
            }
            let filter = Filter::load(tx, key, &meta)?;
            let nf = filter.header.filters.len();
            let mut out = Vec::with_capacity(items.len());
            for chunk in items.chunks(chunk_items(&filter.header)) {
                let hashes: Vec<ItemHash> = chunk.iter().map(|i| ItemHash::of(i.as_ref())).collect();
                let missing = probe(tx, key, &filter, &hashes)?;
                out.extend((0..chunk.len()).map(|j| missing[j * nf..(j + 1) * nf].iter().any(Vec::is_empty)));
            }
            Ok(out)
        })
    }

    /// BF.INFO; see [`Bloom::info`].
    pub(crate) fn bf_info(&self, key: &[u8]) -> Result<Option<BloomInfo>> {
        self.engine.read(self.index, &[key], |tx| {
            let Some(meta) = tx.typed(key, Kind::Bloom)? else { return Ok(None) };
            Ok(Some(info_of(&Filter::load(tx, key, &meta)?)))
        })
    }

    /// BF.CARD; see [`Bloom::card`].
    pub(crate) fn bf_card(&self, key: &[u8]) -> Result<u64> {
        Ok(self.bf_info(key)?.map_or(0, |i| i.items))
    }

    /// A handle on the Bloom filter at `key`, with the BF.* operations as
    /// methods.
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// use bitsled::{BloomAdd, BloomOptions};
    /// let db = bitsled::Db::open(dir.path())?;
    /// let seen = db.bloom(b"seen");
    /// assert!(seen.reserve(0.001, 1_000_000, BloomOptions::default())?);
    /// assert_eq!(seen.add(b"order:17")?, BloomAdd::Added);
    /// assert_eq!(seen.add(b"order:17")?, BloomAdd::Exists);
    /// assert!(seen.contains(b"order:17")?);
    /// assert_eq!(seen.card()?, 1);
    /// # Ok(()) }
    /// ```
    pub fn bloom(&self, key: impl AsRef<[u8]>) -> Bloom<'_> {
        Bloom { db: self, key: key.as_ref().to_vec() }
    }
}

/// A handle on one Bloom filter key; see [`Db::bloom`]. Its methods are
/// RedisBloom's BF.* commands applied to this key.
#[derive(Clone, Debug)]
pub struct Bloom<'a> {
    db: &'a Db,
    key: Vec<u8>,
}

impl Bloom<'_> {
    /// The key.
    #[must_use]
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// Creates an empty filter for `capacity` items at false-positive rate
    /// `error_rate` (RedisBloom BF.RESERVE). Returns `false`, changing
    /// nothing, if the key already holds a filter.
    ///
    /// `error_rate` must be in `(0, 1)` (above 0.25 it is lowered to 0.25,
    /// as RedisBloom does), `capacity` in `1 ..= 2^30`, the expansion at
    /// most 32,768. A scaling filter's first sub-filter uses half the rate,
    /// so that the rate of the whole chain stays below `error_rate`.
    ///
    /// Cost: one page (the header); the bit arrays take no space until
    /// bits are set.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an argument out of range (the text is
    /// RedisBloom's); [`Error::WrongType`] if the key holds another type;
    /// [`Error::Poisoned`].
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// use bitsled::BloomOptions;
    /// let db = bitsled::Db::open(dir.path())?;
    /// let f = db.bloom(b"f");
    /// assert!(f.reserve(0.01, 1000, BloomOptions::default().expansion(4))?);
    /// assert!(!f.reserve(0.01, 1000, BloomOptions::default())?, "already there");
    /// assert_eq!(f.info()?.map(|i| (i.capacity, i.expansion)), Some((1000, Some(4))));
    /// # Ok(()) }
    /// ```
    pub fn reserve(&self, error_rate: f64, capacity: u64, options: BloomOptions) -> Result<bool> {
        self.db.bf_reserve(&self.key, error_rate, capacity, options)
    }

    /// Adds one item (RedisBloom BF.ADD), creating a default filter (error
    /// rate 0.01, capacity 100, expansion 2) if the key does not exist.
    ///
    /// Cost: as [`Bloom::add_many`] with one item.
    ///
    /// # Errors
    /// As [`Bloom::add_many`].
    pub fn add(&self, item: impl AsRef<[u8]>) -> Result<BloomAdd> {
        self.db.bf_add(&self.key, item.as_ref())
    }

    /// Adds `items` in order (RedisBloom BF.MADD), creating a default filter
    /// if the key does not exist. The answers are those of consecutive
    /// [`Bloom::add`] calls: an item repeated in the batch is
    /// [`BloomAdd::Exists`] the second time. A non-scaling filter that fills
    /// up answers [`BloomAdd::Full`] for the first item that does not fit,
    /// and the answers stop there (later items are not added).
    ///
    /// The whole batch is one atomic change: a write-back (and so a crash)
    /// sees all of it or none of it.
    ///
    /// Cost: the positions of all items in all sub-filters are computed and
    /// grouped by page; each page is read once and written at most once.
    /// Memory: about 16 bytes per item, hash function and sub-filter, in
    /// chunks of at most 2^20 positions.
    ///
    /// # Errors
    /// [`Error::WrongType`] if the key holds another type;
    /// [`Error::Corrupted`] if the header or a page does not decode;
    /// [`Error::InvalidArgument`] with RedisBloom's `problem inserting into
    /// filter` if the chain cannot grow (64 sub-filters, or sizes beyond
    /// 2^60 bits), then nothing is changed; [`Error::Poisoned`].
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// use bitsled::{BloomAdd, BloomOptions};
    /// let db = bitsled::Db::open(dir.path())?;
    /// let f = db.bloom(b"small");
    /// f.reserve(0.01, 2, BloomOptions::default().nonscaling())?;
    /// assert_eq!(
    ///     f.add_many(&["a", "b", "a", "c", "d"])?,
    ///     vec![BloomAdd::Added, BloomAdd::Added, BloomAdd::Exists, BloomAdd::Full]
    /// );
    /// # Ok(()) }
    /// ```
    pub fn add_many<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<BloomAdd>> {
        self.db.bf_add_many(&self.key, items)
    }

    /// Adds `items` as [`Bloom::add_many`] does (RedisBloom BF.INSERT). If
    /// the key does not exist, a filter is created with `create`'s error
    /// rate, capacity and options; with `create` `None` (NOCREATE) a
    /// missing key is an error.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] with RedisBloom's `not found` if the key
    /// does not exist and `create` is `None`; for a new filter, as
    /// [`Bloom::reserve`]; otherwise as [`Bloom::add_many`].
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// use bitsled::{BloomAdd, BloomOptions};
    /// let db = bitsled::Db::open(dir.path())?;
    /// let f = db.bloom(b"f");
    /// assert!(f.insert(&["a"], None).is_err(), "NOCREATE on a missing key");
    /// let added = f.insert(&["a", "b"], Some((0.001, 10_000, BloomOptions::default())))?;
    /// assert_eq!(added, vec![BloomAdd::Added, BloomAdd::Added]);
    /// assert_eq!(f.info()?.map(|i| i.capacity), Some(10_000));
    /// # Ok(()) }
    /// ```
    pub fn insert<T: AsRef<[u8]>>(
        &self,
        items: &[T],
        create: Option<(f64, u64, BloomOptions)>,
    ) -> Result<Vec<BloomAdd>> {
        self.db.bf_insert(&self.key, items, create)
    }

    /// Whether `item` may have been added (RedisBloom BF.EXISTS): `false`
    /// means certainly not; `true` is wrong with about the filter's error
    /// rate. `false` for a missing key.
    ///
    /// # Errors
    /// As [`Bloom::contains_many`].
    pub fn contains(&self, item: impl AsRef<[u8]>) -> Result<bool> {
        self.db.bf_contains(&self.key, item.as_ref())
    }

    /// [`Bloom::contains`] for each of `items` (RedisBloom BF.MEXISTS).
    ///
    /// Cost: each page holding a probed bit is read once (positions are
    /// grouped by page), under the key's lock.
    ///
    /// # Errors
    /// [`Error::WrongType`] if the key holds another type (RedisBloom's
    /// BF.EXISTS replies 0 instead; the command layer does that);
    /// [`Error::Corrupted`] if the header or a page does not decode.
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = bitsled::Db::open(dir.path())?;
    /// let f = db.bloom(b"f");
    /// f.add_many(&["x", "y"])?;
    /// assert_eq!(f.contains_many(&["x", "nope", "y"])?, vec![true, false, true]);
    /// # Ok(()) }
    /// ```
    pub fn contains_many<T: AsRef<[u8]>>(&self, items: &[T]) -> Result<Vec<bool>> {
        self.db.bf_contains_many(&self.key, items)
    }

    /// The filter's figures (RedisBloom BF.INFO), `None` if it does not
    /// exist.
    ///
    /// Cost: the header page.
    ///
    /// # Errors
    /// [`Error::WrongType`], [`Error::Corrupted`].
    pub fn info(&self) -> Result<Option<BloomInfo>> {
        self.db.bf_info(&self.key)
    }

    /// Items added (RedisBloom BF.CARD); 0 for a missing key.
    ///
    /// # Errors
    /// [`Error::WrongType`], [`Error::Corrupted`].
    pub fn card(&self) -> Result<u64> {
        self.db.bf_card(&self.key)
    }

    /// One step of a dump of the filter (RedisBloom BF.SCANDUMP): start
    /// with `iter` 0 and pass each returned iterator to the next call;
    /// `(0, [])` ends the dump. Each `(iterator, chunk)` pair restores the
    /// filter elsewhere through [`Bloom::loadchunk`], in order. `None` if
    /// the key does not exist. The chunks are bitsled's own format (the
    /// header, then the pages with set bits, at most 256 KiB a chunk; see
    /// DESIGN.md section 7), opaque to clients as RedisBloom's are.
    ///
    /// Each call is atomic, not the dump as a whole: a filter changed
    /// between calls dumps a mix.
    ///
    /// # Errors
    /// [`Error::WrongType`]; [`Error::Corrupted`] if the header or a page
    /// does not decode.
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// let db = bitsled::Db::open(dir.path())?;
    /// db.bloom(b"seen").add_many(&["a", "b"])?;
    /// let (mut iter, mut chunks) = (0, Vec::new());
    /// while let Some((next, chunk)) = db.bloom(b"seen").scandump(iter)? {
    ///     if next == 0 {
    ///         break;
    ///     }
    ///     chunks.push((next, chunk));
    ///     iter = next;
    /// }
    /// for (iter, chunk) in &chunks {
    ///     db.bloom(b"copy").loadchunk(*iter, chunk)?;
    /// }
    /// assert!(db.bloom(b"copy").contains(b"a")?);
    /// # Ok(()) }
    /// ```
    pub fn scandump(&self, iter: u64) -> Result<Option<(u64, Vec<u8>)>> {
        self.db.bf_scandump(&self.key, iter)
    }

    /// Restores one chunk of a [`Bloom::scandump`] (RedisBloom
    /// BF.LOADCHUNK): the first (iterator 1, the header) creates the filter,
    /// empty, with the original's parameters and item counts; each later
    /// one writes its pages. The filter takes the form (inline or paged)
    /// this store gives a filter of its size.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] with RedisBloom's texts: `not found` for
    /// pages when the key does not exist, `received bad data (...)` for a
    /// chunk that does not decode (a header when the key exists
    /// included), fails its checksum, or holds a page outside the filter
    /// (nothing is changed then); [`Error::WrongType`].
    pub fn loadchunk(&self, iter: u64, chunk: &[u8]) -> Result<()> {
        self.db.bf_loadchunk(&self.key, iter, chunk)
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::Kind;
    use crate::{BloomAdd, BloomOptions, Config, Db, Error, ExpireCondition};

    fn items(from: u32, to: u32) -> Vec<Vec<u8>> {
        (from..to).map(|i| format!("item:{i}").into_bytes()).collect()
    }

    fn inline(db: &Db, key: &[u8]) -> bool {
        db.key_stats(key).unwrap().unwrap().inline
    }

    /// Invariant: a default filter (capacity 100) is kept inline until the
    /// chain grows its second sub-filter, then moves to pages keeping
    /// every item (its first sub-filter's bits are copied, not rebuilt),
    /// its counts and its expiry; the answers hold across a reopen.
    #[test]
    fn a_small_filter_moves_to_pages_when_it_grows() {
        let dir = tempfile::tempdir().unwrap();
        let at = 4_000_000_000_000;
        let first = items(0, 100);
        let added = {
            let db = Config::new(dir.path()).cache_bytes(64 << 10).open().unwrap();
            let f = db.bloom(b"f");
            let mut added = f.add_many(&first).unwrap().iter().filter(|&&a| a == BloomAdd::Added).count() as u64;
            assert!(inline(&db, b"f"), "a default filter starts inline");
            assert!(db.expire_at(b"f", at, ExpireCondition::Always).unwrap());
            db.flush().unwrap();
            let info = f.info().unwrap().unwrap();
            assert_eq!((info.filters, info.items), (1, added));
            assert!(f.contains_many(&first).unwrap().iter().all(|&x| x), "no false negative while small");
            for item in items(100, 400) {
                added += u64::from(f.add(&item).unwrap() == BloomAdd::Added);
            }
            assert!(!inline(&db, b"f"), "a chain of several sub-filters is in pages");
            added
        };
        let db = Config::new(dir.path()).open().unwrap();
        let f = db.bloom(b"f");
        let info = f.info().unwrap().unwrap();
        assert!(info.filters >= 2, "{info:?}");
        assert_eq!(info.items, added);
        assert!(f.contains_many(&items(0, 400)).unwrap().iter().all(|&x| x), "no false negative after the move");
        assert_eq!(db.expiry(b"f").unwrap(), crate::Expiry::At(at));
        assert!(db.verify().unwrap().problems.is_empty());
    }

    /// Invariant: COPY of a small filter is a small filter answering the
    /// same, and a filter reserved too large for inline is in pages from
    /// the start.
    #[test]
    fn copies_stay_small_and_large_filters_are_paged() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path()).unwrap();
        db.bloom(b"f").add_many(&items(0, 50)).unwrap();
        assert!(db.copy(b"f", b"g", false).unwrap());
        assert!(inline(&db, b"g"));
        let probe = items(0, 1000);
        assert_eq!(db.bloom(b"g").contains_many(&probe).unwrap(), db.bloom(b"f").contains_many(&probe).unwrap());
        assert!(db.bloom(b"big").reserve(0.01, 10_000, BloomOptions::default()).unwrap());
        assert!(!inline(&db, b"big"));
        db.flush().unwrap();
        assert!(db.verify().unwrap().problems.is_empty());
    }

    /// Invariant: a filter kept inline stays within the inline limit as
    /// its item count grows past 127 (one more varint byte): here one
    /// whose small form at creation was exactly the 512-byte limit.
    #[test]
    fn an_inline_filter_takes_items_up_to_its_capacity() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path()).unwrap();
        let f = db.bloom(b"f");
        assert!(f.reserve(0.000_000_678, 128, BloomOptions::default().expansion(16_384)).unwrap());
        // One at a time: each add stores the filter (a batch would grow
        // the chain before it stores).
        for item in items(0, 300) {
            assert_ne!(f.add(&item).unwrap(), BloomAdd::Full);
        }
        assert!(f.contains_many(&items(0, 300)).unwrap().iter().all(|&x| x));
    }

    /// Invariant: the one-item fast paths of BF.ADD and BF.EXISTS on small
    /// filters answer and store exactly what the general path does: the
    /// same random sequence of single adds, batches and probes (filters of
    /// capacity 20, so they fill, grow into pages and refuse when
    /// non-scaling) gives the same answers and the same stored filters
    /// (metadata entry with the small form's bytes, BF.INFO, membership of
    /// every item) with and without them.
    #[test]
    fn one_item_fast_paths_match_the_general_path() {
        use rand::{Rng, SeedableRng};
        let run = |general_only: bool| {
            super::GENERAL_ONLY.with(|g| g.set(general_only));
            let dir = tempfile::tempdir().unwrap();
            let db = Db::open(dir.path()).unwrap();
            let mut r = rand::rngs::StdRng::seed_from_u64(7);
            let mut answers = Vec::new();
            let keys = [&b"a"[..], b"b", b"c"];
            db.bloom(b"c").reserve(0.05, 20, BloomOptions::default().nonscaling()).unwrap();
            db.bloom(b"b").reserve(0.01, 20, BloomOptions::default()).unwrap();
            // An expiry the rewrites must keep.
            assert!(db.expire_at(b"b", 4_000_000_000_000, ExpireCondition::Always).unwrap());
            for _ in 0..600 {
                let key = keys[r.gen_range(0..keys.len())];
                let item = format!("i{}", r.gen_range(0..80));
                let f = db.bloom(key);
                match r.gen_range(0..4) {
                    0 | 1 => answers.push(format!("{:?}", f.add(&item))),
                    2 => answers.push(format!("{:?}", f.contains(&item))),
                    _ => answers.push(format!("{:?}", f.add_many(&[item.clone(), format!("{item}x")]))),
                }
            }
            let probe: Vec<String> = (0..80).flat_map(|i| [format!("i{i}"), format!("i{i}x")]).collect();
            let dumps: Vec<_> = keys
                .iter()
                .map(|&k| {
                    let meta = db.engine.read(db.index, &[k], |tx| tx.meta(k)).unwrap();
                    let f = db.bloom(k);
                    // One at a time (the fast path while the filter is
                    // small) and as one batch (the general path).
                    let one_by_one: Vec<bool> = probe.iter().map(|p| f.contains(p).unwrap()).collect();
                    (meta, format!("{:?}", f.info().unwrap()), one_by_one, f.contains_many(&probe).unwrap())
                })
                .collect();
            super::GENERAL_ONLY.with(|g| g.set(false));
            assert!(db.verify().unwrap().problems.is_empty());
            (answers, dumps)
        };
        let (fast, general) = (run(false), run(true));
        assert_eq!(fast.0, general.0, "answers");
        assert_eq!(fast.1, general.1, "stored values");
        assert!(fast.1.iter().all(|d| d.2 == d.3), "single probes answer as batches");
        assert!(fast.1.iter().any(|d| d.2.contains(&false)), "some probed items are absent");
        assert!(fast.0.iter().any(|a| a.contains("Full")), "the sequence fills the non-scaling filter");
    }

    /// Invariant: a small filter whose bytes do not decode (a bug, or a
    /// bucket rewritten with a valid checksum) is an error naming the key,
    /// never a panic or a wrong answer, and `verify` reports it.
    #[test]
    fn a_damaged_small_filter_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path()).unwrap();
        db.engine.write(db.index, &[b"f"], |tx| tx.set_inline(b"f", Kind::Bloom, &[1, 0, 9, 9], 0)).unwrap();
        for r in [db.bloom(b"f").add(b"x").map(|_| ()), db.bloom(b"f").contains(b"x").map(|_| ())] {
            assert!(matches!(&r, Err(Error::Corrupted { key, .. }) if key == "f"), "{r:?}");
        }
        db.flush().unwrap();
        let report = db.verify().unwrap();
        assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
        assert!(report.problems[0].reason.contains("small Bloom filter"), "{:?}", report.problems);
    }
}
