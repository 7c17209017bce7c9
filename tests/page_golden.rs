//! Golden files of the on-disk page format, version 1.
//!
//! `tests/golden/v1/*.bin` are encoded pages checked in as binary files. They
//! pin the format: encoding each model must give exactly the stored bytes, and
//! decoding the stored bytes must give the model. The `corrupt_*.bin` fixtures
//! must be rejected.
//!
//! The files were generated once by the ignored test `write_golden_files`:
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

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/v1")
}

/// Positions `start..end` as u16.
fn range(start: u16, end: u16) -> impl Iterator<Item = u16> {
    start..end
}

/// The valid golden pages: file name, expected encoding, model positions.
fn models() -> Vec<(&'static str, &'static str, Vec<u16>)> {
    vec![
        ("sparse_3bits.bin", "sparse", vec![0, 4711, 32_767]),
        // Every even bit: 0xAAAA... words, too mixed for EWAH, too many for sparse.
        ("dense_checker.bin", "dense", (0..16_384u16).map(|i| 2 * i).collect()),
        // Runs of full words with a few literals between them.
        ("ewah_runs.bin", "ewah", range(640, 6400).chain([6401, 6403, 6463]).chain(range(19_200, 32_768)).collect()),
        ("full.bin", "ewah", range(0, 32_767).chain([32_767]).collect()),
    ]
}

/// Corrupt fixtures derived from the valid ones: file name and how it is made.
fn corrupt() -> Vec<(&'static str, Vec<u8>)> {
    let sparse = encode_page_from_positions(&[0, 4711, 32_767]);
    let ewah = encode_page_from_positions(&models()[2].2);
    let mut crc = sparse.clone();
    crc[5] ^= 0x01; // one body bit flipped, checksum left stale
    let truncated = ewah[..ewah.len() - 3].to_vec();
    let mut version = sparse.clone();
    version[0] = 2; // a future format version, checksum recomputed
    reseal(&mut version);
    let mut order = sparse.clone();
    order.swap(4, 6); // positions out of order, checksum recomputed
    order.swap(5, 7);
    reseal(&mut order);
    let mut coverage = ewah.clone();
    coverage[4] ^= 0x02; // first marker's run length + 1: 513 words covered
    reseal(&mut coverage);
    vec![
        ("corrupt_crc.bin", crc),
        ("corrupt_truncated.bin", truncated),
        ("corrupt_version.bin", version),
        ("corrupt_sparse_order.bin", order),
        ("corrupt_ewah_coverage.bin", coverage),
    ]
}

fn read(name: &str) -> Vec<u8> {
    let path = golden_dir().join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Encoding each model gives exactly the checked-in bytes (the encoder has
/// not changed the format).
#[test]
fn encoding_models_gives_golden_bytes() {
    for (name, encoding, positions) in models() {
        let bytes = read(name);
        assert!(encode_page_from_positions(&positions) == bytes, "{name}: encoder output differs from the golden file");
        assert_eq!(page_encoding_name(&bytes).as_deref(), Ok(encoding), "{name}");
    }
}

/// Decoding the checked-in bytes gives the model (the decoder still reads
/// version 1 pages).
#[test]
fn decoding_golden_bytes_gives_models() {
    for (name, _, positions) in models() {
        let decoded = decode_page_positions(&read(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(decoded == positions, "{name}: decoded positions differ from the model");
        check_page_decode(&read(name));
    }
}

/// Every corrupt fixture is rejected with the expected kind of error, and
/// still passes the no-panic decode check.
#[test]
fn corrupt_fixtures_are_rejected() {
    let expect = [
        ("corrupt_crc.bin", "checksum mismatch"),
        ("corrupt_truncated.bin", "checksum mismatch"),
        ("corrupt_version.bin", "unsupported page format version 2"),
        ("corrupt_sparse_order.bin", "sparse positions not increasing at index 1"),
        ("corrupt_ewah_coverage.bin", "ewah words cover 513 words"),
    ];
    for (name, message) in expect {
        let bytes = read(name);
        let err = decode_page_positions(&bytes).expect_err(name);
        assert!(err.starts_with(message), "{name}: got {err:?}, expected {message:?}");
        check_page_decode(&bytes);
    }
    // The fixtures are what the generator describes.
    for (name, bytes) in corrupt() {
        assert!(read(name) == bytes, "{name}: fixture differs from its recipe");
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

/// Writes the golden files. Run once, by hand, with BITSLED_WRITE_GOLDEN=1;
/// see the module documentation.
#[test]
#[ignore = "generator: writes tests/golden/v1 when BITSLED_WRITE_GOLDEN=1"]
fn write_golden_files() {
    if std::env::var_os("BITSLED_WRITE_GOLDEN").is_none() {
        eprintln!("set BITSLED_WRITE_GOLDEN=1 to write the golden files");
        return;
    }
    let dir = golden_dir();
    std::fs::create_dir_all(&dir).expect("create golden dir");
    for (name, _, positions) in models() {
        std::fs::write(dir.join(name), encode_page_from_positions(&positions)).expect("write");
    }
    for (name, bytes) in corrupt() {
        std::fs::write(dir.join(name), bytes).expect("write");
    }
}

/// The page group record format, version 1 (format 3 stores), pinned byte
/// by byte: version, member count, then per member `slot << 2 | encoding`,
/// the popcount as a varint and the body, then the CRC-32 (computed here
/// independently with Python's `zlib.crc32`). Encoding gives these bytes;
/// splitting them gives the members' page records back.
#[test]
fn group_record_golden_bytes() {
    let golden = [
        0x01, 0x02, // version 1, two members
        0x01, 0x03, 0x00, 0x00, 0x67, 0x12, 0xff, 0x7f, // slot 0, sparse, 3 bits: 0, 4711, 32767
        0xfd, 0x01, 0x05, 0x00, // slot 63, sparse, 1 bit: 5
        0x0b, 0xaf, 0x3f, 0x93, // CRC-32
    ];
    let members = vec![(0u8, encode_page_from_positions(&[0, 4711, 32_767])), (63u8, encode_page_from_positions(&[5]))];
    assert_eq!(bitsled::testing::encode_group_record(&members), golden);
    assert_eq!(bitsled::testing::split_group_record(&golden).unwrap(), members);
    check_page_decode(&golden);
}
