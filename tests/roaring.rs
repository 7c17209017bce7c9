//! Invariant: a Roaring bitmap imported with `Db::import_roaring` becomes
//! the string whose set bits are exactly its values (value `v` = Redis bit
//! offset `v`, length `max / 8 + 1`), and `Db::export_roaring` gives back
//! the set of a key's set bits, in the bytes roaring-rs 0.10 writes; input
//! that is not a bitmap of the format is an error that never panics and
//! leaves the key as it was.

use std::collections::BTreeSet;

use bitsled::{BloomOptions, Config, Db, Error, Expiry, RoaringFormat, MAX_OFFSET};
use rand::{Rng, RngCore, SeedableRng};
use roaring::{RoaringBitmap, RoaringTreemap};

/// Pages per 4 KiB of value: one page holds 32,768 bits.
const PAGE_BITS: u64 = 32_768;

/// A database with no background write-back and a small dirty budget, so
/// large imports write back while they build.
fn open(dir: &std::path::Path) -> Db {
    Config::new(dir).flush_interval(None).dirty_bytes(1 << 20).open().unwrap()
}

fn bits32(bitmap: &RoaringBitmap) -> Vec<u8> {
    let mut out = Vec::new();
    bitmap.serialize_into(&mut out).unwrap();
    out
}

fn bits64(treemap: &RoaringTreemap) -> Vec<u8> {
    let mut out = Vec::new();
    treemap.serialize_into(&mut out).unwrap();
    out
}

fn ones(db: &Db, key: &[u8]) -> Vec<u64> {
    db.ones(key, ..).unwrap().collect::<bitsled::Result<_>>().unwrap()
}

/// Redis's bytes for a set of bit offsets: offset `v` is bit `0x80 >> v % 8`
/// of byte `v / 8`; the string ends with the byte of the highest offset.
fn redis_bytes(values: impl Iterator<Item = u64> + Clone) -> Vec<u8> {
    let len = values.clone().max().map_or(0, |m| m / 8 + 1);
    let mut out = vec![0u8; usize::try_from(len).unwrap()];
    for v in values {
        out[usize::try_from(v / 8).unwrap()] |= 0x80 >> (v % 8);
    }
    out
}

/// Checks that `key` holds exactly the set `values` (ascending): the
/// returned count, BITCOUNT, STRLEN, the listed ones, GETBIT on every
/// value and on offsets around them.
fn assert_holds(db: &Db, key: &[u8], imported: u64, values: &[u64]) {
    assert_eq!(imported, values.len() as u64, "import's count");
    assert_eq!(db.bitcount(key, None).unwrap(), values.len() as u64, "BITCOUNT");
    assert_eq!(db.strlen(key).unwrap(), values.last().map_or(0, |m| m / 8 + 1), "STRLEN");
    assert!(ones(db, key) == values, "the listed ones differ from the roaring values");
    let set: BTreeSet<u64> = values.iter().copied().collect();
    for &v in values.iter().step_by(values.len() / 1000 + 1) {
        for probe in [v.saturating_sub(1), v, v + 1] {
            assert_eq!(db.getbit(key, probe).unwrap(), set.contains(&probe), "GETBIT {probe}");
        }
    }
}

