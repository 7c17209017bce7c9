//! Page codecs: one page of `PAGE_WORDS` 64-bit words in one of three
//! representations (dense, sparse position list, run list, EWAH), its
//! on-disk encoding
//! and the bit operations the engine needs.
//!
//! # Representations
//!
//! * [`Encoding::Dense`]: the 512 words, boxed.
//! * [`Encoding::Sparse`]: the strictly increasing list of set positions.
//! * [`Encoding::Runs`]: the maximal runs of set bits (see [`runs`]).
//! * [`Encoding::Ewah`]: an EWAH stream (see [`ewah`]).
//!
//! Every page caches its popcount. Pages built from computed data
//! ([`Page::from_words`], the results of [`Page::and`], [`Page::or`], ...) take
//! the representation whose *encoded* size is smallest, the same rule
//! [`Page::encode`] uses. Pages mutated bit by bit ([`Page::set`]) move between
//! sparse and dense with hysteresis ([`SPARSE_MAX`], [`SPARSE_BACK`]) so a page
//! hovering around the threshold does not convert on every write.
//!
//! # On-disk format, version 2
//!
//! All integers little-endian:
//!
//! ```text
//! offset 0      u8   format version = 2 (PAGE_FORMAT_VERSION); 1 is read
//! offset 1      u8   encoding: 0 = dense, 1 = sparse, 2 = ewah, 3 = runs
//!                    (runs only in version 2)
//! offset 2..4   u16  popcount, 1..=32768 (empty pages are never stored)
//! offset 4..n-4      body
//! offset n-4..n u32  crc32 of bytes 0..n-4
//! ```
//!
//! * Dense body: 512 `u64` words (4,096 bytes).
//! * Sparse body: popcount `u16` positions, strictly increasing, each below
//!   32,768.
//! * EWAH body: `u64` words, see [`ewah`].
//! * Runs body: per run, `u16` first position and `u16` length - 1; runs
//!   increasing, each inside the page, a clear bit between two runs.
//!
//! Callers never store an empty page: its encoding (popcount 0) is rejected by
//! [`Page::decode`]. An empty page is represented by the absence of a record.

#![deny(clippy::cast_possible_truncation)]

#[cfg(any(test, feature = "testing"))]
pub(crate) mod check;
mod codec;
mod dense;
mod ewah;
mod group;
mod runs;
mod sparse;
#[cfg(test)]
mod tests;

use crate::geometry::{page_bit, page_count, position, word_mask, PAGE_BITS, PAGE_WORDS};

pub(crate) use codec::encoded_len;
#[cfg(any(test, feature = "testing"))]
pub(crate) use group::GROUP_FORMAT_VERSION;
pub(crate) use group::{
    decode_group, decode_lone, encode_group, encode_lone, fits_group, split_group, Member, GROUP_HEADER_BYTES,
    GROUP_PAGES, LONE_MAX,
};

/// Bits per page as a `u32` (32,768).
const BITS: u32 = page_bit(PAGE_BITS - 1) + 1;

/// A sparse page whose position list grows above this converts to dense on
/// [`Page::set`].
pub(crate) const SPARSE_MAX: u32 = 2048;

/// Values up to this many bytes become pages through their positions
/// rather than a page of words (so an inline value's page is cheap).
const SHORT_BYTES: usize = 128;

/// A dense page whose popcount drops below this through [`Page::set`] (or
/// [`Page::truncate`]) converts to sparse.
pub(crate) const SPARSE_BACK: u32 = 1024;

/// Which representation a page uses, in memory or on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// 512 literal words.
    Dense,
    /// Sorted list of set positions.
    Sparse,
    /// EWAH run-length words.
    Ewah,
    /// Maximal runs of set bits.
    Runs,
}

impl Encoding {
    #[cfg(any(test, feature = "testing"))]
    /// All encodings, in the order ties are broken when choosing the smallest.
    pub(crate) const ALL: [Encoding; 4] = [Encoding::Sparse, Encoding::Runs, Encoding::Ewah, Encoding::Dense];

    /// Lower-case name, as used in file names and benchmark ids.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Encoding::Dense => "dense",
            Encoding::Sparse => "sparse",
            Encoding::Ewah => "ewah",
            Encoding::Runs => "runs",
        }
    }
}

/// Why a stored page did not decode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageError(pub String);

impl std::fmt::Display for PageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// In-memory representation of a page.
#[derive(Clone, Debug)]
enum Repr {
    /// All 512 words.
    Dense(Box<[u64; PAGE_WORDS]>),
    /// Strictly increasing set positions, each below 32,768.
    Sparse(Vec<u16>),
    /// A valid EWAH stream covering exactly 512 words (see [`ewah`]).
    Ewah(Vec<u64>),
    /// The maximal runs of set bits, increasing (see [`runs`]).
    Runs(Vec<runs::Run>),
}

/// One page of a bitmap.
///
/// Equality compares bits, whatever the representations.
#[derive(Clone, Debug)]
pub(crate) struct Page {
    repr: Repr,
    /// Cached popcount, always equal to the number of set bits in `repr`.
    ones: u32,
}

