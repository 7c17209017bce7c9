//! `Db::compact_into`: a compacted copy holds exactly the live keys (bytes,
//! length, set-bit count, expiry), verifies clean, and is no larger on disk
//! than the store full of garbage it came from.

use std::collections::BTreeMap;
use std::time::{SystemTime, UNIX_EPOCH};

use bitsled::{Config, Db, ExpireCondition, Expiry, KeyStats};
use rand::{Rng, SeedableRng};

const PAGE: usize = 4096;

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

fn open(dir: &std::path::Path) -> Db {
    Config::new(dir).flush_interval(None).open().unwrap()
}

/// Values of every encoding: dense (random bytes), sparse (a few bits),
/// EWAH (long runs of ones with a few literals), holes of all-zero pages,
/// and an empty value.
fn values(rng: &mut rand::rngs::StdRng) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    let mut dense = vec![0u8; 3 * PAGE + 100];
    rng.fill(&mut dense[..]);
    out.push((b"dense".to_vec(), dense));
    let mut sparse = vec![0u8; 40 * PAGE];
    for _ in 0..200 {
        let i = rng.gen_range(0..sparse.len());
        sparse[i] |= 1 << rng.gen_range(0..8);
    }
    out.push((b"sparse".to_vec(), sparse));
    // Full words with a few words of alternating bits (many runs each):
    // EWAH's literals are smaller than the run list.
    let mut ewah = vec![0xffu8; 5 * PAGE];
    for i in (0..ewah.len() - 8).step_by(1000) {
        ewah[i..i + 8].fill(0x55);
    }
    out.push((b"ewah".to_vec(), ewah));
    // Runs of 16 bits every 800 bits: a run list.
    let mut runs = vec![0u8; 5 * PAGE];
    for i in (0..runs.len() - 2).step_by(100) {
        runs[i..i + 2].fill(0xff);
    }
    out.push((b"runs".to_vec(), runs));
    // Pages 0 and 300 only: 299 pages in between are not stored.
    let mut holes = vec![0u8; 301 * PAGE];
    holes[7] = 0x80;
    holes[300 * PAGE + 5] = 0x01;
    out.push((b"holes".to_vec(), holes));
    out.push((b"empty".to_vec(), Vec::new()));
    out.push((b"bin\x00\xff key".to_vec(), vec![1, 2, 3]));
    for i in 0..50u32 {
        let mut v = vec![0u8; 2 * PAGE];
        rng.fill(&mut v[..PAGE]);
        out.push((format!("small:{i}").into_bytes(), v));
    }
    out
}

fn stats(db: &Db, key: &[u8]) -> KeyStats {
    db.key_stats(key).unwrap().unwrap()
}