/// Invariant: for random sets at densities 10^-4, 1% and 50% over three
/// million bits, roaring-rs's serialization imports to a key whose GETBIT,
/// BITCOUNT, STRLEN, listed ones and GET bytes (Redis's layout) equal the
/// set, before and after a reopen.
#[test]
fn random_sets_import_exactly() {
    let seed: u64 = rand::random();
    println!("seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let bits = 3_000_000u32;
    let mut expected = Vec::new();
    {
        let db = open(dir.path());
        for (i, density) in [1e-4, 0.01, 0.5].into_iter().enumerate() {
            let bitmap: RoaringBitmap = (0..bits).filter(|_| rng.gen_bool(density)).collect();
            let values: Vec<u64> = bitmap.iter().map(u64::from).collect();
            let key = format!("density:{i}").into_bytes();
            // An old value the import replaces whole.
            db.set_bits(&key, &[1, 5_000_000], true).unwrap();
            let n = db.import_roaring(&key, RoaringFormat::Bits32, &bits32(&bitmap)).unwrap();
            assert_holds(&db, &key, n, &values);
            assert!(
                db.get(&key).unwrap().unwrap() == redis_bytes(values.iter().copied()),
                "GET differs from Redis's bytes at density {density}"
            );
            expected.push((key, values));
        }
        let report = db.verify().unwrap();
        assert!(report.is_ok(), "{report:?}");
        db.flush().unwrap();
    }
    let db = open(dir.path());
    for (key, values) in &expected {
        assert!(ones(&db, key) == *values, "after reopen");
    }
}

/// Invariant: values at the top of the 32-bit range (2^32 - 1, page and
/// container edges below it) import to their offsets; the string is then
/// 2^29 bytes long, its pages below untouched.
#[test]
fn values_near_the_top_of_the_32_bit_range() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let top = u64::from(u32::MAX);
    let values: Vec<u64> =
        vec![0, 65_535, 65_536, top - 65_536, top - PAGE_BITS, top - PAGE_BITS + 1, top - 7, top - 1, top];
    let bitmap: RoaringBitmap = values.iter().map(|&v| u32::try_from(v).unwrap()).collect();
    let n = db.import_roaring(b"top", RoaringFormat::Bits32, &bits32(&bitmap)).unwrap();
    assert_holds(&db, b"top", n, &values);
    assert_eq!(db.strlen(b"top").unwrap(), 1 << 29);
    let stats = db.key_stats(b"top").unwrap().unwrap();
    assert_eq!(stats.pages(), 6, "{stats:?}");
    assert_eq!(
        RoaringBitmap::deserialize_from(&db.export_roaring(b"top", RoaringFormat::Bits32).unwrap()[..]).unwrap(),
        bitmap
    );
}

/// Invariant: a set whose highest value is below 512 (at most 64 bytes)
/// is stored inline, as SET stores such a string, with Redis's bytes; one
/// at 512 is paged. Both hold exactly their values.
#[test]
fn tiny_sets_are_kept_inline() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    for (values, inline) in [
        (&[0u64][..], true),
        (&[7], true),
        (&[0, 1, 2, 63, 64, 200], true),
        (&[3, 511], true),
        // Past 64 bytes, or at a high offset: one small page, kept in the
        // entry.
        (&[3, 512], true),
        (&[40_000], true),
        // Two pages.
        (&[3, 40_000], false),
    ] {
        let bitmap: RoaringBitmap = values.iter().map(|&v| u32::try_from(v).unwrap()).collect();
        let n = db.import_roaring(b"tiny", RoaringFormat::Bits32, &bits32(&bitmap)).unwrap();
        assert_holds(&db, b"tiny", n, values);
        assert_eq!(db.get(b"tiny").unwrap().unwrap(), redis_bytes(values.iter().copied()), "{values:?}");
        let stats = db.key_stats(b"tiny").unwrap().unwrap();
        assert_eq!(stats.inline, inline, "{values:?}: {stats:?}");
    }
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "{report:?}");
}