impl PartialEq for Page {
    fn eq(&self, other: &Page) -> bool {
        if self.ones != other.ones {
            return false;
        }
        match (&self.repr, &other.repr) {
            (Repr::Dense(a), Repr::Dense(b)) => a == b,
            (Repr::Sparse(a), Repr::Sparse(b)) => a == b,
            (Repr::Ewah(a), Repr::Ewah(b)) if a == b => true,
            // Maximal runs are a function of the bits.
            (Repr::Runs(a), Repr::Runs(b)) => a == b,
            _ => {
                let mut a = [0u64; PAGE_WORDS];
                let mut b = [0u64; PAGE_WORDS];
                self.to_words(&mut a);
                other.to_words(&mut b);
                a == b
            }
        }
    }
}

impl Eq for Page {}

/// The smallest encoding of a page, and what choosing it measured.
#[derive(Clone, Debug)]
struct Choice {
    encoding: Encoding,
    /// The length of the canonical EWAH stream, if it was measured (else 0).
    ewah_len: usize,
    /// The runs, if they were counted to the end (else 0).
    runs: u32,
    /// The set positions, if they were listed (else empty).
    positions: Vec<u16>,
}

/// The encoding with the smallest encoded size for the page `words`, which
/// has `census.ones` set bits (and these set positions, if `known`). Ties
/// prefer sparse, then runs, then EWAH, then dense.
///
/// Runs are counted where that is cheap. With sparse no larger than dense
/// (at most 2,048 set bits) the positions are listed, as sparse would need
/// them, and the runs counted on the list; with more bits the count over
/// the words stops once the run list is no smaller than dense (for random
/// bits at 50%, after about 64 of the 512 words). Every dirty word (neither
/// all zeros nor all ones) is a literal of the EWAH stream, which also
/// starts with a marker: so the stream has at least `dirty + 1` words, and
/// when another encoding beats that floor the stream is not measured at all
/// (the common case for random data).
fn choose(words: &[u64; PAGE_WORDS], census: Census, known: Option<&[u16]>) -> Choice {
    let sparse = encoded_len(Encoding::Sparse, census.ones as usize);
    let dense = encoded_len(Encoding::Dense, PAGE_WORDS);
    let mut positions = Vec::new();
    let (best, best_len, runs) = if sparse <= dense {
        let listed = if let Some(pos) = known {
            pos
        } else {
            positions = dense::positions(words, census.ones);
            &positions
        };
        let r = page_count(runs::in_positions(listed));
        let run_list = encoded_len(Encoding::Runs, r as usize);
        // Ties go to sparse.
        if run_list < sparse {
            (Encoding::Runs, run_list, r)
        } else {
            (Encoding::Sparse, sparse, 0)
        }
    } else {
        // The fewest runs that do not win against dense (ties go to runs).
        let cap = page_count((dense - encoded_len(Encoding::Runs, 0)) / 4 + 1);
        match runs::count_below(words, cap) {
            Some(r) => (Encoding::Runs, encoded_len(Encoding::Runs, r as usize), r),
            None => (Encoding::Dense, dense, 0),
        }
    };
    let ewah_floor = encoded_len(Encoding::Ewah, census.dirty as usize + 1);
    if !ewah_beats(best, best_len, ewah_floor) {
        return Choice { encoding: best, ewah_len: 0, runs, positions };
    }
    let ewah_len = ewah::stream_len(words);
    let ewah = encoded_len(Encoding::Ewah, ewah_len);
    let encoding = if ewah_beats(best, best_len, ewah) { Encoding::Ewah } else { best };
    Choice { encoding, ewah_len, runs, positions }
}

/// Whether an EWAH stream of `ewah` encoded bytes is chosen over `best` of
/// `best_len` bytes: strictly smaller than sparse or runs, no larger than
/// dense.
fn ewah_beats(best: Encoding, best_len: usize, ewah: usize) -> bool {
    if best == Encoding::Dense {
        ewah <= best_len
    } else {
        ewah < best_len
    }
}

/// The smallest of sparse, runs and dense for a page with `ones` set bits
/// in `runs` runs, and its encoded length. Ties prefer sparse, then runs.
fn smallest_listed(ones: u32, runs: u32) -> (Encoding, usize) {
    let sparse = encoded_len(Encoding::Sparse, ones as usize);
    let run_list = encoded_len(Encoding::Runs, runs as usize);
    let dense = encoded_len(Encoding::Dense, PAGE_WORDS);
    if sparse <= run_list && sparse <= dense {
        (Encoding::Sparse, sparse)
    } else if run_list <= dense {
        (Encoding::Runs, run_list)
    } else {
        (Encoding::Dense, dense)
    }
}

/// Whether `pos` (strictly increasing page positions) is smallest as a
/// sparse list, decided without words: no larger than its run list and
/// than dense (ties go to sparse), and no larger than the least an EWAH
/// stream of its words could take (EWAH wins only strictly smaller).
fn sparse_stays(pos: &[u16]) -> bool {
    let sparse = encoded_len(Encoding::Sparse, pos.len());
    if sparse > encoded_len(Encoding::Dense, PAGE_WORDS)
        || sparse > encoded_len(Encoding::Runs, runs::in_positions(pos))
    {
        return false;
    }
    let word = |p: &u16| u32::from(*p) / crate::geometry::WORD_BITS;
    let full = crate::geometry::WORD_BITS as usize;
    let dirty = pos.chunk_by(|a, b| word(a) == word(b)).filter(|w| w.len() < full).count();
    encoded_len(Encoding::Ewah, dirty + 1) >= sparse
}

/// A bitwise operation [`fold_dense`] applies across pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fold {
    /// `a & b`.
    And,
    /// `a | b`.
    Or,
    /// `a ^ b`.
    Xor,
}