#[test]
fn compacted_copy_keeps_every_live_key() {
    let dir = tempfile::tempdir().unwrap();
    let src_dir = dir.path().join("db");
    let dest = dir.path().join("db.compact");
    let db = open(&src_dir);
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);

    // Garbage: values written, flushed, then deleted or overwritten.
    for round in 0..3 {
        for i in 0..60u32 {
            let mut v = vec![0u8; 4 * PAGE];
            rng.fill(&mut v[..]);
            db.set(format!("gone:{i}").as_bytes(), &v).unwrap();
            if i < 50 {
                // Overwritten below.
                db.set(format!("small:{i}").as_bytes(), &v).unwrap();
            }
        }
        db.flush().unwrap();
        for i in 0..60u32 {
            assert!(db.delete(format!("gone:{i}").as_bytes()).unwrap(), "round {round}");
        }
        db.flush().unwrap();
    }
    let mut expected: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for (k, v) in values(&mut rng) {
        db.set(&k, &v).unwrap();
        expected.insert(k, v);
    }
    // Bit-by-bit changes, partly still unflushed when compacting.
    db.set_bits(b"dense", &[0, 9, 100_000], true).unwrap();
    db.setbit(b"fresh", 70_000, true).unwrap();
    // Paged (two pages), then left with one small page: the copy keeps it
    // in its entry.
    db.set_bits(b"shrunk", &[5, 40_000], true).unwrap();
    db.setbit(b"shrunk", 5, false).unwrap();
    for key in [b"dense".to_vec(), b"fresh".to_vec(), b"shrunk".to_vec()] {
        expected.insert(key.clone(), db.get(&key).unwrap().unwrap());
    }
    // Expiries: far in the future (kept), and one that has already passed
    // (the key is gone, so not copied).
    let later = now_ms() + 3_600_000;
    assert!(db.expire_at(b"sparse", later, ExpireCondition::Always).unwrap());
    assert!(db.expire_at(b"small:3", later + 1000, ExpireCondition::Always).unwrap());
    db.set(b"expired", b"x").unwrap();
    assert!(db.expire_at(b"expired", 1, ExpireCondition::Always).unwrap());

    let st = [stats(&db, b"dense"), stats(&db, b"sparse"), stats(&db, b"ewah"), stats(&db, b"runs")];
    assert!(
        st[0].dense_pages > 0 && st[1].sparse_pages > 0 && st[2].ewah_pages > 0 && st[3].runs_pages > 0,
        "a value of every encoding: {st:?}"
    );

    db.flush().unwrap();
    let size_before = db.size_on_disk().unwrap();
    let report = db.compact_into(&dest).unwrap();
    assert_eq!(report.keys, expected.len() as u64);
    assert!(report.bytes_before > 0 && report.bytes_after > 0);
    assert!(report.bytes_after <= report.bytes_before, "{report:?}");
    // The source's size as the report saw it, bracketed by measurements
    // before and after (sled's own flusher may still append to the log, so
    // the file can only have grown since).
    assert!(size_before <= report.bytes_before, "{size_before} > {report:?}");
    assert!(report.bytes_before <= db.size_on_disk().unwrap(), "{report:?}");

    let new = open(&dest);
    // The report counts the pages the copy stores.
    let pages: u64 = expected.keys().map(|k| stats(&new, k).pages()).sum();
    assert_eq!(report.pages, pages);
    assert!(stats(&db, b"shrunk").pages() == 1 && stats(&new, b"shrunk").inline, "the copy keeps the one page");
    let mut keys = new.keys(b"*").unwrap();
    keys.sort();
    assert_eq!(keys, expected.keys().cloned().collect::<Vec<_>>());
    for (k, v) in &expected {
        assert_eq!(new.get(k).unwrap().as_ref(), Some(v), "key {}", String::from_utf8_lossy(k));
        assert_eq!(new.strlen(k).unwrap(), v.len() as u64);
        // The same pages and encodings (but for the value whose one page
        // the copy keeps in its entry); the entries differ only in the
        // bitmap id's varint.
        let (a, b) = (new.key_stats(k).unwrap().unwrap(), db.key_stats(k).unwrap().unwrap());
        if k != b"shrunk" {
            assert_eq!(
                KeyStats { stored_bytes: 0, ..a },
                KeyStats { stored_bytes: 0, ..b },
                "same pages and encodings"
            );
            assert!(a.stored_bytes.abs_diff(b.stored_bytes) <= 9, "{a:?} against {b:?}");
        }
        assert_eq!(new.bitcount(k, None).unwrap(), db.bitcount(k, None).unwrap());
        let want = match k.as_slice() {
            b"sparse" => Expiry::At(later),
            b"small:3" => Expiry::At(later + 1000),
            _ => Expiry::Never,
        };
        assert_eq!(new.expiry(k).unwrap(), want, "key {}", String::from_utf8_lossy(k));
    }
    let v = new.verify().unwrap();
    assert!(v.is_ok(), "{:?}", v.problems);
    assert_eq!(v.keys, expected.len() as u64);
    assert_eq!(v.pages, pages);
    // The source is unchanged.
    assert!(db.verify().unwrap().is_ok());
    assert_eq!(db.get(b"ewah").unwrap().as_ref(), expected.get(b"ewah".as_slice()));
    drop(new);

    // The copy survives a reopen, and its expiries still work there.
    let c = later;
    let reopened = Config::new(&dest).flush_interval(None).clock(move || c + 1).open().unwrap();
    assert!(!reopened.exists(b"sparse").unwrap());
    assert!(reopened.exists(b"small:3").unwrap());
    assert_eq!(reopened.keys(b"*").unwrap().len(), expected.len() - 1);
}

#[test]
fn compaction_target_must_be_new_or_empty() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(&dir.path().join("db"));
    db.setbit(b"k", 5, true).unwrap();

    let full = dir.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("x"), b"x").unwrap();
    assert!(matches!(db.compact_into(&full), Err(bitsled::Error::InvalidArgument(_))));
    assert!(db.compact_into(&dir.path().join("db")).is_err(), "not into itself");

    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let report = db.compact_into(&empty).unwrap();
    // A one-bit key is kept inline: no page.
    assert_eq!((report.keys, report.pages), (1, 0));
    assert_eq!(open(&empty).get(b"k").unwrap(), Some(vec![0x04]));

    // An empty database compacts into an empty one.
    let none = open(&dir.path().join("none"));
    let report = none.compact_into(&dir.path().join("none2")).unwrap();
    assert_eq!((report.keys, report.pages), (0, 0));
}
