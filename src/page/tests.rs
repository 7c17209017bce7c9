//! Unit and property tests of the page codecs. Each test states the invariant
//! it checks; the model checks live in [`super::check`].

use proptest::collection::vec;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::check::{
    check_all, check_codec, check_compact, check_invariants, check_page, model_from_positions, model_positions,
    model_set, page_words, Words,
};
use super::*;

const DENSITIES: [f64; 8] = [1e-6, 1e-5, 1e-3, 0.01, 0.1, 0.5, 0.9, 1.0];

/// A model with each bit set with probability `density`.
fn random_model(rng: &mut StdRng, density: f64) -> Box<Words> {
    let mut m = Box::new([0u64; PAGE_WORDS]);
    for b in 0..BITS {
        if rng.gen_bool(density) {
            model_set(&mut m, b, true);
        }
    }
    m
}

/// Models of named shapes used across the tests.
fn shapes() -> Vec<(&'static str, Box<Words>)> {
    let mut out: Vec<(&'static str, Box<Words>)> = Vec::new();
    let mut runs = Box::new([0u64; PAGE_WORDS]);
    runs[10..200].fill(u64::MAX);
    runs[300] = 0x0123_4567_89AB_CDEF;
    runs[301..400].fill(u64::MAX);
    runs[400] = 1;
    out.push(("long runs", runs));
    let mut alt_words = Box::new([0u64; PAGE_WORDS]);
    for (i, w) in alt_words.iter_mut().enumerate() {
        *w = if i % 2 == 0 { u64::MAX } else { 0 };
    }
    out.push(("alternating words", alt_words));
    out.push(("alternating bits", Box::new([0xAAAA_AAAA_AAAA_AAAA; PAGE_WORDS])));
    out.push(("bit 0", model_from_positions(&[0])));
    out.push(("bit 32767", model_from_positions(&[32_767])));
    out.push(("bits 0 and 32767", model_from_positions(&[0, 32_767])));
    out.push(("full", Box::new([u64::MAX; PAGE_WORDS])));
    out.push(("full but bit 5", {
        let mut m = Box::new([u64::MAX; PAGE_WORDS]);
        model_set(&mut m, 5, false);
        m
    }));
    out
}

/// A model with exactly `n` set bits spread over the page (every 7th bit
/// wrapping, so no word is full and the result is not run-friendly).
fn spread(n: u32) -> Box<Words> {
    let mut m = Box::new([0u64; PAGE_WORDS]);
    let mut b = 0u32;
    for _ in 0..n {
        while super::check::model_get(&m, b) {
            b = (b + 1) % BITS;
        }
        model_set(&mut m, b, true);
        b = (b + 16) % BITS;
    }
    m
}

/// decode(encode(p)) == p with the same bits and the smallest encoding, at
/// every density, for every in-memory representation. Seeds are printed.
#[test]
fn round_trip_at_densities() {
    for (i, &density) in DENSITIES.iter().enumerate() {
        for round in 0..3u64 {
            let seed = 0x5EED_0000 + i as u64 * 16 + round;
            let mut rng = StdRng::seed_from_u64(seed);
            let m = random_model(&mut rng, density);
            let ctx = format!("density {density} seed {seed:#x}");
            let page = Page::from_words(&m);
            assert!(*page_words(&page) == *m, "{ctx}: from_words keeps the bits");
            check_compact(&page, &ctx);
            if page.is_empty() {
                continue;
            }
            for enc in Encoding::ALL {
                check_codec(&page.with_encoding(enc), &ctx);
            }
        }
    }
}

/// The empty page is sparse and never encodable: its bytes (popcount 0) are
/// rejected, so callers must not store it.
#[test]
fn empty_page_is_in_memory_only() {
    let z = Page::zeros();
    assert!(z.is_empty());
    assert_eq!(z.encoding(), Encoding::Sparse);
    assert_eq!(z.count_ones(), 0);
    assert_eq!(z.find(true, 0, BITS), None);
    assert_eq!(z.find(false, 0, BITS), Some(0));
    assert_eq!(Page::from_words(&[0; PAGE_WORDS]), z);
    for enc in Encoding::ALL {
        let err = Page::decode(&z.encode_as(enc)).unwrap_err();
        assert!(err.0.contains("popcount 0"), "{enc:?}: {err}");
    }
}

/// The full page is one run and encodes to 12 bytes (header, one run,
/// checksum), 4 fewer than one EWAH marker.
#[test]
fn full_page_is_one_run() {
    let f = Page::full();
    assert!(f.is_full());
    assert_eq!(f.encoding(), Encoding::Runs);
    assert!(matches!(&f.repr, Repr::Runs(r) if r[..] == [[0, 32_767]]));
    let bytes = f.encode();
    assert_eq!(bytes.len(), encoded_len(Encoding::Runs, 1));
    assert_eq!(bytes.len(), 12);
    assert_eq!(f.encode_as(Encoding::Ewah).len(), 16);
    assert_eq!(Page::from_words(&[u64::MAX; PAGE_WORDS]).encode(), bytes);
    assert_eq!(Page::decode(&bytes).unwrap(), f);
}

/// Named shapes (runs, alternating words/bits, edge bits, full) satisfy every
/// model check in every representation.
#[test]
fn shapes_match_model() {
    let shapes = shapes();
    for (name, m) in &shapes {
        for (other, mb) in &shapes {
            check_all(m, mb, &[0, 5, 64, 640, 12_800, 32_767], &format!("{name} / {other}"));
        }
    }
}

/// Pages at the sparse/dense threshold (2047, 2048, 2049 bits) choose sparse
/// up to 2048 bits and dense above, and round trip.
#[test]
fn threshold_pages_pick_expected_encoding() {
    for (n, expect) in [(2047, Encoding::Sparse), (2048, Encoding::Sparse), (2049, Encoding::Dense)] {
        let m = spread(n);
        let p = Page::from_words(&m);
        assert_eq!(p.count_ones(), n);
        assert_eq!(p.encoding(), expect, "{n} spread bits");
        let bytes = p.encode();
        assert_eq!(bytes.len(), encoded_len(expect, if n > 2048 { 512 } else { n as usize }));
        assert_eq!(Page::decode(&bytes).unwrap(), p, "{n} bits round trip");
        check_page(&p, &m, &[0, 100, 2047, 2048, 2049, 32_767], &format!("{n} bits"));
    }
}

/// Hysteresis: a sparse page converts to dense only above SPARSE_MAX set bits;
/// a dense page converts back only below SPARSE_BACK.
#[test]
fn set_hysteresis() {
    let mut p = Page::zeros();
    let mut m = [0u64; PAGE_WORDS];
    let mut b = 0u32;
    for _ in 0..SPARSE_MAX {
        assert!(!p.set(b, true));
        model_set(&mut m, b, true);
        b += 3;
    }
    assert_eq!(p.encoding(), Encoding::Sparse, "SPARSE_MAX bits stay sparse");
    assert!(!p.set(b, true));
    model_set(&mut m, b, true);
    assert_eq!(p.encoding(), Encoding::Dense, "SPARSE_MAX + 1 bits become dense");
    // Clear down to SPARSE_BACK: still dense.
    let mut cleared = 0;
    let mut c = 0u32;
    while p.count_ones() > SPARSE_BACK {
        if p.set(c, false) {
            model_set(&mut m, c, false);
            cleared += 1;
        }
        c += 1;
        assert_eq!(p.encoding(), Encoding::Dense, "dense while >= SPARSE_BACK ({cleared})");
    }
    // One more clear drops below SPARSE_BACK.
    while p.count_ones() == SPARSE_BACK {
        if p.set(c, false) {
            model_set(&mut m, c, false);
        }
        c += 1;
    }
    assert_eq!(p.encoding(), Encoding::Sparse, "below SPARSE_BACK becomes sparse");
    assert!(*page_words(&p) == m, "bits follow the model through conversions");
    check_invariants(&p, "hysteresis");
}

/// set() on an EWAH page converts it to sparse or dense by its popcount, and
/// returns the old bit.
#[test]
fn set_on_ewah_converts() {
    // 30 full words, then a word of 32 one-bit runs: EWAH is smallest.
    let mut runs = [0u64; PAGE_WORDS];
    runs[..30].fill(u64::MAX);
    runs[30] = 0xAAAA_AAAA_AAAA_AAAA;
    let mut small = Page::from_words(&runs);
    assert_eq!(small.encoding(), Encoding::Ewah);
    assert!(small.set(3, true));
    assert_eq!(small.encoding(), Encoding::Sparse);
    let mut big = Page::full();
    assert!(big.set(7, false));
    assert_eq!(big.encoding(), Encoding::Dense);
    assert_eq!(big.count_ones(), BITS - 1);
    assert!(!big.get(7));
}

/// Equality compares bits, not representations.
#[test]
fn equality_ignores_representation() {
    let m = spread(700);
    let p = Page::from_words(&m);
    for a in Encoding::ALL {
        for b in Encoding::ALL {
            assert_eq!(p.with_encoding(a), p.with_encoding(b), "{a:?} vs {b:?}");
        }
    }
    let mut q = p.clone();
    q.set(1, !q.get(1));
    for a in Encoding::ALL {
        assert_ne!(p.with_encoding(a), q, "{a:?} differs by one bit");
    }
}

/// heap_bytes grows with the representation's size.
#[test]
fn heap_bytes_tracks_representation() {
    let sparse = Page::from_positions(&[1, 2, 3]);
    let dense = sparse.with_encoding(Encoding::Dense);
    assert!(sparse.heap_bytes() < 100);
    assert!(dense.heap_bytes() >= 4096);
    assert!(Page::full().heap_bytes() < 100);
}

/// The greedy encoder's output is canonical, valid, and inversion keeps it so.
#[test]
fn ewah_encoder_is_canonical() {
    let mut rng = StdRng::seed_from_u64(0xE3A4);
    for (name, m) in shapes() {
        let s = ewah::encode(&m);
        assert!(ewah::is_canonical(&s), "{name}");
        assert!(ewah::is_canonical(&ewah::invert(&s)), "{name} inverted");
        assert_eq!(ewah::stream_len(&m), s.len(), "{name}");
    }
    for _ in 0..50 {
        let mut m = [0u64; PAGE_WORDS];
        for w in &mut m {
            *w = match rng.gen_range(0..4) {
                0 => 0,
                1 => u64::MAX,
                _ => rng.gen(),
            };
        }
        let s = ewah::encode(&m);
        assert!(ewah::is_canonical(&s));
        assert!(ewah::is_canonical(&ewah::invert(&s)));
        let mut back = [0u64; PAGE_WORDS];
        ewah::to_words(&s, &mut back);
        assert_eq!(back, m);
    }
}

// ----- decoding invalid input -----

/// Builds page bytes with a correct checksum over arbitrary header and body.
fn seal(version: u8, encoding: u8, popcount: u16, body: &[u8]) -> Vec<u8> {
    let mut out = vec![version, encoding];
    out.extend_from_slice(&popcount.to_le_bytes());
    out.extend_from_slice(body);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn words_body(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

fn decode_err(bytes: &[u8]) -> String {
    match Page::decode(bytes) {
        Ok(p) => panic!("decoded invalid bytes to {p:?}"),
        Err(e) => e.0,
    }
}

fn sample_encodings() -> Vec<Vec<u8>> {
    let mut runs = [0u64; PAGE_WORDS];
    runs[3..9].fill(u64::MAX);
    runs[9] = 0xF0F0;
    vec![
        Page::from_positions(&[0, 9, 32_767]).encode(),
        Page::from_words(&[0x5555_5555_5555_5555; PAGE_WORDS]).encode(),
        Page::from_words(&runs).encode(),
        Page::full().encode(),
    ]
}

/// Every single-byte change of a stored page is rejected (the CRC covers
/// every byte, and the trailer itself is compared).
#[test]
fn every_byte_flip_is_rejected() {
    for bytes in sample_encodings() {
        for i in 0..bytes.len() {
            for flip in [0x01u8, 0x80, 0xFF] {
                let mut b = bytes.clone();
                b[i] ^= flip;
                assert!(Page::decode(&b).is_err(), "flip {flip:#x} at byte {i} of {} bytes", bytes.len());
                if i >= 1 {
                    assert!(peek_header(&b).is_err(), "peek_header: flip at {i}");
                }
            }
        }
    }
}

/// Every truncation and every extension of a stored page is rejected.
#[test]
fn truncated_or_extended_pages_are_rejected() {
    for bytes in sample_encodings() {
        for len in 0..bytes.len() {
            assert!(Page::decode(&bytes[..len]).is_err(), "prefix of {len} bytes");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(Page::decode(&longer).is_err(), "one extra byte");
    }
    assert_eq!(decode_err(&[1, 1, 1, 0, 0]), "truncated: 5 bytes, header and checksum need 8");
}

/// Header fields are validated with specific messages (checksum first,
/// then encoding, popcount and length).
#[test]
fn header_errors_are_specific() {
    let good = Page::from_positions(&[1, 3, 5]).encode();
    let mut bad_crc = good.clone();
    let n = bad_crc.len();
    bad_crc[n - 1] ^= 0x10;
    assert!(decode_err(&bad_crc).starts_with("checksum mismatch: stored 0x"));
    assert!(decode_err(&seal(7, 1, 1, &[0, 0])).starts_with("unsupported page format version 7"));
    assert_eq!(decode_err(&seal(1, 3, 1, &[0, 0, 0, 0])), "run list (encoding byte 3) in a format version 1 record");
    assert_eq!(decode_err(&seal(2, 4, 1, &[0, 0])), "unknown page encoding byte 4");
    assert!(decode_err(&seal(2, 3, 1, &[0, 0])).starts_with("runs page body is 2 bytes"));
    // Runs [5, 6] and [7, 7] touch: not maximal.
    assert!(
        decode_err(&seal(2, 3, 3, &[5, 0, 1, 0, 7, 0, 0, 0])).starts_with("run 1 starts at 7, not after a clear bit")
    );
    assert!(decode_err(&seal(2, 3, 2, &[0xff, 0x7f, 1, 0])).starts_with("run 0 ends at 32768, outside the page"));
    assert!(decode_err(&seal(2, 3, 3, &[5, 0, 1, 0])).starts_with("popcount mismatch: header says 3, runs body has 2"));
    assert!(decode_err(&seal(1, 1, 0, &[])).starts_with("popcount 0"));
    assert!(decode_err(&seal(1, 0, 40_000, &[0; 4096])).contains("exceeds"));
    assert!(decode_err(&seal(1, 0, 1, &[0; 4095])).starts_with("dense page body is 4095 bytes"));
    assert!(decode_err(&seal(1, 1, 2, &[0, 0])).starts_with("sparse page body is 2 bytes, expected 4"));
    assert!(decode_err(&seal(1, 2, 1, &[0; 12])).contains("multiple of 8"));
    assert!(decode_err(&seal(1, 2, 1, &[])).contains("non-zero multiple of 8"));
    assert_eq!(peek_header(&good), Ok((Encoding::Sparse, 3)));
    assert!(peek_header(&bad_crc).is_err());
}

/// Body structure is validated: popcount, sparse order and range, EWAH
/// coverage and literal presence.
#[test]
fn body_errors_are_specific() {
    // Dense popcount mismatch.
    let mut words = [0u64; PAGE_WORDS];
    words[0] = 0b111;
    let body = words_body(&words);
    assert_eq!(decode_err(&seal(1, 0, 2, &body)), "popcount mismatch: header says 2, dense body has 3 set bits");
    assert!(Page::decode(&seal(1, 0, 3, &body)).is_ok(), "a valid dense page decodes");
    // Sparse order and range.
    let pos = |p: &[u16]| -> Vec<u8> { p.iter().flat_map(|x| x.to_le_bytes()).collect() };
    assert_eq!(
        decode_err(&seal(1, 1, 4, &pos(&[1, 2, 9, 9]))),
        "sparse positions not increasing at index 3: 9 after 9"
    );
    assert_eq!(decode_err(&seal(1, 1, 2, &pos(&[5, 4]))), "sparse positions not increasing at index 1: 4 after 5");
    assert!(decode_err(&seal(1, 1, 1, &pos(&[32_768]))).contains("outside the page"));
    // EWAH coverage.
    let m = |bit: bool, run: usize, lits: usize| ewah::marker(bit, run, lits);
    assert!(decode_err(&seal(1, 2, 1, &words_body(&[m(true, 513, 0)])))
        .starts_with("ewah words cover 513 words, expected 512"));
    assert!(decode_err(&seal(1, 2, 1, &words_body(&[m(true, 511, 0)])))
        .starts_with("ewah words cover 511 words, expected 512"));
    assert!(decode_err(&seal(1, 2, 1, &words_body(&[m(false, 510, 2), 1])))
        .contains("announces 2 literal words, only 1 present"));
    // Huge fields do not overflow.
    assert!(decode_err(&seal(1, 2, 1, &words_body(&[u64::MAX]))).contains("cover"));
    // EWAH popcount mismatch.
    assert!(decode_err(&seal(1, 2, 5, &words_body(&[m(false, 511, 1), 1])))
        .starts_with("popcount mismatch: header says 5, ewah body has 1"));
}

/// The decoder accepts any valid EWAH stream, canonical or not: empty runs,
/// markers without literals, clean literal words, split runs.
#[test]
fn decoder_accepts_non_canonical_ewah() {
    let m = |bit: bool, run: usize, lits: usize| ewah::marker(bit, run, lits);
    let stream = [
        m(true, 0, 0),
        m(false, 3, 0),
        m(false, 2, 2),
        u64::MAX,
        0x8000_0000_0000_0001,
        m(true, 1, 0),
        m(true, 500, 0),
        m(false, 0, 4),
        0,
        0,
        1,
        0,
    ];
    let bytes = seal(1, 2, 64 + 2 + 501 * 64 + 1, &words_body(&stream));
    let page = Page::decode(&bytes).expect("valid non-canonical stream");
    assert_eq!(page.encoding(), Encoding::Ewah);
    let mut expect = [0u64; PAGE_WORDS];
    expect[5] = u64::MAX;
    expect[6] = 0x8000_0000_0000_0001;
    expect[7..508].fill(u64::MAX);
    expect[510] = 1;
    assert!(*page_words(&page) == expect);
    check_page(&page, &expect, &[0, 320, 450, 32_767], "non-canonical ewah");
    // Re-encoding yields the canonical form, which decodes to the same bits.
    let canon = page.encode();
    assert_eq!(Page::decode(&canon).unwrap(), page);
    // A trailing no-op marker after full coverage is still valid.
    let mut extra = stream.to_vec();
    extra.push(m(false, 0, 0));
    assert!(Page::decode(&seal(1, 2, 64 + 2 + 501 * 64 + 1, &words_body(&extra))).is_ok());
}

// ----- property tests against the model -----

/// A position clustered near word edges and page ends.
/// Both position extractors list exactly the model's set bits, in order,
/// at every density and with words of 0 to 64 bits; a count that is too low
/// (never passed, but cheap to survive) still gives every position.
#[test]
fn positions_match_model_at_every_density() {
    let mut rng = StdRng::seed_from_u64(7);
    let mut models: Vec<Box<Words>> = DENSITIES.iter().map(|&d| random_model(&mut rng, d)).collect();
    models.push(Box::new(std::array::from_fn(|i| if i % 3 == 0 { u64::MAX } else { 1 << (i % 64) })));
    models.extend(shapes().into_iter().map(|(_, m)| m));
    for m in &models {
        let expect: Vec<u16> = model_positions(m);
        let ones = page_count(expect.len());
        assert_eq!(dense::positions(m, ones), expect, "positions with the true count");
        assert_eq!(dense::positions(m, ones / 2), expect, "positions with an undercount");
        assert_eq!(Census::of(m).ones, ones, "census counts the bits");
        let dirty = m.iter().filter(|&&w| w != 0 && w != u64::MAX).count();
        assert_eq!(Census::of(m).dirty as usize, dirty, "census counts the dirty words");
    }
}

/// fold_dense equals folding the model word by word, for 0 to 20 sources
/// (more than one group of sources read side by side).
#[test]
fn fold_dense_matches_model() {
    let mut rng = StdRng::seed_from_u64(11);
    let pages: Vec<Box<Words>> = (0..20).map(|i| random_model(&mut rng, DENSITIES[i % DENSITIES.len()])).collect();
    type WordOp = fn(u64, u64) -> u64;
    let ops: [(Fold, WordOp); 3] = [(Fold::And, |a, b| a & b), (Fold::Or, |a, b| a | b), (Fold::Xor, |a, b| a ^ b)];
    for (op, f) in ops {
        for k in 0..=pages.len() {
            let sources: Vec<&[u64; PAGE_WORDS]> = pages[..k].iter().map(|p| &**p).collect();
            let mut out = [7u64; PAGE_WORDS];
            fold_dense(op, &sources, &mut out);
            let expect: [u64; PAGE_WORDS] = std::array::from_fn(|i| match sources.split_first() {
                None => 0,
                Some((first, rest)) => rest.iter().fold(first[i], |a, s| f(a, s[i])),
            });
            assert!(out == expect, "{op:?} over {k} sources equals the model");
        }
    }
}

fn position() -> impl Strategy<Value = u16> {
    prop_oneof![
        0u16..32_768,
        (0u16..512, 0u16..3, any::<bool>()).prop_map(|(w, d, hi)| w * 64 + if hi { 63 - d } else { d }),
        (0u16..70).prop_map(|d| 32_767 - d),
        0u16..70,
    ]
}

fn word() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(u64::MAX),
        any::<u64>(),
        (0u32..64).prop_map(|s| 1u64 << s),
        (0u32..64).prop_map(|s| !(1u64 << s)),
    ]
}

/// Models: sparse positions, scattered words over a zero or full base, or
/// consecutive runs of words.
fn model() -> impl Strategy<Value = Box<Words>> {
    prop_oneof![
        vec(position(), 0..300).prop_map(|p| model_from_positions(&p)),
        (any::<bool>(), vec((0usize..512, word()), 0..600)).prop_map(|(full, ws)| {
            let mut m = Box::new([if full { u64::MAX } else { 0 }; PAGE_WORDS]);
            for (i, w) in ws {
                m[i] = w;
            }
            m
        }),
        vec((1usize..60, word()), 0..40).prop_map(|runs| {
            let mut m = Box::new([0u64; PAGE_WORDS]);
            let mut i = 0;
            for (len, w) in runs {
                let end = (i + len).min(PAGE_WORDS);
                m[i..end].fill(w);
                i = end;
            }
            m
        }),
    ]
}

fn probes() -> impl Strategy<Value = Vec<u32>> {
    vec(prop_oneof![position().prop_map(u32::from), Just(BITS)], 0..8)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Every page operation, in every representation and every pair of
    /// representations, agrees with the word-array model.
    #[test]
    fn ops_match_model(ma in model(), mb in model(), probes in probes()) {
        check_all(&ma, &mb, &probes, "proptest");
    }

    /// from_positions and from_bytes agree with the model and pick the
    /// smallest encoding.
    #[test]
    fn constructors_match_model(pos in vec(position(), 0..3000)) {
        let m = model_from_positions(&pos);
        let sorted = model_positions(&m);
        let p = Page::from_positions(&sorted);
        prop_assert!(*page_words(&p) == *m);
        check_compact(&p, "from_positions");
        let bytes = super::check::model_bytes(&m);
        prop_assert_eq!(&Page::from_bytes(&bytes), &p);
    }

    /// Decoding arbitrary bytes never panics, and whatever decodes re-encodes
    /// to a page with the same bits.
    #[test]
    fn decode_arbitrary_bytes(bytes in vec(any::<u8>(), 0..64), enc in 0u8..3) {
        let mut sealed = bytes.clone();
        if sealed.len() >= 4 {
            sealed[0] = 1;
            sealed[1] = enc;
            let crc = crc32fast::hash(&sealed);
            sealed.extend_from_slice(&crc.to_le_bytes());
        }
        for b in [&bytes, &sealed] {
            if let Ok(p) = Page::decode(b) {
                check_invariants(&p, "decoded");
                prop_assert_eq!(Page::decode(&p.encode()).unwrap(), p);
            }
        }
    }
}

/// `byte(i)` is the Redis byte `i` that `write_bytes` produces, and
/// `set_byte(i, v)` changes exactly that byte, in every representation.
#[test]
fn bytes_read_and_set_one_at_a_time() {
    let mut rng = StdRng::seed_from_u64(7);
    for (name, m) in shapes() {
        for encoding in [Encoding::Sparse, Encoding::Dense, Encoding::Ewah, Encoding::Runs] {
            let page = Page::from_words(&m).with_encoding(encoding);
            let mut bytes = vec![0u8; PAGE_WORDS * 8];
            page.write_bytes(&mut bytes);
            for (i, &b) in bytes.iter().enumerate() {
                assert_eq!(page.byte(i), b, "{name} {encoding:?}: byte {i}");
            }
            let mut changed = page.clone();
            let mut expect = bytes.clone();
            for _ in 0..64 {
                let i = rng.gen_range(0..bytes.len());
                let v: u8 = rng.gen();
                changed.set_byte(i, v);
                expect[i] = v;
            }
            let mut got = vec![0u8; PAGE_WORDS * 8];
            changed.write_bytes(&mut got);
            assert_eq!(got, expect, "{name} {encoding:?}");
            assert_eq!(changed.count_ones(), expect.iter().map(|b| b.count_ones()).sum::<u32>(), "{name} {encoding:?}");
        }
    }
}