/// `acc = p1 op p2 op ...` over `pages` (all zero for none): the dense
/// pages in one fused pass ([`fold_dense`]), then the others one by one.
pub(crate) fn fold_pages<'a>(op: Fold, pages: impl Iterator<Item = &'a Page> + Clone, acc: &mut [u64; PAGE_WORDS]) {
    let dense: Vec<&[u64; PAGE_WORDS]> = pages.clone().filter_map(Page::dense_words).collect();
    let mut others = pages.filter(|p| p.dense_words().is_none());
    if dense.is_empty() {
        // Start from a page itself: AND needs its bits, not zeros.
        match others.next() {
            Some(first) => first.to_words(acc),
            None => acc.fill(0),
        }
    } else {
        fold_dense(op, &dense, acc);
    }
    for p in others {
        match op {
            Fold::And => p.and_into(acc),
            Fold::Or => p.or_into(acc),
            Fold::Xor => p.xor_into(acc),
        }
    }
}

/// `out = sources[0] op sources[1] op ...`, word by word across all the
/// sources at once: one pass that reads the k pages side by side (k memory
/// streams in flight) and writes `out` once, instead of k passes over `out`.
/// `out` is left all zero for no sources.
fn fold_dense(op: Fold, sources: &[&[u64; PAGE_WORDS]], out: &mut [u64; PAGE_WORDS]) {
    match op {
        Fold::And => dense::fold(sources, out, |a, b| a & b),
        Fold::Or => dense::fold(sources, out, |a, b| a | b),
        Fold::Xor => dense::fold(sources, out, |a, b| a ^ b),
    }
}

/// Clears every bit of `words` at or past page bit `bits` (below 32,768).
/// The positions, rising, of the bits that differ between two versions of
/// a page (`None`: all zero).
pub(crate) fn changed_positions(a: Option<&Page>, b: Option<&Page>) -> Vec<u16> {
    let mut diff = [0u64; PAGE_WORDS];
    let mut other = [0u64; PAGE_WORDS];
    if let Some(a) = a {
        a.to_words(&mut diff);
    }
    if let Some(b) = b {
        b.to_words(&mut other);
    }
    for (d, o) in diff.iter_mut().zip(&other) {
        *d ^= o;
    }
    dense::ones_in(&diff, 0, 0, BITS).map(position).collect()
}

/// `words` holds the bits at `positions` (ascending page bits) and no others.
pub(crate) fn positions_to_words(positions: &[u16], words: &mut [u64; PAGE_WORDS]) {
    words.fill(0);
    sparse::or_into(positions, words);
}

pub(crate) fn truncate_words(words: &mut [u64; PAGE_WORDS], bits: u32) {
    dense::truncate(words, bits);
}

/// Cuts an ascending position list to the bits below `bits`, as
/// [`Page::truncate`] cuts a sparse page.
pub(crate) fn truncate_positions(list: &mut Vec<u16>, bits: u32) {
    list.truncate(sparse::rank(list, bits));
}

/// The set bits and the dirty words (neither 0 nor all ones) of a page's
/// words, counted in one pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Census {
    /// Set bits.
    pub(crate) ones: u32,
    /// Words that are neither 0 nor `u64::MAX`.
    pub(crate) dirty: u32,
}

impl Census {
    /// Counts `words`.
    pub(crate) fn of(words: &[u64; PAGE_WORDS]) -> Census {
        let (ones, dirty) = dense::census(words);
        Census { ones, dirty }
    }
}

/// The encoding with the smallest encoded size for a page with `ones` set bits
/// in `runs` runs whose canonical EWAH stream has `ewah_words` words. Ties
/// prefer sparse, then runs, then EWAH, then dense.
fn smallest(ones: u32, runs: u32, ewah_words: usize) -> Encoding {
    let (best, best_len) = smallest_listed(ones, runs);
    if ewah_beats(best, best_len, encoded_len(Encoding::Ewah, ewah_words)) {
        Encoding::Ewah
    } else {
        best
    }
}

impl Page {
    /// The empty page.
    pub(crate) fn zeros() -> Page {
        Page { repr: Repr::Sparse(Vec::new()), ones: 0 }
    }

    /// The page with every bit set (one run).
    pub(crate) fn full() -> Page {
        Page { repr: Repr::Runs(vec![[0, position(BITS - 1)]]), ones: BITS }
    }

    /// A page with these words, in its smallest representation.
    pub(crate) fn from_words(words: &[u64; PAGE_WORDS]) -> Page {
        Page::from_census(words, Census::of(words))
    }

    /// A page with these words, whose [`Census`] the caller has taken, in
    /// its smallest representation.
    pub(crate) fn from_census(words: &[u64; PAGE_WORDS], census: Census) -> Page {
        debug_assert_eq!(census, Census::of(words), "the census describes the words");
        if census.ones == 0 {
            return Page::zeros();
        }
        let choice = choose(words, census, None);
        let repr = match choice.encoding {
            Encoding::Sparse => Repr::Sparse(choice.positions),
            Encoding::Ewah => {
                let mut stream = Vec::with_capacity(choice.ewah_len);
                ewah::encode_into(words, &mut stream);
                Repr::Ewah(stream)
            }
            Encoding::Dense => Repr::Dense(Box::new(*words)),
            Encoding::Runs if !choice.positions.is_empty() => Repr::Runs(runs::from_positions(&choice.positions)),
            Encoding::Runs => Repr::Runs(runs::from_words(words, choice.runs)),
        };
        Page { repr, ones: census.ones }
    }

