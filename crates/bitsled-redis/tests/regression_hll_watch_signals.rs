//! Redis 7's HyperLogLog commands tell a key's watchers as Redis signals
//! the key: a PFADD that fails on a corrupt sketch keeps the registers the
//! elements before the failing one raised, but does not signal the key (the
//! error reply returns before `signalModifiedKey`), so a transaction
//! watching it still runs; PFMERGE signals its destination whether or not a
//! register changed, so such a transaction aborts.
//!
//! The replies and bytes below are redis-server 7.0.15's.

use bitsled_redis::command::{Reply, Session};

fn args(parts: &[&[u8]]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.to_vec()).collect()
}

/// A sparse sketch whose one opcode, XZERO:8192, covers only the first half
/// of the registers: "e0" lands in it, "e1" does not.
const HALF_COVERED: &[u8] = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0\x5f\xff";

#[test]
fn failed_pfadd_keeps_watch_and_pfmerge_always_signals() {
    let dir = tempfile::tempdir().unwrap();
    let db = bitsled::Db::open(dir.path()).unwrap();
    let (mut a, mut b) = (Session::new(db.clone()), Session::new(db));

    assert_eq!(b.execute(&args(&[b"SET", b"h", HALF_COVERED])), Reply::ok());
    assert_eq!(a.execute(&args(&[b"WATCH", b"h"])), Reply::ok());
    assert_eq!(
        b.execute(&args(&[b"PFADD", b"h", b"e0", b"e1"])),
        Reply::Error(b"INVALIDOBJ Corrupted HLL object detected".to_vec())
    );
    let kept = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80E%\x80Z\xd8".to_vec();
    assert_eq!(b.execute(&args(&[b"GET", b"h"])), Reply::Bulk(Some(kept.clone())), "e0's register stays raised");
    assert_eq!(a.execute(&args(&[b"MULTI"])), Reply::ok());
    assert_eq!(a.execute(&args(&[b"GET", b"h"])), Reply::Status("QUEUED".into()));
    assert_eq!(
        a.execute(&args(&[b"EXEC"])),
        Reply::Array(vec![Reply::Bulk(Some(kept))]),
        "a failed PFADD does not abort a transaction watching its key"
    );

    assert_eq!(b.execute(&args(&[b"PFADD", b"d", b"x"])), Reply::Integer(1));
    assert_eq!(a.execute(&args(&[b"WATCH", b"d"])), Reply::ok());
    assert_eq!(b.execute(&args(&[b"PFMERGE", b"d", b"d"])), Reply::ok());
    assert_eq!(a.execute(&args(&[b"MULTI"])), Reply::ok());
    assert_eq!(a.execute(&args(&[b"EXEC"])), Reply::NilArray, "PFMERGE signals its destination even unchanged");
}
