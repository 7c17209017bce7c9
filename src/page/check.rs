//! Model-based checks of [`Page`], shared by the unit tests, the property
//! tests, `crate::testing` and the fuzz targets.
//!
//! The reference model of a page is its plain `[u64; 512]` words, queried bit
//! by bit. Every check panics with a message naming the broken invariant and
//! the representations involved: that is the point when fuzzing.

use super::{dense, ewah, Encoding, Page, Repr, BITS, SPARSE_BACK, SPARSE_MAX};
use crate::geometry::{page_bit, page_count, position, word_mask, PAGE_WORDS};

/// Replaces the last four bytes of `bytes` (at least 8 long) by the CRC-32 of
/// the rest, as the trailer of every record format, so that random input
/// also reaches the checks behind the checksum.
pub fn reseal(bytes: &mut Vec<u8>) {
    if bytes.len() < 4 {
        return;
    }
    bytes.truncate(bytes.len() - 4);
    let crc = crc32fast::hash(bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
}

/// The model of a page: its 512 words.
pub(crate) type Words = [u64; PAGE_WORDS];

/// Bit `bit` of the model.
pub(crate) fn model_get(m: &Words, bit: u32) -> bool {
    let (w, mask) = word_mask(bit);
    m[w] & mask != 0
}

/// Sets bit `bit` of the model.
pub(crate) fn model_set(m: &mut Words, bit: u32, value: bool) {
    let (w, mask) = word_mask(bit);
    if value {
        m[w] |= mask;
    } else {
        m[w] &= !mask;
    }
}

/// Set positions of the model, bit by bit.
pub(crate) fn model_positions(m: &Words) -> Vec<u16> {
    (0..BITS).filter(|&b| model_get(m, b)).map(position).collect()
}

/// Model built from positions (any order, duplicates allowed, taken mod 32,768).
pub(crate) fn model_from_positions(pos: &[u16]) -> Box<Words> {
    let mut m = Box::new([0u64; PAGE_WORDS]);
    for &p in pos {
        model_set(&mut m, u32::from(p) % BITS, true);
    }
    m
}

/// Redis bytes of the model.
pub(crate) fn model_bytes(m: &Words) -> Vec<u8> {
    m.iter().flat_map(|w| w.to_be_bytes()).collect()
}

fn naive_count(m: &Words, from: u32, to: u32) -> u32 {
    page_count((from..to.min(BITS)).filter(|&b| model_get(m, b)).count())
}

fn naive_find(m: &Words, value: bool, from: u32, to: u32) -> Option<u32> {
    (from..to.min(BITS)).find(|&b| model_get(m, b) == value)
}

fn naive_ones(m: &Words, from: u32, to: u32) -> Vec<u32> {
    (from..to.min(BITS)).filter(|&b| model_get(m, b)).collect()
}

/// The words of `page`.
pub(crate) fn page_words(page: &Page) -> Box<Words> {
    let mut w = Box::new([0u64; PAGE_WORDS]);
    page.to_words(&mut w);
    w
}

/// Checks the internal invariants of a page: cached popcount, valid sparse
/// list, valid EWAH stream.
pub(crate) fn check_invariants(page: &Page, ctx: &str) {
    let words = page_words(page);
    let ones = dense::popcount(&words[..]);
    assert_eq!(page.ones, ones, "{ctx}: cached popcount equals the bits");
    match &page.repr {
        Repr::Sparse(pos) => {
            assert!(super::sparse::is_valid(pos), "{ctx}: sparse positions strictly increasing and in range");
        }
        Repr::Ewah(stream) => {
            assert_eq!(ewah::validate(stream), Ok(ones), "{ctx}: in-memory EWAH stream is valid");
        }
        Repr::Runs(list) => {
            assert_eq!(super::runs::validate(list), Ok(ones), "{ctx}: in-memory run list is valid and maximal");
        }
        Repr::Dense(_) => {}
    }
}

/// Checks that a freshly computed page is in its smallest representation.
pub(crate) fn check_compact(page: &Page, ctx: &str) {
    if page.is_empty() {
        assert_eq!(page.encoding(), Encoding::Sparse, "{ctx}: empty page is sparse");
    } else {
        assert_eq!(page.encoding(), page.smallest_encoding(), "{ctx}: computed page takes the smallest encoding");
    }
}

/// Query ranges derived from probe bits: consecutive pairs both ways, plus
/// the whole page and a few edges.
fn ranges(probes: &[u32]) -> Vec<(u32, u32)> {
    let mut out = vec![(0, BITS), (1, BITS), (0, BITS - 1), (0, 0), (0, 1), (BITS - 1, BITS), (63, 65), (64, 128)];
    for pair in probes.windows(2).take(12) {
        out.push((pair[0], pair[1]));
        out.push((pair[1], pair[0]));
        out.push((pair[0], pair[0].saturating_add(1)));
    }
    out
}

/// Checks every single-page operation of `page` against `model`, using
/// `probes` (bits, any values; clamped) to choose query points.
pub(crate) fn check_page(page: &Page, model: &Words, probes: &[u32], ctx: &str) {
    let ctx = format!("{ctx} [{}]", page.encoding().name());
    let ctx = ctx.as_str();
    check_invariants(page, ctx);
    let probes: Vec<u32> = probes.iter().map(|&p| p.min(BITS)).collect();
    let bit_probes: Vec<u32> =
        probes.iter().map(|&p| p.min(BITS - 1)).chain([0, 1, 63, 64, 65, 32_703, 32_704, BITS - 1]).collect();

    // Bits.
    assert!(*page_words(page) == *model, "{ctx}: to_words equals the model");
    let ones = dense::popcount(model);
    assert_eq!(page.count_ones(), ones, "{ctx}: count_ones equals the model popcount");
    assert_eq!(page.is_empty(), ones == 0, "{ctx}: is_empty iff popcount 0");
    assert_eq!(page.is_full(), ones == BITS, "{ctx}: is_full iff popcount 32768");
    let every_bit = match &page.repr {
        Repr::Ewah(s) => s.len() <= 64,
        _ => true,
    };
    let step = if every_bit { 1 } else { 97 };
    for b in (0..BITS).step_by(step).chain(bit_probes.iter().copied()) {
        assert_eq!(page.get(b), model_get(model, b), "{ctx}: get({b}) equals the model");
    }

    // Range queries.
    for (from, to) in ranges(&probes) {
        assert_eq!(
            page.count_range(from, to),
            naive_count(model, from, to),
            "{ctx}: count_range({from}, {to}) equals the model"
        );
        for value in [true, false] {
            assert_eq!(
                page.find(value, from, to),
                naive_find(model, value, from, to),
                "{ctx}: find({value}, {from}, {to}) equals the model"
            );
        }
        assert_eq!(
            page.ones_in(from, to).collect::<Vec<_>>(),
            naive_ones(model, from, to),
            "{ctx}: ones_in({from}, {to}) equals the model"
        );
    }

    // Redis bytes both ways.
    let bytes = model_bytes(model);
    let lens = [0usize, 1, 7, 8, 9, 513, 4095, 4096].into_iter().chain(probes.iter().map(|&p| (p / 8) as usize));
    for len in lens {
        let mut out = vec![0xA5u8; len];
        page.write_bytes(&mut out);
        assert!(out == bytes[..len], "{ctx}: write_bytes of {len} bytes equals the model bytes");
        let back = Page::from_bytes(&bytes[..len]);
        let mut expect = [0u64; PAGE_WORDS];
        for (i, &byte) in bytes[..len].iter().enumerate() {
            for bit in 0..8u32 {
                if byte & (0x80 >> bit) != 0 {
                    model_set(&mut expect, page_bit(i as u64 * 8 + u64::from(bit)), true);
                }
            }
        }
        assert!(*page_words(&back) == expect, "{ctx}: from_bytes of a {len}-byte prefix zero-pads");
        check_compact(&back, &format!("{ctx}: from_bytes({len})"));
    }
    let mut long = bytes.clone();
    long.extend_from_slice(&[0xFF; 9]);
    assert!(Page::from_bytes(&long) == *page, "{ctx}: from_bytes uses only 4096 bytes");

    // Codec.
    if ones > 0 {
        check_codec(page, ctx);
    }

    // Complement.
    let not = page.not();
    let mut expect = *model;
    for w in &mut expect {
        *w = !*w;
    }
    assert!(*page_words(&not) == expect, "{ctx}: not() complements every bit");
    check_invariants(&not, ctx);
    check_compact(&not, &format!("{ctx}: not()"));

    // Truncate.
    for &cut in probes.iter().chain(&[0, 1, 64, BITS - 1, BITS]) {
        let mut t = page.clone();
        t.truncate(cut);
        let mut expect = *model;
        for b in cut..BITS {
            model_set(&mut expect, b, false);
        }
        assert!(*page_words(&t) == expect, "{ctx}: truncate({cut}) clears bits >= {cut}");
        check_invariants(&t, ctx);
    }

    // Set, alternating values over the probes, then back.
    let mut p = page.clone();
    let mut expect = *model;
    for (i, &b) in bit_probes.iter().enumerate() {
        for value in [i % 2 == 0, i % 3 == 0] {
            let before = p.encoding();
            let old = p.set(b, value);
            assert_eq!(old, model_get(&expect, b), "{ctx}: set({b}, {value}) returns the old bit");
            model_set(&mut expect, b, value);
            assert_eq!(p.get(b), value, "{ctx}: get after set({b}, {value})");
            check_set_repr(&p, before, old, value, ctx);
        }
    }
    assert!(*page_words(&p) == expect, "{ctx}: bits after a series of set() equal the model");
    check_invariants(&p, ctx);
}

/// Hysteresis invariants after one `set`.
fn check_set_repr(p: &Page, before: Encoding, old: bool, value: bool, ctx: &str) {
    match p.encoding() {
        Encoding::Ewah | Encoding::Runs => panic!("{ctx}: set() leaves no EWAH or run-list page"),
        Encoding::Sparse => {
            if before != Encoding::Sparse || (value && !old) {
                assert!(p.ones <= SPARSE_MAX, "{ctx}: a sparse page after set holds at most SPARSE_MAX bits");
            }
        }
        Encoding::Dense => {
            if before == Encoding::Dense && old && !value {
                assert!(p.ones >= SPARSE_BACK, "{ctx}: a dense page that clears a bit keeps >= SPARSE_BACK bits");
            }
        }
    }
}

/// Encode/decode round trips of a non-empty page.
pub(crate) fn check_codec(page: &Page, ctx: &str) {
    let bytes = page.encode();
    let decoded = Page::decode(&bytes).unwrap_or_else(|e| panic!("{ctx}: decode(encode(p)) succeeds, got {e}"));
    assert!(decoded == *page, "{ctx}: decode(encode(p)) == p");
    assert!(*page_words(&decoded) == *page_words(page), "{ctx}: decode(encode(p)) has the same bits");
    check_invariants(&decoded, ctx);
    let best = page.smallest_encoding();
    assert_eq!(decoded.encoding(), best, "{ctx}: encode uses the smallest encoding");
    assert_eq!(super::peek_header(&bytes), Ok((best, page.ones)), "{ctx}: peek_header reports encoding and popcount");
    assert_eq!(decoded.encode(), bytes, "{ctx}: re-encoding is stable");
    for enc in Encoding::ALL {
        let forced = page.with_encoding(enc);
        assert_eq!(forced.encoding(), enc, "{ctx}: with_encoding({enc:?})");
        assert!(forced.encode() == bytes, "{ctx}: encode depends only on the bits ({enc:?})");
        let as_bytes = page.encode_as(enc);
        assert!(
            as_bytes.len() > bytes.len()
                || (as_bytes.len() == bytes.len()
                    && Encoding::ALL.iter().position(|&e| e == enc)
                        >= Encoding::ALL.iter().position(|&e| e == best)),
            "{ctx}: {enc:?} ({} bytes) is not smaller than the chosen {best:?} ({} bytes), ties prefer sparse, runs, ewah, dense",
            as_bytes.len(),
            bytes.len()
        );
        let back =
            Page::decode(&as_bytes).unwrap_or_else(|e| panic!("{ctx}: decode(encode_as({enc:?})) succeeds, got {e}"));
        assert_eq!(back.encoding(), enc, "{ctx}: decode keeps the stored encoding {enc:?}");
        assert!(back == *page, "{ctx}: decode(encode_as({enc:?})) == p");
    }
}

/// Checks the binary operations of `a` and `b` against their models.
pub(crate) fn check_binary(a: &Page, b: &Page, ma: &Words, mb: &Words, ctx: &str) {
    let ctx = format!("{ctx} [{} op {}]", a.encoding().name(), b.encoding().name());
    let ctx = ctx.as_str();
    type Op = (&'static str, fn(&Page, &Page) -> Page, fn(u64, u64) -> u64);
    let ops: [Op; 4] = [
        ("and", Page::and, |x, y| x & y),
        ("or", Page::or, |x, y| x | y),
        ("xor", Page::xor, |x, y| x ^ y),
        ("andnot", Page::andnot, |x, y| x & !y),
    ];
    let common: u32 = ma.iter().zip(mb.iter()).map(|(x, y)| (x & y).count_ones()).sum();
    assert_eq!(a.and_count(b), common, "{ctx}: and_count equals the model's");
    for (name, op, f) in ops {
        let r = op(a, b);
        let mut expect = [0u64; PAGE_WORDS];
        for i in 0..PAGE_WORDS {
            expect[i] = f(ma[i], mb[i]);
        }
        assert!(*page_words(&r) == expect, "{ctx}: {name} equals the model");
        check_invariants(&r, &format!("{ctx}: {name}"));
        check_compact(&r, &format!("{ctx}: {name}"));
    }
    type IntoOp = (&'static str, fn(&Page, &mut Words), fn(u64, u64) -> u64);
    let into: [IntoOp; 4] = [
        ("and_into", Page::and_into, |acc, x| acc & x),
        ("or_into", Page::or_into, |acc, x| acc | x),
        ("xor_into", Page::xor_into, |acc, x| acc ^ x),
        ("andnot_into", Page::andnot_into, |acc, x| acc & !x),
    ];
    for (name, op, f) in into {
        let mut acc = *ma;
        op(b, &mut acc);
        let mut expect = [0u64; PAGE_WORDS];
        for i in 0..PAGE_WORDS {
            expect[i] = f(ma[i], mb[i]);
        }
        assert!(acc == expect, "{ctx}: {name} (acc = a, page = b) equals the model");
    }
    let mut list = model_positions(ma);
    b.retain_set(&mut list);
    let expect: Vec<u16> = model_positions(ma).into_iter().filter(|&p| b.get(u32::from(p))).collect();
    assert_eq!(list, expect, "{ctx}: retain_set (list = a's positions, page = b) keeps those set in b");
    assert_eq!(a == b, ma == mb, "{ctx}: Page equality compares bits");
}

/// Runs [`check_page`] on `ma` in every representation and [`check_binary`]
/// on every pair of representations of `ma` and `mb`.
pub(crate) fn check_all(ma: &Words, mb: &Words, probes: &[u32], ctx: &str) {
    let a = Page::from_words(ma);
    let b = Page::from_words(mb);
    check_compact(&a, &format!("{ctx}: from_words"));
    let positions = model_positions(ma);
    assert!(Page::from_positions(&positions) == a, "{ctx}: from_positions equals from_words");
    check_compact(&Page::from_positions(&positions), &format!("{ctx}: from_positions"));
    for ea in Encoding::ALL {
        let pa = a.with_encoding(ea);
        check_page(&pa, ma, probes, ctx);
        for eb in Encoding::ALL {
            check_binary(&pa, &b.with_encoding(eb), ma, mb, ctx);
        }
    }
    for special in [Page::zeros(), Page::full()] {
        let ms = page_words(&special);
        check_binary(&a, &special, ma, &ms, ctx);
        check_binary(&special, &a, &ms, ma, ctx);
    }
}