    /// A page with these bits set. `positions` must be strictly increasing
    /// and below 32,768 (checked in debug builds; the Roaring import checks
    /// its values' order before it calls this). Takes the smallest
    /// representation.
    pub(crate) fn from_positions(positions: &[u16]) -> Page {
        debug_assert!(sparse::is_valid(positions), "positions must be strictly increasing and below 32768");
        let sparse = Page {
            // A strictly increasing list below 32,768 (the caller's
            // contract) is at most 32,768 long.
            ones: page_count(positions.len()),
            repr: Repr::Sparse(positions.to_vec()),
        };
        sparse.compacted()
    }

    /// A page from its Redis bytes: at most 4,096 are used, fewer are padded
    /// with zeros.
    pub(crate) fn from_bytes(bytes: &[u8]) -> Page {
        if bytes.len() <= SHORT_BYTES {
            // A short value (an inline one): its positions directly, without
            // a page of words.
            let mut positions = Vec::new();
            for (i, &b) in bytes.iter().enumerate() {
                let mut rest = b;
                while rest != 0 {
                    let lz = rest.leading_zeros();
                    positions.push(position(page_bit((i * 8) as u64 + u64::from(lz))));
                    rest ^= 0x80 >> lz;
                }
            }
            return Page::sparse(positions);
        }
        let mut words = [0u64; PAGE_WORDS];
        let bytes = &bytes[..bytes.len().min(PAGE_WORDS * 8)];
        for (word, chunk) in words.iter_mut().zip(bytes.chunks(8)) {
            let mut be = [0u8; 8];
            be[..chunk.len()].copy_from_slice(chunk);
            *word = u64::from_be_bytes(be);
        }
        Page::from_words(&words)
    }

    /// Writes the first `out.len()` (at most 4,096) Redis bytes of the page
    /// into `out`, zeros included.
    pub(crate) fn write_bytes(&self, out: &mut [u8]) {
        debug_assert!(out.len() <= PAGE_WORDS * 8, "a page has 4096 bytes");
        let len = out.len().min(PAGE_WORDS * 8);
        let out = &mut out[..len];
        match &self.repr {
            Repr::Dense(words) => dense::write_bytes(&words[..], out),
            Repr::Sparse(pos) => {
                out.fill(0);
                for &p in pos {
                    let byte = usize::from(p / 8);
                    match out.get_mut(byte) {
                        Some(b) => *b |= 0x80 >> (p % 8),
                        None => break,
                    }
                }
            }
            Repr::Ewah(stream) => {
                for seg in ewah::Segments::new(stream) {
                    let start = seg.start() * 8;
                    if start >= out.len() {
                        break;
                    }
                    match seg {
                        ewah::Segment::Run { len, ones, .. } => {
                            let end = (start + len * 8).min(out.len());
                            out[start..end].fill(if ones { 0xFF } else { 0 });
                        }
                        ewah::Segment::Lits { words, .. } => {
                            let end = (start + words.len() * 8).min(out.len());
                            dense::write_bytes(words, &mut out[start..end]);
                        }
                    }
                }
            }
            Repr::Runs(list) => {
                let mut words = [0u64; PAGE_WORDS];
                runs::to_words(list, &mut words);
                dense::write_bytes(&words, out);
            }
        }
    }

    /// Redis byte `index` (below 4,096) of the page.
    pub(crate) fn byte(&self, index: usize) -> u8 {
        debug_assert!(index < PAGE_WORDS * 8, "a page has 4096 bytes");
        if let Repr::Dense(words) = &self.repr {
            return words.get(index / 8).map_or(0, |w| w.to_be_bytes()[index % 8]);
        }
        (0..8u32).fold(0, |b, k| (b << 1) | u8::from(self.get(page_bit(index as u64 * 8 + u64::from(k)))))
    }

    /// Sets Redis byte `index` (below 4,096) of the page to `value`.
    pub(crate) fn set_byte(&mut self, index: usize, value: u8) {
        let old = self.byte(index);
        for k in 0..8u32 {
            let mask = 0x80 >> k;
            if (old ^ value) & mask != 0 {
                self.set(page_bit(index as u64 * 8 + u64::from(k)), value & mask != 0);
            }
        }
    }