/// Invariant: exporting a key written with SETBIT-style calls (set_bits,
/// offsets at byte, word and page edges and random ones) gives, once
/// roaring-rs deserializes it, exactly the offsets set; both formats; and
/// the bytes are roaring-rs's own serialization of that set.
#[test]
fn export_equals_what_set_bits_set() {
    let seed: u64 = rand::random();
    println!("seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut offsets: Vec<u64> = vec![0, 7, 8, 63, 64, PAGE_BITS - 1, PAGE_BITS, 65_535, 65_536, u64::from(u32::MAX)];
    offsets.extend((0..20_000).map(|_| rng.gen_range(0..10_000_000u64)));
    // A dense stretch, so the export has bitset containers too.
    offsets.extend(1_000_000..1_010_000);
    db.set_bits(b"k", &offsets, true).unwrap();
    // Clearing bits must remove them from the export.
    db.set_bits(b"k", &[7, 1_000_000], false).unwrap();
    let want: BTreeSet<u64> = offsets.iter().copied().filter(|&o| o != 7 && o != 1_000_000).collect();

    let bytes = db.export_roaring(b"k", RoaringFormat::Bits32).unwrap();
    let got = RoaringBitmap::deserialize_from(&bytes[..]).unwrap();
    assert!(got.iter().map(u64::from).eq(want.iter().copied()), "32-bit export differs from the offsets set");
    assert_eq!(bytes, bits32(&got), "roaring-rs serializes the same set to the same bytes");

    let bytes = db.export_roaring(b"k", RoaringFormat::Bits64).unwrap();
    let got = RoaringTreemap::deserialize_from(&bytes[..]).unwrap();
    assert!(got.iter().eq(want.iter().copied()), "64-bit export differs from the offsets set");

    let mut written = Vec::new();
    assert_eq!(db.write_roaring(b"k", RoaringFormat::Bits64, &mut written).unwrap(), want.len() as u64);
    assert_eq!(written, bytes, "write_roaring writes what export_roaring returns");
}

/// Invariant: a 64-bit treemap with values in several high words (up to
/// MAX_OFFSET) imports to exactly its values, and exporting the key as a
/// treemap gives roaring-rs's own bytes for the set back.
#[test]
fn treemaps_both_directions() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut values: Vec<u64> = vec![0, 1, u64::from(u32::MAX), 1 << 32, (1 << 32) + PAGE_BITS, 5 << 32];
    values.extend((0..3_000u64).map(|i| (1 << 40) + i * 3));
    values.extend([MAX_OFFSET - PAGE_BITS, MAX_OFFSET - 1, MAX_OFFSET]);
    let treemap: RoaringTreemap = values.iter().copied().collect();
    let bytes = bits64(&treemap);
    let n = db.import_roaring(b"wide", RoaringFormat::Bits64, &bytes).unwrap();
    assert_holds(&db, b"wide", n, &values);
    assert_eq!(db.strlen(b"wide").unwrap(), MAX_OFFSET / 8 + 1);

    let back = db.export_roaring(b"wide", RoaringFormat::Bits64).unwrap();
    assert_eq!(back, bytes, "export gives roaring-rs's serialization of the same set");
    let r = db.export_roaring(b"wide", RoaringFormat::Bits32);
    assert!(matches!(r, Err(Error::OffsetOutOfRange { offset: 4_294_967_296 })), "{r:?}");

    // A treemap of values below 2^32 is the same set as the 32-bit bitmap.
    let small: RoaringTreemap = [3u64, 70_000, u64::from(u32::MAX)].into_iter().collect();
    let n = db.import_roaring(b"small", RoaringFormat::Bits64, &bits64(&small)).unwrap();
    assert_holds(&db, b"small", n, &[3, 70_000, u64::from(u32::MAX)]);
    let as32 =
        RoaringBitmap::deserialize_from(&db.export_roaring(b"small", RoaringFormat::Bits32).unwrap()[..]).unwrap();
    assert!(as32.iter().map(u64::from).eq(small.iter()));
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "{report:?}");
}

/// Invariant: import then export gives back, byte for byte, what roaring-rs
/// serialized. roaring-rs 0.10 writes no run containers (it has no
/// run_optimize), so its bytes are a function of the set, and both sides
/// produce them.
#[test]
fn round_trip_is_byte_equal() {
    let seed: u64 = rand::random();
    println!("seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    for density in [1e-3, 0.05, 0.3, 0.9] {
        let bitmap: RoaringBitmap = (0..600_000u32).filter(|_| rng.gen_bool(density)).collect();
        let bytes = bits32(&bitmap);
        db.import_roaring(b"rt", RoaringFormat::Bits32, &bytes).unwrap();
        assert!(db.export_roaring(b"rt", RoaringFormat::Bits32).unwrap() == bytes, "density {density}");
        let treemap: RoaringTreemap = bitmap.iter().map(|v| u64::from(v) * 4099).collect();
        let bytes = bits64(&treemap);
        db.import_roaring(b"rt64", RoaringFormat::Bits64, &bytes).unwrap();
        assert!(db.export_roaring(b"rt64", RoaringFormat::Bits64).unwrap() == bytes, "density {density}");
    }
}

/// One container of a hand-made portable bitmap.
enum Container {
    /// Key and runs (start, length - 1).
    Runs(u16, Vec<(u16, u16)>),
    /// Key and sorted values.
    Array(u16, Vec<u16>),
}

