//! Invariant: concurrent writers lose no update. Four threads each set
//! 100,000 bits on overlapping pages of one key (and clear some of their own);
//! the final bitmap equals the union computed by a model, and a BITOP reading
//! the key meanwhile always sees whole pages.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bitsled::{BitOp, Config};
use rand::{Rng, SeedableRng};

const THREADS: u64 = 4;
const PER_THREAD: usize = 100_000;
/// Eight pages shared by every thread.
const SPAN: u64 = 8 * 32_768;

#[test]
fn concurrent_setbit_loses_no_update() {
    let seed: u64 = rand::random();
    println!("seed {seed}");
    let dir = tempfile::tempdir().unwrap();
    // A small dirty budget makes write-backs run while threads write.
    let db = Config::new(dir.path()).dirty_bytes(256 << 10).flush_interval(None).open().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let db = db.clone();
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut runs = 0u64;
            while !stop.load(Ordering::Relaxed) {
                db.bitop(BitOp::Or, b"copy", &[b"shared"]).unwrap();
                let n = db.bitcount(b"copy", None).unwrap();
                let listed = db.ones(b"copy", ..).unwrap().count() as u64;
                assert_eq!(n, listed, "stored count of a BITOP result equals its listed bits");
                runs += 1;
            }
            runs
        })
    };
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ t);
                let mut mine = Vec::with_capacity(PER_THREAD);
                for _ in 0..PER_THREAD {
                    // Each thread owns offsets congruent to t mod THREADS, so
                    // clears by one thread never undo another's sets.
                    let off = rng.gen_range(0..SPAN / THREADS) * THREADS + t;
                    db.setbit(b"shared", off, true).unwrap();
                    mine.push(off);
                }
                // Clear every tenth of this thread's own bits again.
                let cleared: Vec<u64> = mine.iter().copied().step_by(10).collect();
                for &off in &cleared {
                    db.setbit(b"shared", off, false).unwrap();
                }
                let cleared: BTreeSet<u64> = cleared.into_iter().collect();
                mine.into_iter().filter(|o| !cleared.contains(o)).collect::<BTreeSet<u64>>()
            })
        })
        .collect();
    let mut expected = BTreeSet::new();
    for h in handles {
        expected.extend(h.join().unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    let runs = reader.join().unwrap();
    println!("{runs} concurrent BITOP runs");
    assert_eq!(db.bitcount(b"shared", None).unwrap(), expected.len() as u64);
    let got: BTreeSet<u64> = db.ones(b"shared", ..).unwrap().map(Result::unwrap).collect();
    assert_eq!(got, expected);
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "{report:?}");
}

/// Writers on different keys run in parallel and each key ends exactly as
/// its writer left it.
#[test]
fn writers_on_distinct_keys() {
    let dir = tempfile::tempdir().unwrap();
    let db = Config::new(dir.path()).flush_interval(None).open().unwrap();
    let handles: Vec<_> = (0..4u64)
        .map(|t| {
            let db = db.clone();
            std::thread::spawn(move || {
                let key = format!("k{t}");
                let offs: Vec<u64> = (0..20_000u64).map(|i| i * 7 + t).collect();
                for &o in &offs {
                    db.setbit(key.as_bytes(), o, true).unwrap();
                }
                db.delete(format!("gone{t}").as_bytes()).unwrap();
                offs.len() as u64
            })
        })
        .collect();
    for (t, h) in handles.into_iter().enumerate() {
        let n = h.join().unwrap();
        assert_eq!(db.bitcount(format!("k{t}").as_bytes(), None).unwrap(), n);
    }
    db.flush().unwrap();
    assert!(db.verify().unwrap().is_ok());
}