    /// The value offsets of the set bits, ascending, when this is page
    /// `page` of its value.
    pub(crate) fn offsets(&self, page: u64) -> impl Iterator<Item = u64> + '_ {
        let base = page * PAGE_BITS;
        self.ones_in(0, BITS).map(move |b| base + u64::from(b))
    }

    /// Whether page-relative bit `bit` (below 32,768) is set.
    pub(crate) fn get(&self, bit: u32) -> bool {
        debug_assert!(bit < BITS, "bit {bit} outside the page");
        match &self.repr {
            Repr::Dense(words) => dense::get(words, bit),
            Repr::Sparse(pos) => u16::try_from(bit).is_ok_and(|b| pos.binary_search(&b).is_ok()),
            Repr::Ewah(stream) => ewah::get(stream, bit),
            Repr::Runs(list) => runs::get(list, bit),
        }
    }

    /// Sets bit `bit` (below 32,768) to `value` and returns its old value.
    pub(crate) fn set(&mut self, bit: u32, value: bool) -> bool {
        debug_assert!(bit < BITS, "bit {bit} outside the page");
        if let Repr::Ewah(_) | Repr::Runs(_) = self.repr {
            self.repr = if self.ones <= SPARSE_MAX {
                Repr::Sparse(self.positions())
            } else {
                let mut words = Box::new([0u64; PAGE_WORDS]);
                self.to_words(&mut words);
                Repr::Dense(words)
            };
        }
        match &mut self.repr {
            Repr::Dense(words) => {
                let (w, m) = word_mask(bit);
                let old = words[w] & m != 0;
                if old == value {
                    return old;
                }
                words[w] ^= m;
                if value {
                    self.ones += 1;
                } else {
                    self.ones -= 1;
                    if self.ones < SPARSE_BACK {
                        self.repr = Repr::Sparse(dense::positions(words, self.ones));
                    }
                }
                old
            }
            Repr::Sparse(pos) => {
                // `bit` is below 32,768 by contract; an out-of-range bit is
                // treated as unset and left alone.
                let Ok(b) = u16::try_from(bit) else {
                    return false;
                };
                match (pos.binary_search(&b), value) {
                    (Ok(_), true) => true,
                    (Err(_), false) => false,
                    (Ok(i), false) => {
                        pos.remove(i);
                        self.ones -= 1;
                        true
                    }
                    (Err(i), true) => {
                        pos.insert(i, b);
                        self.ones += 1;
                        if self.ones > SPARSE_MAX {
                            let words = Box::new(sparse::to_words(pos));
                            self.repr = Repr::Dense(words);
                        }
                        false
                    }
                }
            }
            Repr::Ewah(_) | Repr::Runs(_) => unreachable!("converted above"),
        }
    }

    /// Number of set bits.
    pub(crate) fn count_ones(&self) -> u32 {
        self.ones
    }

    /// Whether no bit is set.
    pub(crate) fn is_empty(&self) -> bool {
        self.ones == 0
    }

    /// Whether every bit is set.
    pub(crate) fn is_full(&self) -> bool {
        self.ones == BITS
    }

    /// Number of set bits in `[from, to)`; `to` is at most 32,768.
    pub(crate) fn count_range(&self, from: u32, to: u32) -> u32 {
        let to = to.min(BITS);
        if from >= to {
            return 0;
        }
        if from == 0 && to == BITS {
            return self.ones;
        }
        match &self.repr {
            Repr::Dense(words) => dense::count_range(words, from, to),
            Repr::Sparse(pos) => sparse::count_range(pos, from, to),
            Repr::Ewah(stream) => ewah::count_range(stream, from, to),
            Repr::Runs(list) => runs::count_range(list, from, to),
        }
    }

    /// The first bit `p` in `[from, to)` with `get(p) == value`.
    pub(crate) fn find(&self, value: bool, from: u32, to: u32) -> Option<u32> {
        let to = to.min(BITS);
        if from >= to {
            return None;
        }
        if (value && self.ones == 0) || (!value && self.ones == BITS) {
            return None;
        }
        match &self.repr {
            Repr::Dense(words) => dense::find(words, value, from, to),
            Repr::Sparse(pos) => sparse::find(pos, value, from, to),
            Repr::Ewah(stream) => ewah::find(stream, value, from, to),
            Repr::Runs(list) => runs::find(list, value, from, to),
        }
    }

    /// The last set bit, if any.
    pub(crate) fn last_set(&self) -> Option<u32> {
        match &self.repr {
            Repr::Sparse(pos) => pos.last().map(|&p| u32::from(p)),
            Repr::Runs(list) => list.last().map(|r| u32::from(r[1])),
            Repr::Dense(_) | Repr::Ewah(_) => {
                let mut words = [0u64; PAGE_WORDS];
                self.to_words(&mut words);
                let (w, &word) = words.iter().enumerate().rev().find(|(_, &word)| word != 0)?;
                Some(crate::geometry::word_start(w) + 63 - word.trailing_zeros())
            }
        }
    }

    /// The set bits in `[from, to)`, ascending.
    pub(crate) fn ones_in(&self, from: u32, to: u32) -> Box<dyn Iterator<Item = u32> + '_> {
        let to = to.min(BITS);
        if from >= to || self.ones == 0 {
            return Box::new(std::iter::empty());
        }
        match &self.repr {
            Repr::Dense(words) => Box::new(dense::ones_in(&words[..], 0, from, to)),
            Repr::Sparse(pos) => {
                let lo = sparse::rank(pos, from);
                let hi = sparse::rank(pos, to);
                Box::new(pos[lo..hi].iter().map(|&p| u32::from(p)))
            }
            Repr::Ewah(stream) => Box::new(ewah::ones_in(stream, from, to)),
            Repr::Runs(list) => Box::new(runs::ones_in(list, from, to)),
        }
    }

    /// Writes all 512 words of the page into `out`.
    pub(crate) fn to_words(&self, out: &mut [u64; PAGE_WORDS]) {
        match &self.repr {
            Repr::Dense(words) => out.copy_from_slice(&words[..]),
            Repr::Sparse(pos) => positions_to_words(pos, out),
            Repr::Ewah(stream) => ewah::to_words(stream, out),
            Repr::Runs(list) => runs::to_words(list, out),
        }
    }

    /// `acc &= self`.
    pub(crate) fn and_into(&self, acc: &mut [u64; PAGE_WORDS]) {
        match &self.repr {
            Repr::Dense(words) => acc.iter_mut().zip(words.iter()).for_each(|(a, w)| *a &= w),
            Repr::Sparse(pos) => sparse::and_into(pos, acc),
            Repr::Ewah(stream) => ewah::and_into(stream, acc),
            Repr::Runs(list) => runs::and_into(list, acc),
        }
    }

    /// `acc |= self`.
    pub(crate) fn or_into(&self, acc: &mut [u64; PAGE_WORDS]) {
        match &self.repr {
            Repr::Dense(words) => acc.iter_mut().zip(words.iter()).for_each(|(a, w)| *a |= w),
            Repr::Sparse(pos) => sparse::or_into(pos, acc),
            Repr::Ewah(stream) => ewah::or_into(stream, acc),
            Repr::Runs(list) => runs::or_into(list, acc),
        }
    }

    /// `acc ^= self`.
    pub(crate) fn xor_into(&self, acc: &mut [u64; PAGE_WORDS]) {
        match &self.repr {
            Repr::Dense(words) => acc.iter_mut().zip(words.iter()).for_each(|(a, w)| *a ^= w),
            Repr::Sparse(pos) => sparse::xor_into(pos, acc),
            Repr::Ewah(stream) => ewah::xor_into(stream, acc),
            Repr::Runs(list) => runs::xor_into(list, acc),
        }
    }

    /// `acc &= !self`.
    pub(crate) fn andnot_into(&self, acc: &mut [u64; PAGE_WORDS]) {
        match &self.repr {
            Repr::Dense(words) => acc.iter_mut().zip(words.iter()).for_each(|(a, w)| *a &= !w),
            Repr::Sparse(pos) => sparse::andnot_into(pos, acc),
            Repr::Ewah(stream) => ewah::andnot_into(stream, acc),
            Repr::Runs(list) => runs::andnot_into(list, acc),
        }
    }

    #[cfg(any(test, feature = "testing"))]
    /// `self & other`, in its smallest representation.
    pub(crate) fn and(&self, other: &Page) -> Page {
        if self.is_empty() || other.is_empty() {
            return Page::zeros();
        }
        if self.is_full() {
            return other.compacted_clone();
        }
        if other.is_full() {
            return self.compacted_clone();
        }
        // The shorter list is copied and cut down to the common positions.
        let (list, page) = match (&self.repr, &other.repr) {
            (Repr::Sparse(a), Repr::Sparse(b)) if b.len() < a.len() => (b, self),
            (Repr::Sparse(a), _) => (a, other),
            (_, Repr::Sparse(b)) => (b, self),
            _ => return self.via_words(other, Page::and_into),
        };
        let mut list = list.clone();
        page.retain_set(&mut list);
        Page::sparse(list)
    }

    /// Keeps in `list` (strictly increasing positions below 32,768) the
    /// positions whose bit is set in this page, in place.
    pub(crate) fn retain_set(&self, list: &mut Vec<u16>) {
        match &self.repr {
            _ if self.is_empty() => list.clear(),
            _ if self.is_full() => {}
            Repr::Dense(words) => sparse::retain_in_words(list, words),
            Repr::Sparse(pos) => sparse::retain_common(list, pos),
            Repr::Ewah(stream) => {
                let mut words = [0u64; PAGE_WORDS];
                ewah::to_words(stream, &mut words);
                sparse::retain_in_words(list, &words);
            }
            Repr::Runs(set) => list.retain(|&p| runs::get(set, u32::from(p))),
        }
    }

    /// The number of bits set in both pages, without building their AND:
    /// lists are merged or searched (sparse and run lists against each
    /// other and against words), words are counted word by word, and an
    /// EWAH stream is expanded to words first.
    pub(crate) fn and_count(&self, other: &Page) -> u32 {
        if self.is_empty() || other.is_empty() {
            return 0;
        }
        if self.is_full() {
            return other.count_ones();
        }
        if other.is_full() {
            return self.count_ones();
        }
        match (&self.repr, &other.repr) {
            (Repr::Sparse(a), Repr::Sparse(b)) => sparse::count_common(a, b),
            (Repr::Sparse(list), Repr::Dense(words)) | (Repr::Dense(words), Repr::Sparse(list)) => {
                sparse::count_in_words(list, words)
            }
            (Repr::Sparse(list), Repr::Runs(set)) | (Repr::Runs(set), Repr::Sparse(list)) => {
                runs::count_positions(set, list)
            }
            (Repr::Runs(a), Repr::Runs(b)) => runs::count_common(a, b),
            (Repr::Dense(a), Repr::Dense(b)) => a.iter().zip(b.iter()).map(|(x, y)| (x & y).count_ones()).sum(),
            (Repr::Sparse(list), _) => {
                let mut words = [0u64; PAGE_WORDS];
                other.to_words(&mut words);
                sparse::count_in_words(list, &words)
            }
            (_, Repr::Sparse(list)) => {
                let mut words = [0u64; PAGE_WORDS];
                self.to_words(&mut words);
                sparse::count_in_words(list, &words)
            }
            _ => {
                let mut words = [0u64; PAGE_WORDS];
                self.to_words(&mut words);
                other.and_into(&mut words);
                dense::popcount(&words)
            }
        }
    }

    /// The set positions, if the page holds them as a list.
    pub(crate) fn sparse_positions(&self) -> Option<&[u16]> {
        match &self.repr {
            Repr::Sparse(pos) => Some(pos),
            _ => None,
        }
    }

    #[cfg(any(test, feature = "testing"))]
    /// `self | other`, in its smallest representation.
    pub(crate) fn or(&self, other: &Page) -> Page {
        if self.is_full() || other.is_full() {
            return Page::full();
        }
        if self.is_empty() {
            return other.compacted_clone();
        }
        if other.is_empty() {
            return self.compacted_clone();
        }
        match (&self.repr, &other.repr) {
            (Repr::Sparse(a), Repr::Sparse(b)) => Page::sparse(sparse::merge(a, b, sparse::Keep::OR)),
            _ => self.via_words(other, Page::or_into),
        }
    }

    #[cfg(any(test, feature = "testing"))]
    /// `self ^ other`, in its smallest representation.
    pub(crate) fn xor(&self, other: &Page) -> Page {
        if self.is_empty() {
            return other.compacted_clone();
        }
        if other.is_empty() {
            return self.compacted_clone();
        }
        if self.is_full() {
            return other.not();
        }
        if other.is_full() {
            return self.not();
        }
        match (&self.repr, &other.repr) {
            (Repr::Sparse(a), Repr::Sparse(b)) => Page::sparse(sparse::merge(a, b, sparse::Keep::XOR)),
            _ => self.via_words(other, Page::xor_into),
        }
    }

    #[cfg(any(test, feature = "testing"))]
    /// `self & !other`, in its smallest representation.
    pub(crate) fn andnot(&self, other: &Page) -> Page {
        if self.is_empty() || other.is_full() {
            return Page::zeros();
        }
        if other.is_empty() {
            return self.compacted_clone();
        }
        if self.is_full() {
            return other.not();
        }
        match (&self.repr, &other.repr) {
            (Repr::Sparse(a), Repr::Sparse(b)) => Page::sparse(sparse::merge(a, b, sparse::Keep::ANDNOT)),
            (Repr::Sparse(a), _) => Page::sparse(other.filter(a, false)),
            _ => self.via_words(other, Page::andnot_into),
        }
    }

    /// `!self`, in its smallest representation.
    pub(crate) fn not(&self) -> Page {
        if self.is_empty() {
            return Page::full();
        }
        if self.is_full() {
            return Page::zeros();
        }
        if let Repr::Ewah(stream) = &self.repr {
            Page { repr: Repr::Ewah(ewah::invert(stream)), ones: BITS - self.ones }.compacted()
        } else if let Repr::Runs(list) = &self.repr {
            Page { repr: Repr::Runs(runs::invert(list)), ones: BITS - self.ones }.compacted()
        } else {
            let mut words = [0u64; PAGE_WORDS];
            self.to_words(&mut words);
            for w in &mut words {
                *w = !*w;
            }
            Page::from_words(&words)
        }
    }

    /// Clears every bit at or above `bits`.
    pub(crate) fn truncate(&mut self, bits: u32) {
        if bits >= BITS || self.ones == 0 {
            return;
        }
        match &mut self.repr {
            Repr::Sparse(pos) => {
                truncate_positions(pos, bits);
                self.ones = page_count(pos.len());
            }
            Repr::Dense(words) => {
                dense::truncate(words, bits);
                self.ones = dense::popcount(&words[..]);
                if self.ones < SPARSE_BACK {
                    self.repr = Repr::Sparse(dense::positions(words, self.ones));
                }
            }
            Repr::Ewah(_) => {
                let mut words = [0u64; PAGE_WORDS];
                self.to_words(&mut words);
                dense::truncate(&mut words, bits);
                *self = Page::from_words(&words);
            }
            Repr::Runs(list) => self.ones = runs::truncate(list, bits),
        }
    }

    /// The words of a dense page, for kernels that read several pages at
    /// once ([`fold_dense`]).
    fn dense_words(&self) -> Option<&[u64; PAGE_WORDS]> {
        match &self.repr {
            Repr::Dense(words) => Some(words),
            _ => None,
        }
    }

    #[cfg(any(test, feature = "testing"))]
    /// The current in-memory representation.
    pub(crate) fn encoding(&self) -> Encoding {
        match self.repr {
            Repr::Dense(_) => Encoding::Dense,
            Repr::Sparse(_) => Encoding::Sparse,
            Repr::Ewah(_) => Encoding::Ewah,
            Repr::Runs(_) => Encoding::Runs,
        }
    }

    /// Approximate heap bytes held by the page, for cache budgeting.
    pub(crate) fn heap_bytes(&self) -> usize {
        std::mem::size_of::<Page>()
            + match &self.repr {
                Repr::Dense(_) => std::mem::size_of::<[u64; PAGE_WORDS]>(),
                Repr::Sparse(pos) => pos.capacity() * std::mem::size_of::<u16>(),
                Repr::Ewah(stream) => stream.capacity() * std::mem::size_of::<u64>(),
                Repr::Runs(list) => list.capacity() * std::mem::size_of::<runs::Run>(),
            }
    }

    /// The on-disk bytes of the page in its smallest encoding (ties prefer
    /// sparse, then EWAH, then dense). The bytes depend only on the bits, not
    /// on the in-memory representation.
    ///
    /// Must not be called on an empty page: callers never store one, and its
    /// encoding (popcount 0) does not decode.
    pub(crate) fn encode(&self) -> Vec<u8> {
        debug_assert!(!self.is_empty(), "empty pages are never stored");
        codec::encode_smallest(self)
    }

    /// Decodes and fully validates stored page bytes. The page keeps the
    /// representation stored on disk.
    pub(crate) fn decode(bytes: &[u8]) -> Result<Page, PageError> {
        codec::decode(bytes)
    }

    // ----- helpers beyond the contract -----

    #[cfg(any(test, feature = "testing"))]
    /// The on-disk bytes of the page in the given encoding, whether or not it
    /// is the smallest. [`Page::decode`] accepts all of them; used by tests,
    /// benchmarks and fuzzing.
    pub(crate) fn encode_as(&self, encoding: Encoding) -> Vec<u8> {
        codec::encode_as(self, encoding)
    }

    #[cfg(any(test, feature = "testing"))]
    /// A copy of the page forced into the given in-memory representation (a
    /// canonical EWAH stream for [`Encoding::Ewah`]). Used by tests,
    /// benchmarks and fuzzing to exercise each representation.
    pub(crate) fn with_encoding(&self, encoding: Encoding) -> Page {
        let repr = match encoding {
            Encoding::Sparse => Repr::Sparse(self.positions()),
            Encoding::Dense => {
                let mut words = Box::new([0u64; PAGE_WORDS]);
                self.to_words(&mut words);
                Repr::Dense(words)
            }
            Encoding::Ewah => {
                let mut words = [0u64; PAGE_WORDS];
                self.to_words(&mut words);
                Repr::Ewah(ewah::encode(&words))
            }
            Encoding::Runs => Repr::Runs(runs::from_positions(&self.positions())),
        };
        Page { repr, ones: self.ones }
    }

    #[cfg(any(test, feature = "testing"))]
    /// The encoding [`Page::encode`] would choose.
    pub(crate) fn smallest_encoding(&self) -> Encoding {
        let mut words = [0u64; PAGE_WORDS];
        self.to_words(&mut words);
        smallest(self.ones, runs::count(&words), ewah::stream_len(&words))
    }

    /// All set positions, ascending.
    fn positions(&self) -> Vec<u16> {
        match &self.repr {
            Repr::Sparse(pos) => pos.clone(),
            Repr::Dense(words) => dense::positions(words, self.ones),
            Repr::Ewah(stream) => {
                let mut out = Vec::with_capacity(self.ones as usize);
                out.extend(ewah::ones_in(stream, 0, BITS).map(position));
                out
            }
            Repr::Runs(list) => runs::ones_in(list, 0, BITS).map(position).collect(),
        }
    }

    /// A sparse page from a computed position list, then made smallest.
    fn sparse(positions: Vec<u16>) -> Page {
        Page { ones: page_count(positions.len()), repr: Repr::Sparse(positions) }.compacted()
    }

    /// The page converted to its smallest representation.
    fn compacted(self) -> Page {
        match &self.repr {
            // Four positions (16 bytes) never lose to one EWAH marker plus a
            // literal, nor to runs unless they form fewer than half as many
            // runs; skip the word pass for tiny lists.
            Repr::Sparse(pos) if pos.len() <= 4 && 2 * runs::in_positions(pos) >= pos.len() => self,
            // A list that stays smallest as a list is decided from the list:
            // EWAH needs a literal per word the positions touch without
            // filling it, plus a marker.
            Repr::Sparse(pos) if sparse_stays(pos) => self,
            Repr::Ewah(stream) if self.ones > 0 && ewah::is_canonical(stream) => {
                let mut words = [0u64; PAGE_WORDS];
                ewah::to_words(stream, &mut words);
                if smallest(self.ones, runs::count(&words), stream.len()) == Encoding::Ewah {
                    self
                } else {
                    Page::from_words(&words)
                }
            }
            Repr::Runs(list) if self.ones > 0 => {
                // A run list is smallest unless sparse or dense beat it, or
                // EWAH does, whose stream has at least a word per 32 runs
                // (a word holds the starts of at most 32 runs).
                let ewah_floor = encoded_len(Encoding::Ewah, list.len().div_ceil(32));
                let listed = smallest_listed(self.ones, page_count(list.len()));
                if listed.0 == Encoding::Runs && ewah_floor >= listed.1 {
                    self
                } else {
                    self.compacted_clone()
                }
            }
            _ => self.compacted_clone(),
        }
    }

    /// A copy of the page in its smallest representation.
    fn compacted_clone(&self) -> Page {
        let mut words = [0u64; PAGE_WORDS];
        self.to_words(&mut words);
        Page::from_words(&words)
    }

    #[cfg(any(test, feature = "testing"))]
    /// The positions of `list` whose bit in `self` equals `keep`.
    fn filter(&self, list: &[u16], keep: bool) -> Vec<u16> {
        match &self.repr {
            Repr::Dense(words) => sparse::filter_words(list, words, keep),
            Repr::Sparse(pos) => {
                let k = if keep { sparse::Keep::AND } else { sparse::Keep::ANDNOT };
                sparse::merge(list, pos, k)
            }
            Repr::Ewah(_) | Repr::Runs(_) => {
                let mut words = [0u64; PAGE_WORDS];
                self.to_words(&mut words);
                sparse::filter_words(list, &words, keep)
            }
        }
    }

    #[cfg(any(test, feature = "testing"))]
    /// `op(other)` applied to the words of `self`, made smallest.
    fn via_words(&self, other: &Page, op: fn(&Page, &mut [u64; PAGE_WORDS])) -> Page {
        let mut words = [0u64; PAGE_WORDS];
        self.to_words(&mut words);
        op(other, &mut words);
        Page::from_words(&words)
    }
}

/// Reads a stored page's header without decoding the body.
///
/// Validates the length, version, encoding byte, popcount range and checksum;
/// returns the encoding and the popcount.
pub(crate) fn peek_header(bytes: &[u8]) -> Result<(Encoding, u32), PageError> {
    codec::split(bytes).map(|parts| (parts.encoding, parts.popcount))
}
