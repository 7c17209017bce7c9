//! Metadata buckets: the keys of a keyspace are grouped by the top bits of
//! their hash, and each group (a bucket) is one store record, so a small
//! key costs a share of a record rather than records of its own. A bucket
//! covers the hashes whose top `depth` bits equal those of its first hash;
//! it splits in two (one more bit) when it grows past [`SPLIT_BYTES`].
//! Every keyspace's buckets partition the hash space of each region they
//! occupy; a bucket never covers less than [`MIN_DEPTH`] bits, so it lies
//! within one lock shard (the shard is the top [`MIN_DEPTH`] bits).
//!
//! The record (key `0x06 | keyspace | first hash`, see `layout.rs`):
//!
//! ```text
//!  0     1       2         6
//!  | ver | depth | entries | entry ... | crc32 |
//! ```
//!
//! - 1 byte: version, 2.
//! - 1 byte: depth, `8 ..= 32`.
//! - 4 bytes: number of entries, u32 LE.
//! - the entries, in strictly increasing name order, each:
//!   - varint: bytes of the name shared with the previous entry's name;
//!   - varint: length of the rest of the name, then those bytes;
//!   - 1 byte: tag: bits 0-1 type (1 string, 2 Bloom filter), bit 2
//!     inline, bit 3 has an expiry; other bits zero;
//!   - varint: logical length in bytes;
//!   - if it has an expiry: 8 bytes, Unix milliseconds, LE;
//!   - inline: the value's bytes (as many as the length, at most 64); its
//!     set bits are counted, not stored;
//!   - paged: varint bitmap id, varint number of set bits.
//! - 4 bytes: CRC-32 of everything before.
//!
//! Varints are unsigned LEB128 (7 bits a byte, least significant first).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::entry::{
    entry_end, entry_expiry_end, inline_span, put_entry, read_entry, sealed_body, shared_len, Reader, TAG_EXPIRY,
    TAG_INLINE, TAG_PAGE,
};
#[cfg(test)]
use super::layout::key_hash;
use super::layout::KeyHash;
use super::record::{bad_meta, Body, Kind, Meta};
use crate::error::{Error, Result};
use crate::le::read_u32;
use crate::varint;

/// The least number of hash bits a bucket covers: buckets then lie within
/// one of `2^MIN_DEPTH` lock shards.
pub(crate) const MIN_DEPTH: u8 = super::layout::SHARD_BITS;
/// The most: past it, keys with equal hashes share one bucket however large.
pub(crate) const MAX_DEPTH: u8 = 32;
/// A bucket whose record would exceed this many bytes splits in two.
pub(crate) const SPLIT_BYTES: usize = 4096;

const VERSION: u8 = 2;
const HEADER: usize = 6;

/// An upper bound of the bytes an entry of a `name_len`-byte name with
/// `meta` takes in a record (prefix compression only saves).
pub(crate) fn record_bytes(name_len: usize, meta: &Meta) -> usize {
    entry_bound(name_len, meta.inline_len())
}

/// The bytes an entry of a `name_len`-byte name with `meta` takes in a
/// record whose entries share no name prefix: the name's length and the
/// name, then the entry as [`put_entry`] writes it.
pub(crate) fn entry_bytes(name_len: usize, meta: &Meta) -> usize {
    let mut b = Vec::with_capacity(entry_most(meta));
    varint::put(&mut b, name_len as u64);
    put_entry(&mut b, meta);
    b.len() + name_len
}

/// [`record_bytes`] of a `name_len`-byte name whose inline value has
/// `inline_len` bytes (0 for a paged value).
fn entry_bound(name_len: usize, inline_len: usize) -> usize {
    name_len + inline_len + 32
}

/// The most bytes [`put_entry`] writes for `meta`: a tag, a length
/// varint, an expiry, and an inline value or two varints.
fn entry_most(meta: &Meta) -> usize {
    1 + 10 + 8 + meta.inline_len().max(20)
}

/// [`record_bytes`] of an entry in record form: a `name_len`-byte name,
/// then `entry` (tag onwards, as [`put_entry`] wrote it).
fn raw_record_bytes(name_len: usize, entry: &[u8]) -> usize {
    let inline = match entry.first() {
        Some(&tag) if tag & TAG_INLINE != 0 => {
            let mut at = 1;
            varint::read(entry, &mut at).ok().and_then(|n| usize::try_from(n).ok()).unwrap_or(0)
        }
        // As `Meta::inline_len` counts it: the member form's bytes and 11.
        Some(&tag) if tag & TAG_PAGE != 0 => {
            // The length, the expiry, the page number, then the member's bytes.
            let member = || {
                let mut at = 1;
                varint::read(entry, &mut at).ok()?;
                if tag & TAG_EXPIRY != 0 {
                    at += 8;
                }
                varint::read(entry, &mut at).ok()?;
                varint::read(entry, &mut at).ok()
            };
            member().and_then(|n| usize::try_from(n).ok()).unwrap_or(0).min(crate::page::LONE_MAX) + 11
        }
        _ => 0,
    };
    entry_bound(name_len, inline.min(super::record::INLINE_BYTES))
}

/// A decoded bucket: its depth and its entries.
///
/// In memory each entry is kept in the arena in its record form (varint
/// name length, name, then the entry as [`put_entry`] writes it), in no
/// order, without the name prefix all entries share, which the bucket keeps
/// once. Beside the arena, each entry has one 64-bit *head* (see
/// [`Head`]): its hash tag, changed mark, last use, arena offset and
/// in-place mark, all in one vector, so a lookup or a new entry touches one
/// allocation besides the arena. The heads are kept in tag order: a lookup
/// binary-searches the tags and reads an entry only where the tag matches;
/// a new entry's bytes are appended to the arena and its head inserted
/// where its tag belongs; a copy
/// (copy-on-write after a write-back captured the bucket) copies two
/// buffers. A key costs its record bytes plus 8 bytes, about a third of a
/// decoded entry. Encoding sorts the entries by name.
#[derive(Debug, Default)]
pub(crate) struct Bucket {
    pub(crate) depth: u8,
    /// The entries' heads. Atomic, so that a read marks a use through a
    /// bucket shared copy-on-write with a write-back, without copying it;
    /// every use happens under the bucket's shard lock, and every other
    /// field of a head changes only through `&mut`.
    heads: Vec<AtomicU64>,
    /// The base of the heads' last-use times, Unix seconds (see [`Head`]).
    uses_base: AtomicU32,
    /// The bytes every entry's name starts with (keys named
    /// `kind:<id>:...` share several): kept once here, and the arena holds
    /// the rest of each name.
    prefix: Vec<u8>,
    arena: Vec<u8>,
    /// Arena bytes no entry uses any more (compacted past half).
    garbage: usize,
    /// Upper bound of the record's size (see [`record_bytes`]).
    pub(crate) bytes: usize,
    /// Names removed since the last write-back stored the changes: each
    /// becomes a deletion in the next delta record.
    removed: Vec<Box<[u8]>>,
}

/// The head of one entry of a bucket, 64 bits:
///
/// - bits 0-14: the low 15 bits of the key hash (the tag a lookup scans);
/// - bit 15: changed since the last write-back stored the bucket's changes
///   in a delta record (see [`Bucket::for_each_change`]);
/// - bits 16-31: when the entry was last used, in seconds from the
///   bucket's base (`uses_base`): an entry never used since the bucket was
///   loaded reads as used at the base. When a use falls more than 2^16
///   seconds after the base, the base moves to 2^15 seconds before it and
///   older times are clamped to it (an idle time past about nine hours
///   reads as at least that);
/// - bits 32-62: the entry's arena offset (an arena stays far below
///   2 GiB: a name is at most what the caller can hold in memory, and
///   buckets split at a few KiB);
/// - bit 63: the value was last changed in place
///   ([`Meta::changed_in_place`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Head(u64);

const TAG_MASK: u64 = 0x7FFF;
const CHANGED: u64 = 1 << 15;
const USE_SHIFT: u32 = 16;
const OFFSET_SHIFT: u32 = 32;
const OFFSET_MASK: u64 = 0x7FFF_FFFF;
const IN_PLACE: u64 = 1 << 63;

