//! Damage to sled 0.34's log that makes sled panic while opening it, shared
//! by `tests/regression_sled_panic_at_open.rs` and the CLI's tests.
//!
//! sled's log file `db` is a sequence of 512 KiB segments, each starting
//! with a 20-byte header: a CRC-32 (4 bytes), the segment's log sequence
//! number XOR `0x7FFF_FFFF_FFFF_FFFF` (8 bytes, little-endian) and the
//! highest stable one (8 bytes). Copying the header of the newest segment
//! over an older segment's header leaves two valid headers claiming the
//! same sequence number, and sled 0.34 asserts at open that this never
//! happens ("duplicate segment LSN"). The damage is deterministic: the
//! copied header's own checksum still matches.

use std::path::Path;

use bitsled::Config;

/// sled 0.34's default segment size, which bitsled does not change.
const SEGMENT: usize = 512 * 1024;

/// Bytes of a segment header.
const HEADER: usize = 20;

/// Creates a store in `dir` whose log spans several segments, and closes it.
pub fn fill(dir: &Path) {
    let db = Config::new(dir).flush_interval(None).open().unwrap();
    for k in 0..40u8 {
        db.set(format!("k{k}").as_bytes(), &vec![k | 1; 30_000]).unwrap();
    }
    db.flush().unwrap();
}

/// The sequence number in the segment header at `at`.
fn segment_lsn(log: &[u8], at: usize) -> i64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&log[at + 4..at + 12]);
    i64::from_le_bytes(b) ^ 0x7FFF_FFFF_FFFF_FFFF
}

/// Copies the newest segment's header of the store in `dir` over another
/// segment's header. Panics (failing the test) if the log has fewer than
/// two segments.
pub fn duplicate_segment_header(dir: &Path) {
    let path = dir.join("db");
    let mut log = std::fs::read(&path).unwrap();
    let segments: Vec<usize> = (0..log.len() / SEGMENT).map(|i| i * SEGMENT).collect();
    assert!(segments.len() >= 2, "the log has {} bytes, less than two segments", log.len());
    let newest = segments.iter().copied().max_by_key(|&at| segment_lsn(&log, at)).unwrap();
    let victim = if newest == 0 { SEGMENT } else { 0 };
    let header = log[newest..newest + HEADER].to_vec();
    log[victim..victim + HEADER].copy_from_slice(&header);
    std::fs::write(&path, &log).unwrap();
}