/// A portable 32-bit bitmap with run containers (cookie 12347), as the C
/// and Java implementations write after run optimization: the cookie with
/// the container count, the run-container flags, the descriptions, the
/// offsets when there are at least 4 containers, the containers.
fn with_runs(containers: &[Container]) -> Vec<u8> {
    let size = containers.len();
    let mut out = (12_347u32 | (u32::try_from(size - 1).unwrap() << 16)).to_le_bytes().to_vec();
    let mut flags = vec![0u8; size.div_ceil(8)];
    let mut bodies = Vec::new();
    for (i, c) in containers.iter().enumerate() {
        let mut body = Vec::new();
        match c {
            Container::Runs(_, runs) => {
                flags[i / 8] |= 1 << (i % 8);
                body.extend_from_slice(&u16::try_from(runs.len()).unwrap().to_le_bytes());
                for &(start, len) in runs {
                    body.extend_from_slice(&start.to_le_bytes());
                    body.extend_from_slice(&len.to_le_bytes());
                }
            }
            Container::Array(_, values) => values.iter().for_each(|v| body.extend_from_slice(&v.to_le_bytes())),
        }
        bodies.push(body);
    }
    out.extend_from_slice(&flags);
    for c in containers {
        let (key, card) = match c {
            Container::Runs(k, runs) => (*k, runs.iter().map(|&(_, l)| u32::from(l) + 1).sum::<u32>()),
            Container::Array(k, values) => (*k, u32::try_from(values.len()).unwrap()),
        };
        out.extend_from_slice(&key.to_le_bytes());
        out.extend_from_slice(&u16::try_from(card - 1).unwrap().to_le_bytes());
    }
    if size >= 4 {
        let mut at = out.len() + 4 * size;
        for body in &bodies {
            out.extend_from_slice(&u32::try_from(at).unwrap().to_le_bytes());
            at += body.len();
        }
    }
    for b in &bodies {
        out.extend_from_slice(b);
    }
    out
}

/// Invariant: bitmaps with run containers (written by run-optimizing
/// implementations, with and without the offset header) import to the
/// values their runs cover.
#[test]
fn run_containers_import() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let two = with_runs(&[Container::Runs(0, vec![(10, 4), (100, 0)]), Container::Array(2, vec![1, 65_535])]);
    let want: Vec<u64> = vec![10, 11, 12, 13, 14, 100, 131_073, 196_607];
    assert!(RoaringBitmap::deserialize_from(&two[..]).unwrap().iter().map(u64::from).eq(want.iter().copied()));
    let n = db.import_roaring(b"runs", RoaringFormat::Bits32, &two).unwrap();
    assert_holds(&db, b"runs", n, &want);

    let four = with_runs(&[
        Container::Array(0, vec![5]),
        Container::Runs(1, vec![(0, 65_535)]),
        Container::Runs(3, vec![(0, 9), (30_000, 9)]),
        Container::Runs(65_535, vec![(65_530, 5)]),
    ]);
    let mut want: Vec<u64> = vec![5];
    want.extend(65_536..131_072);
    want.extend((3 << 16)..(3 << 16) + 10);
    want.extend((3 << 16) + 30_000..(3 << 16) + 30_010);
    want.extend(u64::from(u32::MAX) - 5..=u64::from(u32::MAX));
    let n = db.import_roaring(b"runs", RoaringFormat::Bits32, &four).unwrap();
    assert_holds(&db, b"runs", n, &want);
    // A full container's two pages are stored as one run each.
    let stats = db.key_stats(b"runs").unwrap().unwrap();
    assert!(stats.runs_pages >= 2, "{stats:?}");
}

/// The state an import must not change.
fn snapshot(db: &Db) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let mut keys = db.keys(b"*").unwrap();
    keys.sort();
    keys.into_iter().map(|k| (k.clone(), db.get(&k).unwrap())).collect()
}

