//! Golden files of the on-disk page format.
//!
//! `tests/golden/v2/*.bin` are encoded pages of the current format (page
//! format version 2, which added run lists) checked in as binary files. They
//! pin the format: encoding each model must give exactly the stored bytes,
//! and decoding the stored bytes must give the model. The `corrupt_*.bin`
//! fixtures must be rejected.
//!
//! `tests/golden/v1/*.bin` are pages of version 1, written by earlier
//! builds: they must still decode to their models (stores written before
//! run lists are read as they are), though this build encodes some of those
//! models differently now.
//!
//! The files of the current version were generated once by the ignored
//! test `write_golden_files`:
//!
//! ```text
//! BITSLED_WRITE_GOLDEN=1 cargo test --test page_golden -- --ignored write_golden_files
//! ```
//!
//! Regenerating them is a format change: never do it to make a failing test
//! pass, bump the format version instead.

use std::path::PathBuf;

use bitsled::testing::{
    check_page_decode, check_page_roundtrip, decode_page_positions, encode_page_from_positions, page_encoding_name,
    reseal,
};

fn golden_dir(version: u8) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/golden/v{version}"))
}

/// Positions `start..end` as u16.
fn range(start: u16, end: u16) -> impl Iterator<Item = u16> {
    start..end
}

/// Runs of full words with a few literals between them.
fn word_runs() -> Vec<u16> {
    range(640, 6400).chain([6401, 6403, 6463]).chain(range(19_200, 32_768)).collect()
}

/// 30 full words, then a word of 32 one-bit runs.
fn full_words_then_alternating() -> Vec<u16> {
    range(0, 1920).chain((1920..1984).step_by(2)).collect()
}

/// Runs of 6 bits every 100 bits (text-index postings have runs of this
/// length): nearly every word holds a run, so EWAH is mostly literals.
fn short_runs() -> Vec<u16> {
    (0..200u16).flat_map(|r| range(1000 + 100 * r, 1006 + 100 * r)).collect()
}

/// The valid golden pages of version 1: file name, the encoding stored,
/// model positions.
fn models_v1() -> Vec<(&'static str, &'static str, Vec<u16>)> {
    vec![
        ("sparse_3bits.bin", "sparse", vec![0, 4711, 32_767]),
        ("dense_checker.bin", "dense", (0..16_384u16).map(|i| 2 * i).collect()),
        ("ewah_runs.bin", "ewah", word_runs()),
        ("full.bin", "ewah", range(0, 32_768).collect()),
    ]
}

/// The valid golden pages of the current version: file name, expected
/// encoding, model positions.
fn models() -> Vec<(&'static str, &'static str, Vec<u16>)> {
    vec![
        ("sparse_3bits.bin", "sparse", vec![0, 4711, 32_767]),
        // Every even bit: 0xAAAA... words, too mixed for EWAH, too many for sparse or runs.
        ("dense_checker.bin", "dense", (0..16_384u16).map(|i| 2 * i).collect()),
        // Five runs: 20 bytes of runs against 5 EWAH words.
        ("runs_words.bin", "runs", word_runs()),
        ("full.bin", "runs", range(0, 32_768).collect()),
        ("runs_short.bin", "runs", short_runs()),
        ("ewah_literal.bin", "ewah", full_words_then_alternating()),
    ]
}

/// Corrupt fixtures derived from the valid ones: file name and how it is made.
fn corrupt() -> Vec<(&'static str, Vec<u8>)> {
    let sparse = encode_page_from_positions(&[0, 4711, 32_767]);
    let ewah = encode_page_from_positions(&full_words_then_alternating());
    let runs = encode_page_from_positions(&short_runs());
    let mut crc = sparse.clone();
    crc[5] ^= 0x01; // one body bit flipped, checksum left stale
    let truncated = ewah[..ewah.len() - 3].to_vec();
    let mut version = sparse.clone();
    version[0] = 3; // a future format version, checksum recomputed
    reseal(&mut version);
    let mut order = sparse.clone();
    order.swap(4, 6); // positions out of order, checksum recomputed
    order.swap(5, 7);
    reseal(&mut order);
    let mut coverage = ewah.clone();
    coverage[4] ^= 0x02; // first marker's run length + 1: 513 words covered
    reseal(&mut coverage);
    let mut touching = runs.clone();
    touching[6] = 99; // first run 1000..=1099: ends where the second starts
    reseal(&mut touching);
    vec![
        ("corrupt_crc.bin", crc),
        ("corrupt_truncated.bin", truncated),
        ("corrupt_version.bin", version),
        ("corrupt_sparse_order.bin", order),
        ("corrupt_ewah_coverage.bin", coverage),
        ("corrupt_runs_touching.bin", touching),
    ]
}

