//! Two flushes running at once (the background flush and an explicit one,
//! or two threads calling `flush`) each make their write-back durable and
//! never corrupt the side file that records the durable write-back.
//!
//! Found by the kill -9 crash test: both flushes wrote the side file
//! through the same temporary file, so one could rename the other's file
//! into place before it was written (a kill then left an empty side file
//! and the store refused to open) or find its own temporary file gone (the
//! flush failed and poisoned the handle).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bitsled::Config;

#[test]
fn concurrent_flushes_keep_the_side_file_sound() {
    let dir = tempfile::tempdir().unwrap();
    let db = Config::new(dir.path()).flush_interval(Some(Duration::from_millis(1))).open().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (db, stop) = (db.clone(), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                db.setbit(b"k", i % 100_000, true).unwrap();
                i += 1;
            }
        })
    };
    let flushers: Vec<_> = (0..3)
        .map(|_| {
            let db = db.clone();
            std::thread::spawn(move || {
                for _ in 0..300 {
                    db.flush().expect("a flush failed while another ran");
                }
            })
        })
        .collect();
    for f in flushers {
        f.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let side = std::fs::read(dir.path().join("bitsled.seq")).unwrap();
    assert_eq!(side.len(), 12, "the side file holds one whole record");
    drop(db);
    let db = Config::new(dir.path()).flush_interval(None).open().expect("reopen");
    assert!(db.verify().unwrap().is_ok());
}