/// A portable bitmap without runs (cookie 12346) whose array containers
/// are given in this order, sorted or not.
fn no_runs(containers: &[(u16, Vec<u16>)]) -> Vec<u8> {
    let size = u32::try_from(containers.len()).unwrap();
    let mut out = 12_346u32.to_le_bytes().to_vec();
    out.extend_from_slice(&size.to_le_bytes());
    for (key, values) in containers {
        out.extend_from_slice(&key.to_le_bytes());
        out.extend_from_slice(&u16::try_from(values.len() - 1).unwrap().to_le_bytes());
    }
    let mut at = 8 + 8 * containers.len();
    for (_, values) in containers {
        out.extend_from_slice(&u32::try_from(at).unwrap().to_le_bytes());
        at += 2 * values.len();
    }
    for (_, values) in containers {
        for v in values {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    out
}

/// Invariant: truncated input (every prefix), a bad cookie, trailing
/// bytes, containers out of order, a treemap whose later bitmap is broken
/// after earlier ones built pages, and random bytes are
/// `Error::InvalidArgument`; the keys are as they were (the target and
/// others), no key is created, and after a reopen no page of the failed
/// builds remains.
#[test]
fn malformed_input_is_an_error_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.set(b"k", b"\x0f\xf0").unwrap();
    db.set_bits(b"big", &[5, 1_000_000], true).unwrap();
    let before = snapshot(&db);

    let good: RoaringBitmap = (0..200_000u32).filter(|v| v % 3 == 0).chain([1 << 30]).collect();
    let good = bits32(&good);
    let mut bad: Vec<(String, RoaringFormat, Vec<u8>)> = Vec::new();
    for len in (0..good.len()).step_by(97).chain([1, 3, 7, 8, good.len() - 1]) {
        bad.push((format!("prefix of {len} bytes"), RoaringFormat::Bits32, good[..len].to_vec()));
    }
    let mut cookie = good.clone();
    cookie[0] ^= 0x55;
    bad.push(("bad cookie".into(), RoaringFormat::Bits32, cookie));
    bad.push(("zero cookie".into(), RoaringFormat::Bits32, vec![0; 64]));
    let mut trailing = good.clone();
    trailing.extend_from_slice(&[0, 0, 0, 0]);
    bad.push(("trailing bytes".into(), RoaringFormat::Bits32, trailing));
    bad.push(("containers out of order".into(), RoaringFormat::Bits32, no_runs(&[(2, vec![1, 2]), (0, vec![7])])));
    bad.push(("duplicate containers".into(), RoaringFormat::Bits32, no_runs(&[(2, vec![1, 2]), (2, vec![7])])));
    bad.push(("unsorted array".into(), RoaringFormat::Bits32, no_runs(&[(0, vec![9, 1])])));
    // A treemap of two bitmaps: the first builds many pages, the second is
    // cut short.
    let wide: RoaringTreemap = (0..2_000_000u64).step_by(2).chain([(7 << 32) + 1, (7 << 32) + 99_999]).collect();
    let wide = bits64(&wide);
    bad.push(("treemap cut in its last bitmap".into(), RoaringFormat::Bits64, wide[..wide.len() - 2].to_vec()));
    let mut more = wide.clone();
    more[0] = 3;
    bad.push(("treemap with a bitmap missing".into(), RoaringFormat::Bits64, more));
    let mut swapped = 2u64.to_le_bytes().to_vec();
    for high in [9u32, 4] {
        swapped.extend_from_slice(&high.to_le_bytes());
        swapped.extend_from_slice(&bits32(&[1u32, 2].into_iter().collect()));
    }
    bad.push(("treemap keys out of order".into(), RoaringFormat::Bits64, swapped));
    bad.push(("32-bit bitmap read as a treemap".into(), RoaringFormat::Bits64, good.clone()));
    bad.push(("empty input".into(), RoaringFormat::Bits32, Vec::new()));
    bad.push(("empty input".into(), RoaringFormat::Bits64, Vec::new()));

    let seed: u64 = rand::random();
    println!("seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for i in 0..200 {
        let mut noise = vec![0u8; rng.gen_range(0..300)];
        rng.fill_bytes(&mut noise);
        let format = if i % 2 == 0 { RoaringFormat::Bits32 } else { RoaringFormat::Bits64 };
        // Random bytes that do parse are astronomically unlikely; skip them.
        let parses = match format {
            RoaringFormat::Bits32 => RoaringBitmap::deserialize_from(&noise[..]).is_ok(),
            _ => RoaringTreemap::deserialize_from(&noise[..]).is_ok(),
        };
        if !parses {
            bad.push((format!("random bytes {i}"), format, noise));
        }
    }

    for (what, format, bytes) in &bad {
        for key in [&b"k"[..], b"new"] {
            let r = db.import_roaring(key, *format, bytes);
            assert!(matches!(r, Err(Error::InvalidArgument(_))), "{what}: {r:?}");
        }
        assert!(snapshot(&db) == before, "{what}: the keys changed");
    }
    db.flush().unwrap();
    drop(db);
    let db = open(dir.path());
    assert!(snapshot(&db) == before, "after reopen");
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "{report:?}");
    let pages: u64 = [&b"k"[..], b"big"].iter().map(|k| db.key_stats(k).unwrap().unwrap().pages()).sum();
    assert_eq!(report.pages, pages, "pages of the failed imports remain");
}