fn read(version: u8, name: &str) -> Vec<u8> {
    let path = golden_dir(version).join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Encoding each model gives exactly the checked-in bytes (the encoder has
/// not changed the format).
#[test]
fn encoding_models_gives_golden_bytes() {
    for (name, encoding, positions) in models() {
        let bytes = read(2, name);
        assert!(encode_page_from_positions(&positions) == bytes, "{name}: encoder output differs from the golden file");
        assert_eq!(page_encoding_name(&bytes).as_deref(), Ok(encoding), "{name}");
    }
}

/// Decoding the checked-in bytes of both versions gives the models (this
/// build still reads version 1 pages).
#[test]
fn decoding_golden_bytes_gives_models() {
    for (version, models) in [(1, models_v1()), (2, models())] {
        for (name, encoding, positions) in models {
            let bytes = read(version, name);
            let decoded = decode_page_positions(&bytes).unwrap_or_else(|e| panic!("v{version} {name}: {e}"));
            assert!(decoded == positions, "v{version} {name}: decoded positions differ from the model");
            assert_eq!(page_encoding_name(&bytes).as_deref(), Ok(encoding), "v{version} {name}");
            check_page_decode(&bytes);
        }
    }
}

/// Every corrupt fixture is rejected with the expected kind of error, and
/// still passes the no-panic decode check.
#[test]
fn corrupt_fixtures_are_rejected() {
    let expect = [
        ("corrupt_crc.bin", "checksum mismatch"),
        ("corrupt_truncated.bin", "checksum mismatch"),
        ("corrupt_version.bin", "unsupported page format version 3"),
        ("corrupt_sparse_order.bin", "sparse positions not increasing at index 1"),
        ("corrupt_ewah_coverage.bin", "ewah words cover 513 words"),
        ("corrupt_runs_touching.bin", "run 1 starts at 1100, not after a clear bit"),
    ];
    for (name, message) in expect {
        let bytes = read(2, name);
        let err = decode_page_positions(&bytes).expect_err(name);
        assert!(err.starts_with(message), "{name}: got {err:?}, expected {message:?}");
        check_page_decode(&bytes);
    }
    // The fixtures are what the generator describes.
    for (name, bytes) in corrupt() {
        assert!(read(2, name) == bytes, "{name}: fixture differs from its recipe");
    }
    // The version 1 fixtures are still refused (their version fixture, a
    // version 2 header, is a valid page now and is not checked).
    for (name, message) in expect.iter().take(5).filter(|(n, _)| *n != "corrupt_version.bin") {
        let err = decode_page_positions(&read(1, name)).expect_err(name);
        assert!(err.starts_with(message), "v1 {name}: got {err:?}, expected {message:?}");
    }
}

/// Every file of the fuzz corpora passes the fuzz checks on stable (so the
/// seeds and any crash regressions stay covered without cargo-fuzz).
#[test]
fn fuzz_corpus_replays() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let mut replayed = 0;
    for (target, check) in
        [("page_decode", check_page_decode as fn(&[u8])), ("page_roundtrip", check_page_roundtrip as fn(&[u8]))]
    {
        let dir = root.join(target);
        let mut entries: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
            .map(|e| e.expect("directory entry").path())
            .collect();
        entries.sort();
        for path in entries {
            let data = std::fs::read(&path).expect("corpus file");
            check(&data);
            replayed += 1;
        }
    }
    assert!(replayed >= 4, "the fuzz corpora hold seed files ({replayed} found)");
}

/// Writes the golden files of the current version. Run once, by hand,
/// with BITSLED_WRITE_GOLDEN=1; see the module documentation.
#[test]
#[ignore = "generator: writes tests/golden/v2 when BITSLED_WRITE_GOLDEN=1"]
fn write_golden_files() {
    if std::env::var_os("BITSLED_WRITE_GOLDEN").is_none() {
        eprintln!("set BITSLED_WRITE_GOLDEN=1 to write the golden files");
        return;
    }
    let dir = golden_dir(2);
    std::fs::create_dir_all(&dir).expect("create golden dir");
    for (name, _, positions) in models() {
        std::fs::write(dir.join(name), encode_page_from_positions(&positions)).expect("write");
    }
    for (name, bytes) in corrupt() {
        std::fs::write(dir.join(name), bytes).expect("write");
    }
}

/// The page group record format, pinned byte by byte: version, member
/// count, then per member `slot << 2 | encoding`, the popcount as a varint,
/// for a run list its runs as a varint, and the body, then the CRC-32
/// (computed here independently with Python's `zlib.crc32`). Encoding gives
/// the version 2 bytes; splitting either version gives the members' page
/// records back.
#[test]
fn group_record_golden_bytes() {
    let v1 = [
        0x01, 0x02, // version 1, two members
        0x01, 0x03, 0x00, 0x00, 0x67, 0x12, 0xff, 0x7f, // slot 0, sparse, 3 bits: 0, 4711, 32767
        0xfd, 0x01, 0x05, 0x00, // slot 63, sparse, 1 bit: 5
        0x0b, 0xaf, 0x3f, 0x93, // CRC-32
    ];
    let v2 = [
        0x02, 0x03, // version 2, three members
        0x01, 0x03, 0x00, 0x00, 0x67, 0x12, 0xff, 0x7f, // slot 0, sparse, 3 bits: 0, 4711, 32767
        0x07, 0x06, 0x01, 0x64, 0x00, 0x05, 0x00, // slot 1, runs, 6 bits, 1 run: 100, length 6
        0xfd, 0x01, 0x05, 0x00, // slot 63, sparse, 1 bit: 5
        0x60, 0xea, 0x55, 0x3d, // CRC-32
    ];
    let sparse3 = (0u8, encode_page_from_positions(&[0, 4711, 32_767]));
    let one = (63u8, encode_page_from_positions(&[5]));
    let run = (1u8, encode_page_from_positions(&(100..106).collect::<Vec<_>>()));
    let members = vec![sparse3.clone(), run, one.clone()];
    assert_eq!(bitsled::testing::encode_group_record(&members), v2);
    assert_eq!(bitsled::testing::split_group_record(&v2).unwrap(), members);
    assert_eq!(bitsled::testing::split_group_record(&v1).unwrap(), vec![sparse3, one]);
    check_page_decode(&v1);
    check_page_decode(&v2);
}
