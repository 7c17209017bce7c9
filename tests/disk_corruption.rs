//! Invariant: bytes damaged in sled's own files between runs never make
//! bitsled panic and never lose acknowledged data silently. sled recovers
//! its log up to the first damaged message and drops the rest; bitsled then
//! finds its store behind the write-back its last flush acknowledged and
//! refuses to open (`Corrupted`). So opening either fails with an error, or
//! succeeds with every key exactly as flushed. Randomised: prints its seed.

use bitsled::{Config, Db};
use rand::{Rng, SeedableRng};

fn fill(dir: &std::path::Path) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    let db = Config::new(dir).flush_interval(None).open().unwrap();
    for k in 0..8u64 {
        let key = format!("k{k}");
        let offs: Vec<u64> = (0..3000).map(|i| (i * 97 + k * 13) % 300_000).collect();
        db.set_bits(key.as_bytes(), &offs, true).unwrap();
    }
    db.set(b"dense", &vec![0x5a; 20_000]).unwrap();
    db.flush().unwrap();
    snapshot(&db)
}

fn snapshot(db: &Db) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    db.keys(b"*").unwrap().into_iter().map(|k| (k.clone(), db.get(&k).unwrap())).collect()
}

/// Reads every key in every way; returns (keys readable, verify problems).
fn read_everything(db: &Db) -> (usize, usize) {
    let mut readable = 0;
    if let Ok(keys) = db.keys(b"*") {
        for k in keys {
            if db.get(&k).is_ok() {
                readable += 1;
            }
            let _ = db.bitcount(&k, Some(bitsled::Span::bytes(1, -2)));
            let _ = db.getbit(&k, 12_345);
        }
    }
    (readable, db.verify().map_or(usize::MAX, |r| r.problems.len()))
}

#[test]
fn damaged_sled_files_never_panic() {
    let seed: u64 = rand::random();
    println!("seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut opened = 0;
    for round in 0..12 {
        let dir = tempfile::tempdir().unwrap();
        let flushed = fill(dir.path());
        let file = dir.path().join("db");
        let mut bytes = std::fs::read(&file).unwrap();
        // Damage a few bytes past sled's first segment header.
        for _ in 0..rng.gen_range(1..8) {
            let at = rng.gen_range(64..bytes.len());
            bytes[at] ^= 1 << rng.gen_range(0..8);
        }
        std::fs::write(&file, &bytes).unwrap();
        let outcome = std::panic::catch_unwind(|| match Config::new(dir.path()).flush_interval(None).open() {
            Ok(db) => {
                let (readable, problems) = read_everything(&db);
                println!("round {round}: opened, {readable} of 9 keys readable, {problems} verify problems");
                assert_eq!(snapshot(&db), flushed, "round {round}: opened with data other than what was flushed");
                true
            }
            Err(e) => {
                println!("round {round}: refused: {e}");
                assert!(
                    matches!(e, bitsled::Error::Corrupted { .. } | bitsled::Error::Io(_) | bitsled::Error::Storage(_)),
                    "{e:?}"
                );
                false
            }
        });
        match outcome {
            Ok(true) => opened += 1,
            Ok(false) => {}
            Err(_) => panic!("round {round} (seed {seed}): a damaged store made bitsled panic"),
        }
    }
    println!("{opened} of 12 damaged stores opened");
}