/// Invariant: flipping bytes of a valid serialization never panics: the
/// import either fails and leaves the key as it was, or succeeds and the
/// key holds what roaring-rs reads from the same bytes.
#[test]
fn damaged_bitmaps_import_as_roaring_reads_them_or_fail() {
    let seed: u64 = rand::random();
    println!("seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let sources: Vec<(RoaringFormat, Vec<u8>)> = vec![
        (RoaringFormat::Bits32, bits32(&(0..5_000u32).map(|v| v * 37).collect())),
        (RoaringFormat::Bits32, bits32(&(0..70_000u32).filter(|v| v % 5 != 0).collect())),
        (RoaringFormat::Bits32, with_runs(&[Container::Runs(0, vec![(10, 40)]), Container::Array(9, vec![3, 4])])),
        (RoaringFormat::Bits64, bits64(&[1u64, 1 << 33, (1 << 33) + 70_000].into_iter().collect())),
    ];
    let (mut ok, mut failed) = (0, 0);
    for _ in 0..400 {
        let (format, source) = &sources[rng.gen_range(0..sources.len())];
        let mut bytes = source.clone();
        for _ in 0..rng.gen_range(1..4) {
            let i = rng.gen_range(0..bytes.len());
            bytes[i] = rng.gen();
        }
        db.set(b"k", b"old").unwrap();
        match db.import_roaring(b"k", *format, &bytes) {
            Ok(n) => {
                ok += 1;
                let want: Vec<u64> = match format {
                    RoaringFormat::Bits32 => {
                        RoaringBitmap::deserialize_from(&bytes[..]).unwrap().iter().map(u64::from).collect()
                    }
                    _ => RoaringTreemap::deserialize_from(&bytes[..]).unwrap().iter().collect(),
                };
                if want.is_empty() {
                    assert!(!db.exists(b"k").unwrap());
                } else {
                    assert_holds(&db, b"k", n, &want);
                }
            }
            Err(e) => {
                failed += 1;
                assert!(matches!(e, Error::InvalidArgument(_) | Error::OffsetOutOfRange { .. }), "{e:?}");
                assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"old"[..]));
            }
        }
    }
    println!("{ok} damaged bitmaps imported, {failed} refused");
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "{report:?}");
}

/// Invariant: a treemap value above MAX_OFFSET (whose byte length would
/// not fit) is `Error::OffsetOutOfRange` naming it, and the key keeps its
/// value; MAX_OFFSET itself imports.
#[test]
fn treemap_values_above_max_offset_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.set(b"k", b"keep").unwrap();
    for offset in [MAX_OFFSET + 1, u64::MAX] {
        let treemap: RoaringTreemap = [1, 1 << 40, offset].into_iter().collect();
        let r = db.import_roaring(b"k", RoaringFormat::Bits64, &bits64(&treemap));
        assert!(matches!(r, Err(Error::OffsetOutOfRange { offset: o }) if o == offset), "{r:?}");
        assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"keep"[..]));
    }
    let treemap: RoaringTreemap = [MAX_OFFSET].into_iter().collect();
    assert_eq!(db.import_roaring(b"k", RoaringFormat::Bits64, &bits64(&treemap)).unwrap(), 1);
    assert!(db.getbit(b"k", MAX_OFFSET).unwrap());
    assert_eq!(db.strlen(b"k").unwrap(), MAX_OFFSET / 8 + 1);
}

/// Invariant: export of a key that is not a string is `Error::WrongType`;
/// import replaces a key of any type, as SET does.
#[test]
fn wrong_type_keys() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.bloom(b"bf").reserve(0.01, 100, BloomOptions::default()).unwrap();
    for format in [RoaringFormat::Bits32, RoaringFormat::Bits64] {
        let r = db.export_roaring(b"bf", format);
        assert!(matches!(r, Err(Error::WrongType)), "{r:?}");
        let r = db.write_roaring(b"bf", format, Vec::new());
        assert!(matches!(r, Err(Error::WrongType)), "{r:?}");
    }
    let bitmap: RoaringBitmap = [9u32, 100_000].into_iter().collect();
    assert_eq!(db.import_roaring(b"bf", RoaringFormat::Bits32, &bits32(&bitmap)).unwrap(), 2);
    assert_eq!(ones(&db, b"bf"), vec![9, 100_000]);
    assert!(db.bloom(b"bf").info().is_err(), "the key is a string now");
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "{report:?}");
}