impl Head {
    fn new(h: u32, at: usize, in_place: bool, changed: bool, used: u16) -> Head {
        Head(0).with_tag(tag_of(h)).with_offset(at, in_place).with_changed(changed).with_use(used)
    }
    fn tag(self) -> u16 {
        (self.0 & TAG_MASK) as u16
    }
    fn with_tag(self, tag: u16) -> Head {
        Head(self.0 & !TAG_MASK | u64::from(tag) & TAG_MASK)
    }
    fn changed(self) -> bool {
        self.0 & CHANGED != 0
    }
    fn with_changed(self, on: bool) -> Head {
        Head(if on { self.0 | CHANGED } else { self.0 & !CHANGED })
    }
    fn used(self) -> u16 {
        ((self.0 >> USE_SHIFT) & 0xFFFF) as u16
    }
    fn with_use(self, d: u16) -> Head {
        Head(self.0 & !(0xFFFF << USE_SHIFT) | u64::from(d) << USE_SHIFT)
    }
    fn offset(self) -> usize {
        ((self.0 >> OFFSET_SHIFT) & OFFSET_MASK) as usize
    }
    fn in_place(self) -> bool {
        self.0 & IN_PLACE != 0
    }
    /// The head with arena offset `at` (clamped: see the type's docs) and
    /// in-place mark `in_place`.
    fn with_offset(self, at: usize, in_place: bool) -> Head {
        let at = u64::try_from(at).unwrap_or(OFFSET_MASK).min(OFFSET_MASK);
        let rest = self.0 & !(OFFSET_MASK << OFFSET_SHIFT) & !IN_PLACE;
        Head(rest | at << OFFSET_SHIFT | if in_place { IN_PLACE } else { 0 })
    }
}

/// Where tag `tag` falls among `n` heads if tags spread evenly: where a
/// search of the tag-ordered heads starts.
fn even_spread(tag: u16, n: usize) -> usize {
    (usize::from(tag) * n) >> TAG_MASK.count_ones()
}

/// The addresses a lookup in a bucket reads first (its heads where the
/// hash's tag falls, its name prefix), kept beside the bucket in the cache
/// so that a prefetch hint reads nothing of the bucket. Addresses only:
/// never dereferenced, and stale ones (the bucket changed since) cost a
/// wasted hint, nothing else.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LookupLines {
    heads: usize,
    len: u32,
    pub(crate) depth: u8,
    prefix: usize,
}

impl LookupLines {
    /// Asks for the cache lines a lookup of hash `h` reads first.
    pub(crate) fn prefetch(self, h: u32) {
        let at = even_spread(tag_of(h), self.len as usize);
        super::prefetch::line(self.heads.wrapping_add(at * 8));
        super::prefetch::line(self.prefix);
    }
}

/// The low bits of a key hash a bucket keeps per entry.
fn tag_of(h: u32) -> u16 {
    (u64::from(h) & TAG_MASK) as u16
}

impl Clone for Bucket {
    fn clone(&self) -> Bucket {
        let mut heads = Vec::with_capacity(self.heads.capacity());
        heads.extend(self.heads.iter().map(|a| AtomicU64::new(a.load(Ordering::Relaxed))));
        Bucket {
            depth: self.depth,
            heads,
            uses_base: AtomicU32::new(self.uses_base.load(Ordering::Relaxed)),
            prefix: self.prefix.clone(),
            arena: self.arena.clone(),
            garbage: self.garbage,
            bytes: self.bytes,
            removed: self.removed.clone(),
        }
    }
}

impl PartialEq for Bucket {
    fn eq(&self, other: &Bucket) -> bool {
        self.depth == other.depth && self.sorted() == other.sorted()
    }
}

impl Eq for Bucket {}

/// The error for an arena entry that does not parse: never happens, since
/// the bucket wrote it; reported rather than trusted.
fn arena_damage(reason: String) -> Error {
    Error::Corrupted { key: "<bucket in memory>".into(), page: None, reason }
}

/// The first hash of the bucket of depth `depth` holding hash `h`.
pub(crate) fn bucket_start(h: u32, depth: u8) -> u32 {
    match depth {
        0 => 0,
        d if d >= 32 => h,
        d => h & (u32::MAX << (32 - u32::from(d))),
    }
}

/// Whether the bucket starting at `start` with `depth` holds hash `h`.
pub(crate) fn covers(start: u32, depth: u8, h: u32) -> bool {
    bucket_start(h, depth) == start
}

impl Bucket {
    /// An empty bucket of `depth`.
    pub(crate) fn new(depth: u8) -> Bucket {
        Bucket { depth, bytes: HEADER + 4, ..Bucket::default() }
    }

    /// Number of entries.
    pub(crate) fn len(&self) -> usize {
        self.heads.len()
    }