/// Invariant: an empty bitmap deletes the key (as an empty BITOP result
/// does) and a missing key exports as an empty bitmap, so the round trip of
/// a missing key keeps it missing; an import clears the key's expiry, as
/// SET does.
#[test]
fn empty_bitmaps_and_missing_keys() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let empty32 = bits32(&RoaringBitmap::new());
    let empty64 = bits64(&RoaringTreemap::new());
    assert_eq!(db.export_roaring(b"missing", RoaringFormat::Bits32).unwrap(), empty32);
    assert_eq!(db.export_roaring(b"missing", RoaringFormat::Bits64).unwrap(), empty64);
    db.set(b"k", b"\xff").unwrap();
    assert_eq!(db.import_roaring(b"k", RoaringFormat::Bits32, &empty32).unwrap(), 0);
    assert!(!db.exists(b"k").unwrap());
    db.setbit(b"k", 100_000, true).unwrap();
    assert_eq!(db.import_roaring(b"k", RoaringFormat::Bits64, &empty64).unwrap(), 0);
    assert!(!db.exists(b"k").unwrap());
    assert_eq!(db.import_roaring(b"missing", RoaringFormat::Bits32, &empty32).unwrap(), 0);
    assert!(!db.exists(b"missing").unwrap());

    // A string of zero bits exports as an empty bitmap too.
    db.set(b"zeros", b"\0\0\0").unwrap();
    assert_eq!(db.export_roaring(b"zeros", RoaringFormat::Bits32).unwrap(), empty32);

    let far = db.now_ms() + 3_600_000;
    for (key, values) in [(&b"ttl-inline"[..], vec![3u32]), (b"ttl-paged", vec![3, 1_000_000])] {
        db.set(key, b"x").unwrap();
        db.expire_at(key, far, bitsled::ExpireCondition::Always).unwrap();
        assert_eq!(db.expiry(key).unwrap(), Expiry::At(far));
        db.import_roaring(key, RoaringFormat::Bits32, &bits32(&values.into_iter().collect())).unwrap();
        assert_eq!(db.expiry(key).unwrap(), Expiry::Never, "{key:?}");
    }
}

/// Invariant: every input of the `roaring_parse` fuzz corpus passes the
/// parser's check (no panic; what bitsled accepts, the `roaring` crate
/// reads the same), and the valid seeds import with the crate's count.
#[test]
fn fuzz_corpus_replays() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/roaring_parse");
    let db_dir = tempfile::tempdir().unwrap();
    let db = bitsled::Db::open(db_dir.path()).unwrap();
    let (mut seen, mut imported) = (0, 0);
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        bitsled::testing::check_roaring_parse(&data);
        if let Ok(expected) = roaring::RoaringBitmap::deserialize_from(&data[..]) {
            let n = db.import_roaring(b"seed", bitsled::RoaringFormat::Bits32, &data);
            if let Ok(n) = n {
                assert_eq!(n, expected.len(), "{}", path.display());
                assert_eq!(db.bitcount(b"seed", None).unwrap(), expected.len());
                imported += 1;
            }
        }
        seen += 1;
    }
    assert!(seen >= 4 && imported >= 3, "the corpus has its seeds ({seen} read, {imported} imported)");
}

/// Invariant: a run container whose header declares values its runs do not
/// hold (here: no runs at all), which the `roaring` crate accepts, is
/// refused as malformed and leaves the key alone.
#[test]
fn declared_cardinality_must_match_the_runs() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus/roaring_parse/run_container_without_runs.bin");
    let data = std::fs::read(path).unwrap();
    assert!(RoaringBitmap::deserialize_from(&data[..]).is_ok(), "the crate accepts it");
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.set(b"k", b"kept").unwrap();
    let got = db.import_roaring(b"k", RoaringFormat::Bits32, &data);
    assert!(matches!(got, Err(Error::InvalidArgument(ref m)) if m.contains("cardinalities")), "{got:?}");
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"kept"[..]));
}