    /// Bytes the bucket holds in memory (for the cache's budget).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.arena.capacity()
            + self.prefix.capacity()
            + self.heads.capacity() * 8
            + self.removed.iter().map(|n| n.len() + 16).sum::<usize>()
    }

    /// The head of entry `i`.
    fn head(&self, i: usize) -> Head {
        Head(self.heads[i].load(Ordering::Relaxed))
    }

    /// Changes the head of entry `i` with `f`.
    fn change_head(&mut self, i: usize, f: impl FnOnce(Head) -> Head) {
        let h = self.heads[i].get_mut();
        *h = f(Head(*h)).0;
    }

    /// The arena offset of entry `i`.
    fn arena_at(&self, i: usize) -> usize {
        self.head(i).offset()
    }

    /// The name of entry `i` past the bucket's prefix, and the offset of
    /// the rest of its entry.
    fn name_at(&self, i: usize) -> (&[u8], usize) {
        let mut at = self.arena_at(i);
        let len = varint::read(&self.arena, &mut at).ok().and_then(|n| usize::try_from(n).ok()).unwrap_or(0);
        let end = at.saturating_add(len).min(self.arena.len());
        (&self.arena[at.min(end)..end], end)
    }

    /// The whole name of entry `i` (an index [`Bucket::metas`] gave).
    pub(crate) fn name(&self, i: usize) -> Vec<u8> {
        let rest = self.name_at(i).0;
        let mut name = Vec::with_capacity(self.prefix.len() + rest.len());
        name.extend_from_slice(&self.prefix);
        name.extend_from_slice(rest);
        name
    }

    /// The metadata of the entry whose bytes after the name start at
    /// `rest`, and the arena offset just past the entry.
    fn meta_at(&self, rest: usize) -> (Meta, usize) {
        let mut r = Reader { b: &self.arena, at: rest };
        let meta = r
            .take(1, &arena_damage)
            .and_then(|tag| read_entry(&mut r, b"<bucket in memory>", tag[0], &arena_damage))
            .unwrap_or_else(|_| Meta::empty(Kind::String));
        (meta, r.at)
    }

    /// The name of entry `i` past the prefix and its bytes in record form
    /// (tag onwards, as [`put_entry`] wrote them), without decoding them.
    fn raw_entry(&self, i: usize) -> (&[u8], &[u8]) {
        let (name, rest) = self.name_at(i);
        let end = entry_end(&self.arena, rest).min(self.arena.len());
        (name, &self.arena[rest.min(end)..end])
    }

    /// The metadata of entry `i`, and the arena offset just past it.
    fn entry(&self, i: usize) -> (Meta, usize) {
        let (_, rest) = self.name_at(i);
        let (mut meta, end) = self.meta_at(rest);
        meta.changed_in_place = self.head(i).in_place();
        (meta, end)
    }

    /// Every entry's index and metadata, in no particular order; its name
    /// is [`Bucket::name`] of the index.
    pub(crate) fn metas(&self) -> impl Iterator<Item = (usize, Meta)> + '_ {
        (0..self.len()).map(|i| (i, self.entry(i).0))
    }

    /// Every entry: name and metadata, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Vec<u8>, Meta)> + '_ {
        (0..self.len()).map(|i| (self.name(i), self.entry(i).0))
    }

    /// The entries sorted by name.
    pub(crate) fn sorted(&self) -> Vec<(Vec<u8>, Meta)> {
        let mut all: Vec<(Vec<u8>, Meta)> = self.iter().collect();
        all.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// The bitmap ids of the paged values.
    pub(crate) fn ids(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.len()).filter_map(|i| match self.entry(i).0.body {
            Body::Paged(id) => Some(id),
            Body::Inline | Body::Page { .. } => None,
        })
    }

    /// The index of `name` (whose hash is `h`), if it has an entry: a
    /// binary search of the heads (kept in tag order) finds the first with
    /// its tag, and names are compared only where the tag matches. Every
    /// name here starts with the prefix; the rest is compared.
    fn position(&self, name: &[u8], h: u32) -> Option<usize> {
        let name = name.strip_prefix(self.prefix.as_slice())?;
        let tag = tag_of(h);
        let first = self.first_at_least(tag);
        (first..self.len()).take_while(|&i| self.head(i).tag() == tag).find(|&i| self.name_at(i).0 == name)
    }

    /// The index of the first head whose tag is at least `tag` (the heads'
    /// count if none is).
    ///
    /// Tags are hash bits, spread evenly over `0 ..= TAG_MASK`, so the
    /// search starts where `tag` would fall in an even spread and gallops
    /// out from there before a binary search of the bracket: a lookup
    /// touches one or two cache lines of heads where a plain binary search
    /// of a full bucket touches about eight. Uneven tags (names chosen to
    /// collide) cost a logarithmic gallop, never a scan.
    fn first_at_least(&self, tag: u16) -> usize {
        let n = self.heads.len();
        crate::search::partition_from(n, even_spread(tag, n), |i| self.head(i).tag() < tag)
    }

    /// Where a lookup in this bucket reads first, for
    /// [`LookupLines::prefetch`]: taken while the bucket is at hand, so a
    /// later hint needs no read of the bucket itself.
    pub(crate) fn lookup_lines(&self) -> LookupLines {
        LookupLines {
            heads: self.heads.as_ptr() as usize,
            len: u32::try_from(self.heads.len()).unwrap_or(u32::MAX),
            depth: self.depth,
            prefix: self.prefix.as_ptr() as usize,
        }
    }

    /// The index and metadata of the entry of `name` (whose hash is `h`),
    /// marking it used at `now` (Unix seconds; 0: not a use). The index is
    /// for [`Bucket::upsert_known`] while the bucket does not change.
    pub(crate) fn find(&self, name: &[u8], h: u32, now: u32) -> Option<(usize, Meta)> {
        let i = self.position(name, h)?;
        self.touch(i, now);
        Some((i, self.entry(i).0))
    }

    /// Where the entry of `name` is, given what a [`Bucket::find`] since
    /// the last change of the bucket found (`None`: nothing known): an
    /// index found is used if it still holds `name`, an absence is trusted.
    fn position_known(&self, name: &[u8], h: u32, known: Option<Option<usize>>) -> Option<usize> {
        match known {
            Some(Some(i))
                if i < self.len()
                    && self.head(i).tag() == tag_of(h)
                    && name.strip_prefix(self.prefix.as_slice()) == Some(self.name_at(i).0) =>
            {
                Some(i)
            }
            Some(None) => None,
            _ => self.position(name, h),
        }
    }

    /// Whether `name` (whose hash is `h`) has an entry.
    pub(crate) fn contains(&self, name: &[u8], h: u32) -> bool {
        self.position(name, h).is_some()
    }

    /// The metadata of `name` (whose hash is `h`), if it has an entry.
    #[cfg(test)]
    pub(crate) fn get(&self, name: &[u8], h: u32) -> Option<Meta> {
        self.find(name, h, 0).map(|(_, m)| m)
    }

    /// Seconds from the last use of `name` (whose hash is `h`) to `now`, if
    /// it has an entry: from the bucket's load if it was not used since.
    pub(crate) fn idle(&self, name: &[u8], h: u32, now: u32) -> Option<u32> {
        let i = self.position(name, h)?;
        Some(now.saturating_sub(self.uses_base.load(Ordering::Relaxed) + u32::from(self.head(i).used())))
    }

    /// Sets when the bucket was loaded: every entry counts as used then.
    pub(crate) fn set_loaded(&mut self, now: u32) {
        self.uses_base.store(now, Ordering::Relaxed);
        for a in &self.heads {
            a.store(Head(a.load(Ordering::Relaxed)).with_use(0).0, Ordering::Relaxed);
        }
    }

    /// The offset of `now` (Unix seconds) from the base of the last uses,
    /// moving the base if it is too far (see [`Head`]).
    fn use_of(&self, now: u32) -> u16 {
        let base = self.uses_base.load(Ordering::Relaxed);
        if let Ok(d) = u16::try_from(now.saturating_sub(base)) {
            return d;
        }
        let new_base = now - (1 << 15);
        for a in &self.heads {
            let h = Head(a.load(Ordering::Relaxed));
            let t = base + u32::from(h.used());
            a.store(h.with_use(u16::try_from(t.saturating_sub(new_base)).unwrap_or(0)).0, Ordering::Relaxed);
        }
        self.uses_base.store(new_base, Ordering::Relaxed);
        1 << 15
    }

    /// Entry `i` used at `now` (Unix seconds; 0: not counted).
    fn touch(&self, i: usize, now: u32) {
        if now != 0 {
            let d = self.use_of(now);
            if let Some(a) = self.heads.get(i) {
                a.store(Head(a.load(Ordering::Relaxed)).with_use(d).0, Ordering::Relaxed);
            }
        }
    }

    fn is_changed(&self, i: usize) -> bool {
        self.head(i).changed()
    }

    /// Makes room for `more` arena bytes, growing by a quarter, not double:
    /// buckets are many and small.
    fn reserve_arena(&mut self, more: usize) {
        if self.arena.capacity() - self.arena.len() < more {
            self.arena.reserve_exact(more.max(self.arena.len() / 4).max(64));
        }
    }

    /// Appends the entry of a name whose bytes past the prefix are `name`,
    /// with `meta`, to the arena; returns its offset.
    fn append(&mut self, name: &[u8], meta: &Meta) -> usize {
        let at = self.arena.len();
        self.reserve_arena(10 + name.len() + entry_most(meta));
        varint::put(&mut self.arena, name.len() as u64);
        self.arena.extend_from_slice(name);
        put_entry(&mut self.arena, meta);
        at
    }

    /// Sets the metadata of `name` (whose hash is `h`), adding an entry if
    /// it has none, and marks it changed; returns the expiry (0: none) of
    /// the entry it replaced, if there was one (the old entry is not
    /// decoded: its expiry is all a write needs of it).
    pub(crate) fn upsert(&mut self, name: &[u8], h: u32, meta: &Meta) -> Option<u64> {
        self.upsert_at(name, h, meta, 0)
    }

    /// [`Bucket::upsert`], the entry used at `now` (Unix seconds; 0: not
    /// counted as a use).
    pub(crate) fn upsert_at(&mut self, name: &[u8], h: u32, meta: &Meta, now: u32) -> Option<u64> {
        self.upsert_known(name, h, meta, now, None).map(|(expiry, _)| expiry)
    }

    /// [`Bucket::upsert_at`], with what a [`Bucket::find`] of `name` since
    /// the bucket's last change found (`None`: nothing known); of the
    /// entry replaced, returns its expiry and whether it was already
    /// marked changed.
    pub(crate) fn upsert_known(
        &mut self,
        name: &[u8],
        h: u32,
        meta: &Meta,
        now: u32,
        known: Option<Option<usize>>,
    ) -> Option<(u64, bool)> {
        // The entry is a whole state: a removal of the same name waiting
        // for a delta record is void (the record would apply it before the
        // entry; dropping it saves its bytes and keeps a removal list from
        // ever naming a live key).
        if !self.removed.is_empty() {
            self.removed.retain(|n| **n != *name);
        }
        let at = self.position_known(name, h, known);
        self.upsert_with(name, h, at, meta, true, now)
    }

    /// `f` of the value of `name`'s entry (whose hash is `h`) where it lies
    /// in the arena, if the entry holds a value of kind `kind` inline that
    /// has not expired at `now_ms` (Unix milliseconds); the entry is then
    /// used at `now` (Unix seconds; 0: not counted). Returns the entry's
    /// index (as [`Bucket::find`]) and what `f` returned; `None` (nothing
    /// run) for a missing name, another kind or form, or an expired entry.
    pub(crate) fn peek_inline<R>(
        &self,
        (name, h): (&[u8], u32),
        kind: Kind,
        (now, now_ms): (u32, u64),
        f: impl FnOnce(&[u8]) -> R,
    ) -> Option<(usize, R)> {
        let i = self.position(name, h)?;
        let (span, expiry) = inline_span(&self.arena, self.name_at(i).1, kind)?;
        if expiry != 0 && expiry <= now_ms {
            return None;
        }
        let r = f(self.arena.get(span)?);
        self.touch(i, now);
        Some((i, r))
    }

    /// Changes the value of `name`'s entry (whose hash is `h`) where it
    /// lies in the arena, if the entry holds a value of kind `kind` inline
    /// and `f` changes it keeping its length (it returns whether it did);
    /// the entry is then marked changed (its in-place mark cleared, as a
    /// rewrite's) and used at `now` (0: not counted).
    /// `known` as [`Bucket::upsert_known`] takes it. Returns whether the
    /// entry was already marked changed, or `None` if nothing changed.
    ///
    /// The record form of the entry is the same as
    /// [`Bucket::upsert_known`] of the changed value would write, without
    /// the value being copied out and back.
    pub(crate) fn patch_inline(
        &mut self,
        (name, h): (&[u8], u32),
        kind: Kind,
        now: u32,
        known: Option<Option<usize>>,
        f: impl FnOnce(&mut [u8]) -> bool,
    ) -> Option<bool> {
        let i = self.position_known(name, h, known)?;
        let (span, _) = inline_span(&self.arena, self.name_at(i).1, kind)?;
        if !f(self.arena.get_mut(span)?) {
            return None;
        }
        let was_changed = self.head(i).changed();
        self.change_head(i, |hd| hd.with_offset(hd.offset(), false).with_changed(true));
        self.touch(i, now);
        Some(was_changed)
    }

    /// [`Bucket::upsert`], the entry's changed mark set to `changed` (a
    /// rebuild of the bucket keeps each entry's mark).
    fn upsert_with(
        &mut self,
        name: &[u8],
        h: u32,
        at: Option<usize>,
        meta: &Meta,
        changed: bool,
        now: u32,
    ) -> Option<(u64, bool)> {
        let old = if let Some(i) = at {
            let (_, rest) = self.name_at(i);
            let (old_expiry, end) = entry_expiry_end(&self.arena, rest);
            let end = end.min(self.arena.len());
            let start = self.arena_at(i);
            self.bytes -= raw_record_bytes(name.len(), &self.arena[rest.min(end)..end]);
            // The new entry is written past the arena's end, then moved
            // where it belongs.
            self.reserve_arena(entry_most(meta));
            let tail = self.arena.len();
            put_entry(&mut self.arena, meta);
            let len = self.arena.len() - tail;
            let at = if len == end - rest {
                // Same size (a bit flipped in an inline value, a new
                // count of the same width): in place.
                self.arena.copy_within(tail.., rest);
                self.arena.truncate(tail);
                start
            } else if end == tail {
                // The arena's last entry (a key written again right after
                // it was added): it ends where it now ends.
                self.arena.copy_within(tail.., rest);
                self.arena.truncate(rest + len);
                start
            } else {
                self.arena.truncate(tail);
                self.garbage += end - start;
                self.append(&name[self.prefix.len()..], meta)
            };
            let in_place = meta.changed_in_place;
            let was_changed = self.head(i).changed();
            self.change_head(i, |hd| hd.with_offset(at, in_place).with_changed(changed || hd.changed()));
            self.touch(i, now);
            Some((old_expiry, was_changed))
        } else {
            self.fit_prefix(name);
            self.push_new(name, h, meta, changed, now);
            None
        };
        self.bytes += record_bytes(name.len(), meta);
        self.compact_if_wasteful();
        old
    }

    /// Adds the entry of `name` (whose hash is `h`, and which starts with
    /// the prefix) with `meta`, its changed mark `changed`, used at `now`
    /// (0: at the base).
    fn push_new(&mut self, name: &[u8], h: u32, meta: &Meta, changed: bool, now: u32) {
        let at = self.append(name.get(self.prefix.len()..).unwrap_or_default(), meta);
        if self.heads.len() == self.heads.capacity() {
            self.heads.reserve_exact((self.heads.len() / 4).max(4));
        }
        let used = if now == 0 { 0 } else { self.use_of(now) };
        // After the heads of the same tag: where the tag order puts it.
        let i = self.first_at_least(tag_of(h).saturating_add(1));
        self.heads.insert(i, AtomicU64::new(Head::new(h, at, meta.changed_in_place, changed, used).0));
    }

    /// Compacts the arena once more than half of it is garbage.
    fn compact_if_wasteful(&mut self) {
        if self.garbage > 256 && self.garbage * 2 > self.arena.len() {
            self.compact();
        }
    }

    /// Sets the metadata of `name`, adding an entry if it has none.
    pub(crate) fn put(&mut self, hash: KeyHash, name: &[u8], meta: &Meta) {
        self.upsert(name, hash.of(name), meta);
    }

    /// Removes the entry of `name` (whose hash is `h`); returns its
    /// metadata.
    pub(crate) fn remove(&mut self, name: &[u8], h: u32) -> Option<Meta> {
        let i = self.position(name, h)?;
        let (meta, end) = self.entry(i);
        let start = self.arena_at(i);
        if end == self.arena.len() {
            self.arena.truncate(start);
        } else {
            self.garbage += end - start;
        }
        // The heads after it move down one: the tag order stays.
        self.heads.remove(i);
        self.bytes -= record_bytes(name.len(), &meta);
        self.removed.push(name.into());
        self.compact_if_wasteful();
        Some(meta)
    }

    /// Whether an entry changed or was removed since the last
    /// [`Bucket::clear_changes`].
    pub(crate) fn has_changes(&self) -> bool {
        !self.removed.is_empty() || (0..self.len()).any(|i| self.is_changed(i))
    }

    /// Visits every removal (`f(name, None)`) and then every changed entry
    /// (`f(name, Some(entry))`, the entry in record form as [`put_entry`]
    /// writes it, not decoded) since the last [`Bucket::clear_changes`]:
    /// what a delta record holds. A delta record applies the removals
    /// first, so a name removed and added again ends with its entry.
    pub(crate) fn for_each_change(&self, mut f: impl FnMut(&[u8], Option<&[u8]>)) {
        for name in &self.removed {
            f(name, None);
        }
        let mut name = self.prefix.clone();
        for i in 0..self.len() {
            if self.is_changed(i) {
                let (rest, entry) = self.raw_entry(i);
                name.truncate(self.prefix.len());
                name.extend_from_slice(rest);
                f(&name, Some(entry));
            }
        }
    }

    /// Forgets the changes (their delta record is written).
    pub(crate) fn clear_changes(&mut self) {
        self.removed = Vec::new();
        for a in &mut self.heads {
            *a.get_mut() &= !CHANGED;
        }
    }

    /// Rebuilds `self`'s entries into `parts` (empty buckets whose
    /// prefixes are prefixes of `self`'s): each entry and each removal
    /// goes to the part `pick` chooses by its whole name, keeping its
    /// changed mark, in-place mark and last use. Entries are copied in
    /// record form, not decoded, and each name is picked once.
    fn rebuild_into(&self, parts: &mut [Bucket], pick: impl Fn(&[u8]) -> usize) {
        let mut name = self.prefix.clone();
        // (part, entry, offset of the rest of its name, of its entry, end)
        let spans: Vec<(usize, usize, usize, usize, usize)> = (0..self.len())
            .map(|i| {
                let (rest, after) = self.name_at(i);
                name.truncate(self.prefix.len());
                name.extend_from_slice(rest);
                let part = pick(&name).min(parts.len() - 1);
                (part, i, after - rest.len(), after, entry_end(&self.arena, after).min(self.arena.len()))
            })
            .collect();
        for (p, b) in parts.iter_mut().enumerate() {
            let moved = self.prefix.len().saturating_sub(b.prefix.len());
            let mine = spans.iter().filter(|s| s.0 == p);
            b.heads.reserve_exact(mine.clone().count());
            b.arena.reserve_exact(mine.map(|&(_, i, _, _, end)| end - self.arena_at(i) + moved + 1).sum());
            b.uses_base.store(self.uses_base.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        for &(part, i, rest, after, end) in &spans {
            let b = &mut parts[part];
            let head = self.head(i);
            b.heads.push(AtomicU64::new(head.with_offset(b.arena.len(), head.in_place()).0));
            // The bytes of `self`'s prefix the part does not share move into
            // the name's rest.
            let moved = self.prefix.get(b.prefix.len()..).unwrap_or_default();
            varint::put(&mut b.arena, (moved.len() + after - rest) as u64);
            b.arena.extend_from_slice(moved);
            b.arena.extend_from_slice(&self.arena[rest..end]);
            b.bytes += raw_record_bytes(self.prefix.len() + after - rest, &self.arena[after..end]);
        }
        for n in &self.removed {
            parts[pick(n).min(parts.len() - 1)].removed.push(n.clone());
        }
    }

    /// Shortens the prefix, if need be, to what it shares with `name` (a
    /// name about to be added): the first entry of an empty bucket makes its
    /// whole name the prefix.
    fn fit_prefix(&mut self, name: &[u8]) {
        if self.len() == 0 {
            self.arena.clear();
            self.garbage = 0;
            self.prefix.clear();
            self.prefix.extend_from_slice(name);
            return;
        }
        let shared = shared_len(&self.prefix, name);
        if shared < self.prefix.len() {
            self.rewrite(self.prefix[..shared].to_vec());
        }
    }

    /// Rewrites the arena without its garbage, the names' shared prefix
    /// being `prefix` (a prefix of the present one).
    fn rewrite(&mut self, prefix: Vec<u8>) {
        let mut part = [Bucket { prefix, ..Bucket::new(self.depth) }];
        self.rebuild_into(&mut part, |_| 0);
        let [b] = part;
        *self = b;
    }

    /// Rewrites the arena without its garbage.
    fn compact(&mut self) {
        self.rewrite(self.prefix.clone());
    }

    /// Whether the bucket should split.
    pub(crate) fn wants_split(&self) -> bool {
        self.bytes > SPLIT_BYTES && self.depth < MAX_DEPTH
    }

    /// Splits the bucket starting at `start` into its two halves (one more
    /// hash bit): the lower half keeps `start`; the upper one starts at the
    /// returned hash.
    pub(crate) fn split(self, hash: KeyHash, start: u32) -> (Bucket, u32, Bucket) {
        let depth = self.depth + 1;
        let upper_start = start | (1u32 << (32 - u32::from(depth)));
        let mut parts = [Bucket::new(depth), Bucket::new(depth)];
        for p in &mut parts {
            p.prefix.clone_from(&self.prefix);
        }
        // Each name's hash is computed again (the bucket keeps only its
        // low bits), once.
        self.rebuild_into(&mut parts, |name| usize::from(covers(upper_start, depth, hash.of(name))));
        let [lo, hi] = parts;
        (lo, upper_start, hi)
    }

    /// The bucket starting at `start` split until every part fits (or
    /// cannot split further), as (first hash, bucket) in hash order.
    pub(crate) fn partition(self, hash: KeyHash, start: u32) -> Vec<(u32, Bucket)> {
        let mut out = Vec::new();
        let mut todo = vec![(start, self)];
        while let Some((s, b)) = todo.pop() {
            if b.wants_split() {
                let (lo, upper, hi) = b.split(hash, s);
                todo.push((upper, hi));
                todo.push((s, lo));
            } else {
                out.push((s, b));
            }
        }
        out
    }

    /// The record of this bucket.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(self.bytes);
        b.push(VERSION);
        b.push(self.depth);
        b.extend_from_slice(&u32::try_from(self.len()).unwrap_or(u32::MAX).to_le_bytes());
        // The entries are copied in record form, in name order (the order
        // of the names past the prefix they all share), without being
        // decoded. The first name is written whole; each next one shares
        // the prefix and what its rest shares with the one before.
        let mut all: Vec<(&[u8], &[u8])> = (0..self.len()).map(|i| self.raw_entry(i)).collect();
        all.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let p = self.prefix.len();
        let mut prev: Option<&[u8]> = None;
        for (rest, entry) in all {
            let shared = prev.map_or(0, |prev| p + shared_len(prev, rest));
            varint::put(&mut b, shared as u64);
            varint::put(&mut b, (p + rest.len() - shared) as u64);
            if shared < p {
                b.extend_from_slice(&self.prefix[shared..]);
            }
            b.extend_from_slice(&rest[shared.saturating_sub(p)..]);
            b.extend_from_slice(entry);
            prev = Some(rest);
        }
        let crc = crc32fast::hash(&b);
        b.extend_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parses and validates the record of the bucket of keyspace `ks`
    /// starting at hash `start`, in a store hashing names by `hash`.
    ///
    /// # Errors
    /// [`Error::Corrupted`] naming the bucket (or the key whose entry is
    /// bad) for any damage; never panics.
    pub(crate) fn decode(hash: KeyHash, ks: u32, start: u32, b: &[u8]) -> Result<Bucket> {
        let bad = |reason: String| Error::Corrupted {
            key: format!("<bucket {ks}/{start:#010x}>"),
            page: None,
            reason: format!("metadata bucket: {reason}"),
        };
        let body = sealed_body(b, HEADER, VERSION, &bad)?;
        let depth = body[1];
        if !(MIN_DEPTH..=MAX_DEPTH).contains(&depth) || bucket_start(start, depth) != start {
            return Err(bad(format!("depth {depth} does not fit first hash {start:#010x}")));
        }
        let count = read_u32(body, 2);
        let mut r = Reader { b: body, at: HEADER };
        let mut bucket = Bucket::new(depth);
        // Each entry takes at least 3 bytes: no allocation from a bad count.
        let n = usize::try_from(count).unwrap_or(0).min(body.len() / 3);
        bucket.heads.reserve_exact(n);
        bucket.arena.reserve_exact(body.len() + n * 8);
        let mut entries: Vec<(Vec<u8>, Meta)> = Vec::with_capacity(n);
        for _ in 0..count {
            let shared = r.len(&bad)?;
            let rest = r.len(&bad)?;
            let prev: &[u8] = entries.last().map_or(&[], |(n, _)| n);
            if shared > prev.len() {
                return Err(bad(format!("name shares {shared} bytes with a {}-byte name", prev.len())));
            }
            let mut name = prev[..shared].to_vec();
            name.extend_from_slice(r.take(rest, &bad)?);
            if !entries.is_empty() && name.as_slice() <= prev {
                return Err(bad("names not in increasing order".into()));
            }
            if !covers(start, depth, hash.of(&name)) {
                return Err(bad_meta(
                    &name,
                    format!("stored in bucket {ks}/{start:#010x} that does not hold its hash"),
                ));
            }
            let tag = r.take(1, &bad)?[0];
            let meta = read_entry(&mut r, &name, tag, &bad)?;
            entries.push((name, meta));
        }
        // Sorted names: what the first and the last share, all share.
        if let (Some((first, _)), Some((last, _))) = (entries.first(), entries.last()) {
            bucket.prefix = first[..shared_len(first, last)].to_vec();
        }
        for (name, meta) in &entries {
            // Names are strictly increasing (checked above): always new.
            bucket.bytes += record_bytes(name.len(), meta);
            bucket.push_new(name, hash.of(name), meta, false, 0);
        }
        if r.at != body.len() {
            return Err(bad(format!("{} bytes after the last entry", body.len() - r.at)));
        }
        Ok(bucket)
    }
}

#[cfg(test)]
mod tests {
    /// The galloping search from the even-spread guess finds the same index
    /// as a plain binary search, for every tag, with tags spread evenly,
    /// crowded into a few values, and all equal.
    #[test]
    fn first_at_least_matches_a_binary_search() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        for (n, spread) in [(0, 1u32), (1, 1 << 15), (7, 1 << 15), (200, 1 << 15), (300, 40), (64, 1), (500, 3)] {
            let mut b = Bucket::new(MIN_DEPTH);
            let base = rng.gen_range(0..(1u32 << 15));
            for i in 0..n {
                let h = (rng.gen_range(0..spread) + base) & 0x7FFF;
                b.push_new(format!("k{i}").as_bytes(), h, &Meta::empty(Kind::String), false, 0);
            }
            let tags: Vec<u16> = (0..b.len()).map(|i| b.head(i).tag()).collect();
            assert!(tags.windows(2).all(|w| w[0] <= w[1]), "heads stay in tag order");
            for t in (0..=0x8000u32).step_by(7).chain([0, base, base + 1, 0x7FFF, 0x8000]) {
                let t = t.min(0x8000) as u16;
                assert_eq!(b.first_at_least(t), tags.partition_point(|&x| x < t), "n {n} spread {spread} tag {t}");
            }
        }
    }

    use super::*;

    /// Invariant: an in-place change of an inline value leaves the bucket
    /// exactly as an upsert of the changed value does (record bytes,
    /// decoded entries, changed marks), with or without an expiry; it is
    /// refused, changing nothing, for a value of another kind, a paged
    /// value, a missing name, and a change that declines.
    #[test]
    fn an_inline_patch_is_an_upsert_of_the_patched_value() {
        let hash = KeyHash::NEW;
        let inline = |kind: Kind, value: &[u8], expire_at_ms: u64| {
            let mut m = Meta::empty(kind);
            m.inline.room(value.len())[..value.len()].copy_from_slice(value);
            m.len = value.len() as u64;
            m.expire_at_ms = expire_at_ms;
            m
        };
        let value = |fill: u8| (0..40u8).map(|i| i.wrapping_mul(fill)).collect::<Vec<u8>>();
        for expiry in [0u64, 1_900_000_000_000] {
            let mut patched = Bucket::new(MIN_DEPTH);
            for (i, kind) in [Kind::Bloom, Kind::String, Kind::Bloom].into_iter().enumerate() {
                let name = format!("user:{i}:seen");
                let meta = inline(kind, &value(3), expiry);
                patched.put(hash, name.as_bytes(), &meta);
            }
            patched.put(hash, b"paged", &Meta::paged(Kind::Bloom, 9, 8192, 0, 0));
            patched.clear_changes();
            let mut upserted = patched.clone();
            let (name, h) = (&b"user:2:seen"[..], hash.of(b"user:2:seen"));
            let r = patched.patch_inline((name, h), Kind::Bloom, 0, None, |v| {
                v.copy_from_slice(&value(5));
                true
            });
            assert_eq!(r, Some(false), "the entry was not marked changed before");
            let meta = inline(Kind::Bloom, &value(5), expiry);
            upserted.upsert(name, h, &meta);
            assert_eq!(patched.encode(), upserted.encode(), "expiry {expiry}");
            assert_eq!(patched.sorted(), upserted.sorted());
            let changes = |b: &Bucket| {
                let mut c = Vec::new();
                b.for_each_change(|n, e| c.push((n.to_vec(), e.map(<[u8]>::to_vec))));
                c
            };
            assert_eq!(changes(&patched), changes(&upserted));
            assert_eq!(patched.patch_inline((name, h), Kind::Bloom, 0, None, |_| true), Some(true));
            // Refusals change nothing.
            let before = patched.clone();
            for (name, kind) in [("user:1:seen", Kind::Bloom), ("user:0:seen", Kind::String), ("paged", Kind::Bloom)] {
                let r = patched.patch_inline((name.as_bytes(), hash.of(name.as_bytes())), kind, 0, None, |v| {
                    v.fill(0xFF);
                    true
                });
                assert_eq!(r, None, "{name} {kind:?}");
            }
            assert_eq!(patched.patch_inline((b"missing", hash.of(b"missing")), Kind::Bloom, 0, None, |_| true), None);
            assert_eq!(patched.patch_inline((name, h), Kind::Bloom, 0, None, |_| false), None);
            assert_eq!(patched.encode(), before.encode());
            assert_eq!(changes(&patched), changes(&before));
            // A string's value too; the entry's in-place mark is cleared,
            // as a rewrite of the entry clears it.
            let (name, h) = (&b"user:1:seen"[..], hash.of(b"user:1:seen"));
            let mut upserted = patched.clone();
            let r = patched.patch_inline((name, h), Kind::String, 0, None, |v| {
                v[0] ^= 0x80;
                true
            });
            assert_eq!(r, Some(false));
            let mut flipped = value(3);
            flipped[0] ^= 0x80;
            upserted.upsert(name, h, &inline(Kind::String, &flipped, expiry));
            assert_eq!(patched.encode(), upserted.encode());
            assert_eq!(patched.sorted(), upserted.sorted());
        }
    }

    /// Whether `b`'s heads are in tag order, which its lookups rely on.
    fn in_tag_order(b: &Bucket) -> bool {
        (1..b.len()).all(|i| b.head(i - 1).tag() <= b.head(i).tag())
    }

    /// A bucket's changes by name: `None` for a removal.
    fn changed(b: &Bucket) -> std::collections::BTreeMap<Vec<u8>, Option<Meta>> {
        let mut out = std::collections::BTreeMap::new();
        b.for_each_change(|name, entry| {
            out.insert(name.to_vec(), entry.map(|e| decoded(name, e)));
        });
        out
    }

    /// An entry in record form, decoded.
    fn decoded(name: &[u8], entry: &[u8]) -> Meta {
        let mut r = Reader { b: entry, at: 1 };
        let meta = read_entry(&mut r, name, entry[0], &arena_damage).unwrap();
        assert_eq!(r.at, entry.len(), "the whole entry and nothing past it");
        meta
    }

    /// A bucket holding `names`: the depth-8 bucket of the first, with
    /// every name that falls in it.
    fn sample() -> (u32, Bucket) {
        let start = bucket_start(key_hash(b"k0"), MIN_DEPTH);
        let mut b = Bucket::new(MIN_DEPTH);
        let mut i = 0;
        while b.len() < 12 {
            let name = format!("k{i}");
            i += 1;
            if !covers(start, MIN_DEPTH, key_hash(name.as_bytes())) {
                continue;
            }
            let meta = match b.len() % 4 {
                0 => {
                    let mut m = Meta::empty(Kind::String);
                    m.inline[..2].copy_from_slice(&[0xff, 0x01]);
                    m.len = 3;
                    m.ones = 9;
                    m
                }
                1 => Meta::paged(Kind::String, 77, 1 << 20, 5, 12345),
                2 => Meta::paged(Kind::Bloom, 9, 8192, 0, 0),
                // A page kept in the entry: page 30, a run and a bit.
                _ => {
                    let member = crate::page::encode_lone(&crate::page::Page::from_positions(&[5, 6, 7, 100])).unwrap();
                    let mut m = Meta::empty(Kind::String);
                    m.inline[..member.len()].copy_from_slice(&member);
                    m.body = Body::Page { page: 30, bytes: u8::try_from(member.len()).unwrap() };
                    m.len = 30 * 4096 + 20;
                    m.ones = 4;
                    m.expire_at_ms = 777;
                    m
                }
            };
            b.put(KeyHash::NEW, name.as_bytes(), &meta);
        }
        (start, b)
    }

    /// Encode then decode gives the bucket back, with inline counts
    /// recomputed.
    #[test]
    fn round_trips() {
        let (start, b) = sample();
        let back = Bucket::decode(KeyHash::NEW, 1, start, &b.encode()).unwrap();
        assert_eq!(back, b);
        assert!(b.encode().len() <= b.bytes, "the size bound holds");
    }

    /// Every flipped bit and every truncation is an error, never a panic.
    #[test]
    fn damage_is_detected() {
        let (start, b) = sample();
        let enc = b.encode();
        for i in 0..enc.len() {
            for bit in [0x01, 0x80] {
                let mut d = enc.clone();
                d[i] ^= bit;
                assert!(Bucket::decode(KeyHash::NEW, 1, start, &d).is_err(), "flip {bit:#x} at {i} accepted");
            }
        }
        for n in 0..enc.len() {
            assert!(Bucket::decode(KeyHash::NEW, 1, start, &enc[..n]).is_err(), "truncation to {n} accepted");
        }
        assert!(Bucket::decode(KeyHash::NEW, 1, start ^ 0x0100_0000, &enc).is_err(), "a bucket read at the wrong hash");
    }

    /// A kept page that does not decode, or lies past its value's
    /// length, or a tag that marks an entry both inline and keeping a page,
    /// is refused with a reason naming it, even under a good checksum.
    #[test]
    fn kept_pages_are_validated() {
        let kept = |len: u64, member: Vec<u8>| {
            let start = bucket_start(key_hash(b"k"), MIN_DEPTH);
            let mut b = Bucket::new(MIN_DEPTH);
            let mut m = Meta::empty(Kind::String);
            m.inline[..member.len()].copy_from_slice(&member);
            m.body = Body::Page { page: 2, bytes: u8::try_from(member.len()).unwrap() };
            m.len = len;
            m.ones = 1;
            b.put(KeyHash::NEW, b"k", &m);
            Bucket::decode(KeyHash::NEW, 1, start, &b.encode()).map(|_| ())
        };
        let one = crate::page::encode_lone(&crate::page::Page::from_positions(&[9])).unwrap();
        // Bit 2 * 32768 + 9 needs 8,194 bytes.
        assert!(kept(8_194, one.clone()).is_ok());
        let e = kept(8_193, one.clone()).unwrap_err().to_string();
        assert!(e.contains("does not fit in 8193 bytes"), "{e}");
        // Popcount 2 with one position: the member's body is cut short.
        let mut bad = one.clone();
        bad[1] = 2;
        let e = kept(8_194, bad).unwrap_err().to_string();
        assert!(e.contains("page kept in its entry"), "{e}");
        // Inline and kept at once.
        let start = bucket_start(key_hash(b"k"), MIN_DEPTH);
        let mut b = Bucket::new(MIN_DEPTH);
        b.put(KeyHash::NEW, b"k", &Meta::paged(Kind::String, 1, 8, 1, 0));
        let mut enc = b.encode();
        // The header, the shared length 0, the name's length and name,
        // then the tag.
        let tag_at = HEADER + 3;
        assert_eq!(enc[tag_at], Kind::String as u8, "the tag of a paged string");
        enc[tag_at] |= TAG_INLINE | TAG_PAGE;
        let n = enc.len() - 4;
        let crc = crc32fast::hash(&enc[..n]);
        enc[n..].copy_from_slice(&crc.to_le_bytes());
        let e = Bucket::decode(KeyHash::NEW, 1, start, &enc).unwrap_err().to_string();
        assert!(e.contains("unknown tag bits"), "{e}");
    }

    /// Splitting keeps every entry, each in the half holding its hash.
    #[test]
    fn rebuilding_copies_entries_and_their_size_bound() {
        // Invariant: a bucket rebuilt from its entries' record form (split,
        // compaction) holds the same entries, marks and size bound as one
        // built entry by entry, for inline values of every length class,
        // expiries and paged entries.
        let (start, mut b) = sample();
        let mut m = Meta::empty(Kind::String);
        m.len = 60;
        m.expire_at_ms = 1_700_000_000_000;
        b.put(KeyHash::NEW, b"long inline", &m);
        let bound = |b: &Bucket| b.iter().map(|(name, m)| record_bytes(name.len(), &m)).sum::<usize>() + HEADER + 4;
        let marks = |b: &Bucket| (0..b.len()).filter(|&i| b.is_changed(i)).count();
        b.clear_changes();
        b.put(KeyHash::NEW, b"k0", &Meta::paged(Kind::String, 5, 1, 1, 0));
        assert_eq!(b.bytes, bound(&b));
        let (lo, _, hi) = b.clone().split(KeyHash::NEW, start);
        assert_eq!(lo.bytes + hi.bytes, b.bytes + HEADER + 4);
        assert_eq!((lo.bytes, hi.bytes), (bound(&lo), bound(&hi)));
        assert_eq!(marks(&lo) + marks(&hi), 1);
        let mut c = b.clone();
        c.compact();
        assert_eq!((c.bytes, marks(&c)), (b.bytes, 1));
        assert_eq!(c, b);
    }

    #[test]
    fn split_partitions_by_the_next_bit() {
        let (start, b) = sample();
        let all = b.len();
        let (lo, upper, hi) = b.split(KeyHash::NEW, start);
        assert_eq!((lo.depth, hi.depth), (MIN_DEPTH + 1, MIN_DEPTH + 1));
        assert_eq!(lo.len() + hi.len(), all);
        assert!(lo.iter().all(|(name, _)| covers(start, lo.depth, key_hash(&name))));
        assert!(hi.iter().all(|(name, _)| covers(upper, hi.depth, key_hash(&name))));
        assert!(in_tag_order(&lo) && in_tag_order(&hi), "a split keeps the tag order");
        let decoded = Bucket::decode(KeyHash::NEW, 0, upper, &hi.encode()).unwrap();
        assert!(in_tag_order(&decoded), "a decode builds the tag order");
        assert_eq!(decoded, hi);
    }

    /// The shared name prefix: names that share long prefixes, are
    /// prefixes of one another, or share nothing; a bucket emptied and
    /// refilled. After every step the bucket holds what a map holds, its
    /// record decodes to an equal bucket, its changes name whole names, and
    /// its halves after a split hold the same entries.
    #[test]
    fn the_name_prefix_follows_every_name() {
        use std::collections::BTreeMap;
        let mut b = Bucket::new(MIN_DEPTH);
        let mut model: BTreeMap<Vec<u8>, Meta> = BTreeMap::new();
        let region = bucket_start(key_hash(b"user:1"), MIN_DEPTH);
        let mut x = 99u64;
        for step in 0..3000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Mostly `user:1...` names of varied lengths; now and then
            // one that shares nothing or little. All in one hash region
            // (a record holds one region's names): a name outside it is
            // replaced by the first of its extensions inside it.
            let base = match x % 16 {
                0 => "z".to_string(),
                1 => "user:".to_string(),
                2 => String::new(),
                _ => format!("user:1{}", x % (1 + step % 500)),
            };
            let name = std::iter::once(base.clone())
                .chain((0..).map(|i| format!("{base}{i}")))
                .map(String::into_bytes)
                .find(|n| bucket_start(key_hash(n), MIN_DEPTH) == region)
                .unwrap();
            let h = key_hash(&name);
            if step % 700 == 650 {
                // Emptied; the names that follow start a prefix afresh.
                for (n, m) in std::mem::take(&mut model) {
                    assert_eq!(b.remove(&n, key_hash(&n)), Some(m), "step {step}");
                }
                assert_eq!(b.len(), 0);
            } else if x % 5 == 0 {
                assert_eq!(b.remove(&name, h), model.remove(&name), "step {step}");
            } else {
                let meta = Meta::paged(Kind::String, x % 1000 + 1, x % 5000, 0, 0);
                b.upsert(&name, h, &meta);
                model.insert(name, meta);
            }
            assert!(b.iter().all(|(n, _)| n.starts_with(&b.prefix)));
            if step % 50 == 0 {
                let want: Vec<(Vec<u8>, Meta)> = model.iter().map(|(k, m)| (k.clone(), m.clone())).collect();
                assert_eq!(b.sorted(), want, "step {step}");
                let start = region;
                assert_eq!(Bucket::decode(KeyHash::NEW, 0, start, &b.encode()).unwrap(), b, "step {step}");
                let mut changed = Vec::new();
                b.for_each_change(|n, e| {
                    if e.is_some() {
                        changed.push(n.to_vec());
                    }
                });
                assert!(changed.iter().all(|n| model.contains_key(n)), "changes name whole names");
                b.clear_changes();
                let (lo, _, hi) = b.clone().split(KeyHash::NEW, start);
                let mut halves: Vec<(Vec<u8>, Meta)> = lo.sorted();
                halves.extend(hi.sorted());
                halves.sort_by(|a, b| a.0.cmp(&b.0));
                assert_eq!(halves, want, "step {step}");
            }
        }
    }

    /// The prefix is kept once: names sharing `uid:sign:` keep it as the
    /// bucket's prefix; a name sharing nothing shortens it to nothing and
    /// every name is still found; an emptied bucket takes its next name's.
    #[test]
    fn a_bucket_keeps_the_shared_prefix_once() {
        let mut b = Bucket::new(MIN_DEPTH);
        let names: Vec<&[u8]> = vec![b"uid:sign:1:202611", b"uid:sign:2:202611", b"uid:sign:30:202611"];
        let meta = Meta::paged(Kind::String, 1, 4, 1, 0);
        for n in &names {
            b.upsert(n, key_hash(n), &meta);
        }
        assert_eq!(b.prefix, b"uid:sign:");
        b.upsert(b"other", key_hash(b"other"), &meta);
        assert!(b.prefix.is_empty());
        for n in names.iter().chain([&&b"other"[..]]) {
            assert_eq!(b.get(n, key_hash(n)), Some(meta.clone()), "{n:?}");
        }
        for n in names.iter().chain([&&b"other"[..]]) {
            b.remove(n, key_hash(n));
        }
        b.upsert(b"abc", key_hash(b"abc"), &meta);
        assert_eq!((b.prefix.as_slice(), b.get(b"abc", key_hash(b"abc"))), (&b"abc"[..], Some(meta)));
    }

    /// Updates in place, growing inline values, removals and the arena's
    /// compaction keep exactly the entries a map of them keeps.
    #[test]
    fn updates_match_a_map() {
        use std::collections::BTreeMap;
        let mut b = Bucket::new(MIN_DEPTH);
        let mut model: BTreeMap<Vec<u8>, Meta> = BTreeMap::new();
        let mut x = 12345u64;
        for step in 0..5000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let name = format!("key{}", x % 40).into_bytes();
            let h = key_hash(&name);
            match step % 4 {
                0 => {
                    assert_eq!(b.remove(&name, h), model.remove(&name));
                }
                1 => {
                    let meta = Meta::paged(Kind::String, x % 1000, x % 5000, 0, 0);
                    b.upsert(&name, h, &meta);
                    model.insert(name, meta);
                }
                _ => {
                    let mut meta = Meta::empty(Kind::String);
                    let n = usize::try_from(x % 65).unwrap();
                    for (i, byte) in meta.inline[..n].iter_mut().enumerate() {
                        *byte = (i.to_le_bytes()[0]) ^ x.to_le_bytes()[0];
                    }
                    meta.len = n as u64;
                    meta.ones = meta.inline[..n].iter().map(|v| u64::from(v.count_ones())).sum();
                    b.upsert(&name, h, &meta);
                    model.insert(name, meta);
                }
            }
            assert!(b.garbage * 2 <= b.arena.len().max(512), "the arena stays compact");
            assert!(in_tag_order(&b), "lookups binary-search the heads' tags");
        }
        let want: Vec<(Vec<u8>, Meta)> = model.iter().map(|(k, m)| (k.clone(), m.clone())).collect();
        assert_eq!(b.sorted(), want);
    }

    /// Invariant: the changes drained are exactly the removals and then the
    /// entries upserted since the last drain, by name, with their marks
    /// kept through removals of other entries, compaction and splits.
    #[test]
    fn drained_changes_are_the_changes_since_the_last_drain() {
        use std::collections::BTreeMap;
        let drain = |b: &mut Bucket| {
            let got = changed(b);
            b.clear_changes();
            got
        };
        let (start, mut b) = sample();
        assert_eq!(drain(&mut b).len(), 12, "a new bucket's entries are all changed");
        assert!(drain(&mut b).is_empty() && !b.has_changes(), "drained");
        let names: Vec<Vec<u8>> = b.sorted().into_iter().map(|(n, _)| n).collect();
        let meta = Meta::paged(Kind::String, 5, 100, 3, 0);
        b.upsert(&names[3], key_hash(&names[3]), &meta);
        b.remove(&names[0], key_hash(&names[0]));
        b.remove(&names[7], key_hash(&names[7]));
        let mut want: BTreeMap<Vec<u8>, Option<Meta>> = BTreeMap::new();
        want.insert(names[3].clone(), Some(meta));
        want.insert(names[0].clone(), None);
        want.insert(names[7].clone(), None);
        let mut copy = b.clone();
        copy.compact();
        assert_eq!(drain(&mut copy), want, "compaction keeps the marks");
        let (mut lo, _, mut hi) = b.split(KeyHash::NEW, start);
        let mut got = drain(&mut lo);
        got.extend(drain(&mut hi));
        assert_eq!(got, want, "a split keeps the marks");
    }

    /// Invariant: a key deleted and set again to the value a write-back
    /// has just drained into its delta record is not deleted by the next
    /// delta record: no removal of a live name is left.
    #[test]
    fn a_key_deleted_and_restored_after_a_drain_stays() {
        let (_, mut live) = sample();
        let names: Vec<Vec<u8>> = live.sorted().into_iter().map(|(n, _)| n).collect();
        let k = &names[2];
        let meta = live.get(k, key_hash(k)).unwrap();
        live.clear_changes();
        live.remove(k, key_hash(k));
        live.upsert(k, key_hash(k), &meta);
        let next = changed(&live);
        assert_eq!(next.get(k), Some(&Some(meta.clone())), "the next delta record sets the key again");
        assert_eq!(live.get(k, key_hash(k)), Some(meta));
    }

    /// Invariant: after a drain, the next changes are exactly those made
    /// since: entries changed again (to other metadata), new entries and
    /// new removals.
    #[test]
    fn changes_after_a_drain_are_the_next_changes() {
        use std::collections::BTreeMap;
        let (_, mut live) = sample();
        live.clear_changes();
        let names: Vec<Vec<u8>> = live.sorted().into_iter().map(|(n, _)| n).collect();
        let h = |n: &[u8]| key_hash(n);
        let (m1, m2) = (Meta::paged(Kind::String, 5, 100, 3, 0), Meta::paged(Kind::String, 6, 100, 4, 0));
        live.upsert(&names[1], h(&names[1]), &m1);
        live.upsert(&names[2], h(&names[2]), &m1);
        live.remove(&names[3], h(&names[3]));
        live.clear_changes();
        live.upsert(&names[2], h(&names[2]), &m2);
        live.upsert(&names[4], h(&names[4]), &m1);
        live.remove(&names[5], h(&names[5]));
        let got = changed(&live);
        let want: BTreeMap<Vec<u8>, Option<Meta>> =
            [(names[2].clone(), Some(m2)), (names[4].clone(), Some(m1)), (names[5].clone(), None)]
                .into_iter()
                .collect();
        assert_eq!(got, want);
    }

    /// Invariant: last uses read back per entry; a use more than 2^16 s
    /// after the base moves the base, keeping recent times and clamping
    /// older ones to it; a split keeps each entry's time and in-place mark.
    #[test]
    fn last_uses_survive_a_base_move_and_a_split() {
        let mut b = Bucket::new(MIN_DEPTH);
        b.set_loaded(1000);
        let names: Vec<Vec<u8>> = (0..200u32).map(|i| format!("key{i}").into_bytes()).collect();
        for (i, name) in (0u32..).zip(&names) {
            let mut m = Meta::paged(Kind::String, u64::from(i) + 1, 1, 0, 0);
            m.changed_in_place = i % 2 == 0;
            b.upsert_at(name, key_hash(name), &m, 1000 + i);
        }
        let idle = |b: &Bucket, i: usize, now: u32| b.idle(&names[i], key_hash(&names[i]), now);
        assert_eq!(idle(&b, 5, 2000), Some(995));
        b.find(&names[7], key_hash(&names[7]), 71_000);
        assert_eq!(idle(&b, 7, 71_000), Some(0));
        assert_eq!(idle(&b, 5, 71_000), Some(1 << 15), "an old time clamps to the moved base");
        b.find(&names[9], key_hash(&names[9]), 71_010);
        let start = bucket_start(key_hash(&names[0]), MIN_DEPTH);
        let (lo, upper, hi) = b.split(KeyHash::NEW, start);
        for (i, name) in names.iter().enumerate() {
            let part = if covers(upper, lo.depth, key_hash(name)) { &hi } else { &lo };
            let want = match i {
                7 => 20,
                9 => 10,
                _ => (1 << 15) + 20,
            };
            assert_eq!(idle(part, i, 71_020), Some(want), "entry {i}");
            assert_eq!(part.get(name, key_hash(name)).unwrap().changed_in_place, i % 2 == 0, "entry {i}");
        }
    }

    /// Lookups compare hash tags first: names sharing one hash, near one
    /// another and far apart, are each found, and a name not stored is not.
    #[test]
    fn lookups_with_shared_hashes_find_each_name() {
        let mut b = Bucket::new(MIN_DEPTH);
        // Every third entry has hash 7; the others distinct hashes.
        let names: Vec<Vec<u8>> = (0..53u32).map(|i| format!("n{i}").into_bytes()).collect();
        let hash = |i: u32| if i % 3 == 0 { 7 } else { 1000 + i };
        for (i, name) in (0..).zip(&names) {
            b.upsert(name, hash(i), &Meta::paged(Kind::String, u64::from(i) + 1, 1, 0, 0));
        }
        for (i, name) in (0..).zip(&names) {
            assert_eq!(b.get(name, hash(i)).and_then(|m| m.id()), Some(u64::from(i) + 1), "entry {i}");
        }
        assert_eq!(b.get(b"absent", 7), None);
        assert_eq!(b.get(&names[1], 7), None, "a name is found only under its own hash");
    }
}
