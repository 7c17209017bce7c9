//! Replication at the store's level (`bitsled::replication`): a follower
//! that loads a master's snapshot and applies its change feed holds the
//! master's keys after every apply, across a full sync taken while the
//! master writes, a reopen of the follower, and a promotion.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bitsled::replication::{Feed, SyncItem};
use bitsled::{BitOp, Db, Error, ExpireCondition};

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("k{i}").into_bytes()
}

/// One random change of the master: bits set and cleared (dense and
/// sparse, near and far), strings, deletes, renames, BITOP results,
/// expiries, Bloom filters, and now and then a flushed database.
fn random_change(db: &Db, rng: &mut Rng) {
    let k = key(rng.below(120));
    let r = match rng.below(20) {
        0..=7 => {
            let offset = match rng.below(3) {
                0 => rng.below(4096),
                1 => rng.below(1 << 20),
                _ => rng.below(1 << 23),
            };
            db.setbit(&k, offset, rng.below(4) != 0).map(|_| ())
        }
        8 => {
            let offsets: Vec<u64> = (0..200).map(|_| rng.below(1 << 18)).collect();
            db.set_bits(&k, &offsets, true).map(|_| ())
        }
        9 => db.set(&k, format!("v{}", rng.next()).as_bytes()),
        10 => db.delete(&k).map(|_| ()),
        11 => db.rename(&k, &key(rng.below(120)), false).map(|_| ()),
        12 | 13 => {
            let (a, b) = (key(rng.below(120)), key(rng.below(120)));
            let op = [BitOp::And, BitOp::Or, BitOp::Xor][usize::try_from(rng.below(3)).unwrap()];
            db.bitop(op, &k, &[&a, &b]).map(|_| ())
        }
        // Expiries that pass at once or in an hour: none falls between
        // the test's reads of the two stores.
        14 => db.expire_at(&k, db.now_ms() + rng.below(2) * 3_600_000, ExpireCondition::Always).map(|_| ()),
        15 => db.bloom(format!("bf{}", rng.below(10)).into_bytes()).add(rng.next().to_le_bytes()).map(|_| ()),
        16 => db.select(1).and_then(|d| d.setbit(&k, rng.below(1 << 16), true)).map(|_| ()),
        17 if rng.below(20) == 0 => db.select(1).and_then(|d| d.flush_db()).map(|_| ()),
        _ => db.setbit(&k, rng.below(64), true).map(|_| ()),
    };
    // Wrong types (a Bloom key under SETBIT) and renames of missing keys
    // are part of the load.
    if let Err(e) = r {
        assert!(matches!(e, Error::WrongType | Error::InvalidArgument(_)), "{e}");
    }
}

/// Every key of databases 0 and 1 with its value: a string's length and
/// CRC-32, or a Bloom filter's count.
fn contents(db: &Db) -> BTreeMap<(u32, Vec<u8>), String> {
    let mut out = BTreeMap::new();
    for index in [0, 1] {
        let d = db.select(index).unwrap();
        for k in d.keys(b"*").unwrap() {
            let v = match d.get(&k) {
                Ok(Some(v)) => format!("{} bytes, crc {:08x}", v.len(), crc32fast::hash(&v)),
                Ok(None) => continue,
                Err(Error::WrongType) => format!("bloom {:?}", d.bloom(&k).card().unwrap()),
                Err(e) => panic!("{e}"),
            };
            out.insert((index, k), v);
        }
    }
    out
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// Asserts that a follower's contents are the master's, naming the first
/// key that differs.
fn same(replica: &BTreeMap<(u32, Vec<u8>), String>, master: &BTreeMap<(u32, Vec<u8>), String>, round: usize) {
    for (k, v) in master {
        assert_eq!(replica.get(k), Some(v), "round {round}: key {k:?}");
    }
    assert_eq!(replica.len(), master.len(), "round {round}: the follower has keys the master has not");
}

/// Applies every frame the feed holds after `at` to `replica`.
fn catch_up(feed: &Feed, replica: &Db, at: &mut u64) {
    let frames = feed.frames_after(*at, Duration::ZERO).expect("the backlog holds the frames");
    if let Some((end, _)) = frames.last() {
        let refs: Vec<(u64, &[u8])> = frames.iter().map(|(e, f)| (*e, &f[..])).collect();
        replica.apply_frames("m", &refs).unwrap();
        *at = *end;
    }
}

/// Loads `replica` from a snapshot of `master`, as a replica connecting
/// to a running master does; returns the offset reached.
fn full_sync(master: &Db, feed: &Feed, replica: &Db) -> u64 {
    replica.follow();
    let mut snapshot = master.snapshot().unwrap();
    let start = snapshot.offset();
    let mut end_sent = false;
    let mut at = start;
    let mut frames: Vec<(u64, Arc<[u8]>)> = Vec::new();
    let mut next = || -> bitsled::Result<SyncItem> {
        if !end_sent {
            if let Some(chunk) = snapshot.next_chunk(16 << 10)? {
                return Ok(SyncItem::Chunk(chunk));
            }
            end_sent = true;
            return Ok(SyncItem::End { consistent_at: feed.offset() });
        }
        if frames.is_empty() {
            frames = feed.frames_after(at, Duration::from_secs(5)).expect("the backlog holds the frames");
            frames.reverse();
        }
        let (end, frame) = frames.pop().expect("a frame up to the consistent offset");
        at = end;
        Ok(SyncItem::Frame { end, frame: frame.to_vec() })
    };
    replica.load_from_master("m", start, &mut next).unwrap()
}

/// Invariant: a load cut short (the link fails before the first chunk,
/// or after two) leaves a store marked as loading, which reopens as a
/// follower that must load again and refuses writes meanwhile; loading
/// again gives the master's keys. The master was restarted before the
/// sync, and the follower, promoted, gives its new values ids the master
/// never used (the master's old values stay intact).
#[test]
fn a_load_cut_short_loads_again_after_a_restart() {
    for cut in [0, 2] {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let master = Db::open(a.path()).unwrap();
        // Paged values made first and never changed: they hold the
        // lowest bitmap ids, which a promoted follower must not reuse.
        for i in 0..100u64 {
            master.set_bits(format!("live{i}").as_bytes(), &[i, (1 << 20) + i, (1 << 22) + i], true).unwrap();
        }
        let mut rng = Rng(0xabc + cut);
        for _ in 0..3000 {
            random_change(&master, &mut rng);
        }
        drop(master);
        let master = Db::open(a.path()).unwrap();
        let feed = master.start_feed(0, 1 << 30).unwrap();
        let replica = Db::open(b.path()).unwrap();
        replica.setbit(b"own", 3, true).unwrap();
        replica.flush().unwrap();
        replica.follow();
        let mut snapshot = master.snapshot().unwrap();
        let start = snapshot.offset();
        let mut sent = 0;
        let mut next = || -> bitsled::Result<SyncItem> {
            sent += 1;
            if sent > cut {
                return Err(Error::Io(std::io::Error::other("the link broke")));
            }
            Ok(SyncItem::Chunk(snapshot.next_chunk(4 << 10)?.expect("more than two chunks")))
        };
        assert!(replica.load_from_master("m", start, &mut next).is_err());
        assert!(replica.is_loading());
        drop(replica);
        let replica = Db::open(b.path()).unwrap();
        assert!(replica.is_following() && replica.is_loading(), "cut after {cut}");
        assert!(replica.follower_state().unwrap().unwrap().loading);
        assert!(matches!(replica.setbit(b"x", 1, true), Err(Error::ReadOnlyReplica)));
        let mut at = full_sync(&master, &feed, &replica);
        catch_up(&feed, &replica, &mut at);
        assert!(!replica.is_loading() && !replica.follower_state().unwrap().unwrap().loading);
        let expected = contents(&master);
        same(&contents(&replica), &expected, 0);
        replica.stop_following().unwrap();
        for i in 0..60 {
            let name = format!("new{i}");
            replica.setbit(name.as_bytes(), 1 << 18, true).unwrap();
            replica.bitop(BitOp::Or, format!("copy{i}").as_bytes(), &[&key(i), name.as_bytes()]).unwrap();
        }
        replica.flush().unwrap();
        let mut after = contents(&replica);
        after.retain(|(_, k), _| !k.starts_with(b"new") && !k.starts_with(b"copy"));
        same(&after, &expected, 1);
    }
}

/// Invariant: after each apply, the follower holds exactly the master's
/// keys and values (both databases), whatever the master did: write-backs
/// with delta records and folds, reclamation, flushed databases, expiry.
/// A second follower loaded while the master writes concurrently holds
/// them too once it catches up; a reopened follower goes on following
/// from its recorded offset; a promoted follower's new values never
/// reuse a master's bitmap id.
#[test]
fn a_follower_holds_the_masters_keys() {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let master = Db::open(dirs[0].path()).unwrap();
    let feed = master.start_feed(0, 1 << 30).unwrap();
    let mut replica = Db::open(dirs[1].path()).unwrap();
    let mut rng = Rng(0x5eed);
    for _ in 0..200 {
        random_change(&master, &mut rng);
    }
    let mut at = full_sync(&master, &feed, &replica);
    for round in 0..30 {
        for _ in 0..150 {
            random_change(&master, &mut rng);
        }
        if round % 7 == 6 {
            // A full fold: every bucket and logged page written whole, the
            // delta records deleted.
            assert!(master.verify().unwrap().problems.is_empty());
        }
        master.flush().unwrap();
        catch_up(&feed, &replica, &mut at);
        // Counted before the master's reads delete the keys they find
        // expired (a replica counts them until the master's deletion
        // arrives, as Redis's do).
        assert_eq!(replica.dbsize().unwrap(), master.dbsize().unwrap(), "round {round}");
        same(&contents(&replica), &contents(&master), round);
        assert!(matches!(replica.setbit(b"x", 1, true), Err(Error::ReadOnlyReplica)));
        if round == 10 {
            // Reopened, the follower still follows from its offset.
            drop(replica);
            replica = Db::open(dirs[1].path()).unwrap();
            assert!(replica.is_following());
            let state = replica.follower_state().unwrap().unwrap();
            assert_eq!((state.offset, state.loading, state.replid.as_str()), (at, false, "m"));
        }
    }

    // A full sync while the master keeps writing.
    let second = Db::open(dirs[2].path()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (master, stop) = (master.clone(), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut rng = Rng(0xfeed);
            while !stop.load(Ordering::SeqCst) {
                random_change(&master, &mut rng);
                if rng.below(50) == 0 {
                    master.flush().unwrap();
                }
            }
        })
    };
    let mut at2 = full_sync(&master, &feed, &second);
    stop.store(true, Ordering::SeqCst);
    writer.join().unwrap();
    master.flush().unwrap();
    catch_up(&feed, &second, &mut at2);
    catch_up(&feed, &replica, &mut at);
    let expected = contents(&master);
    same(&contents(&second), &expected, 100);
    // A follower's store is sound: it verifies (with the fold it may not
    // make laid over it), holds the same keys afterwards, and goes on
    // following; a copy of it, promoted (which folds its master's delta
    // records), verifies and holds the same keys too.
    for follower in [&replica, &second] {
        let report = follower.verify().unwrap();
        assert!(report.problems.is_empty(), "{:?}", &report.problems[..report.problems.len().min(5)]);
        assert!(report.keys > 50, "{report:?}");
        same(&contents(follower), &expected, 104);
    }
    for _ in 0..300 {
        random_change(&master, &mut rng);
    }
    master.flush().unwrap();
    catch_up(&feed, &second, &mut at2);
    catch_up(&feed, &replica, &mut at);
    let expected = contents(&master);
    same(&contents(&second), &expected, 105);
    same(&contents(&replica), &expected, 106);
    drop(second);
    let copy = tempfile::tempdir().unwrap();
    for entry in walk(dirs[2].path()) {
        let to = copy.path().join(entry.strip_prefix(dirs[2].path()).unwrap());
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(&entry, &to).unwrap();
    }
    let promoted = Db::open(copy.path()).unwrap();
    assert!(promoted.is_following());
    promoted.stop_following().unwrap();
    let report = promoted.verify().unwrap();
    assert!(report.problems.is_empty(), "{:?}", &report.problems[..report.problems.len().min(5)]);
    same(&contents(&promoted), &expected, 103);
    same(&contents(&replica), &expected, 101);

    // Promoted, the follower writes; its new values take fresh ids, so
    // the values it holds stay as they were.
    replica.stop_following().unwrap();
    assert!(!replica.is_following());
    for i in 0..50 {
        replica.bitop(BitOp::Or, format!("new{i}").as_bytes(), &[&key(i), &key(i + 1)]).unwrap();
        replica.setbit(format!("new{i}").as_bytes(), 1 << 20, true).unwrap();
    }
    replica.flush().unwrap();
    let mut after = contents(&replica);
    after.retain(|(_, k), _| !k.starts_with(b"new"));
    same(&after, &expected, 102);
}

/// Invariant: a follower promoted before it ever restarted gives its new
/// values bitmap ids its master never used, even when the master was
/// restarted and made no new value since (so no frame carried its ids):
/// the master's values stay intact.
#[test]
fn a_promoted_follower_takes_fresh_ids() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let master = Db::open(a.path()).unwrap();
    // Values of three pages each: paged, so each takes a bitmap id.
    for i in 0..100u64 {
        master.set_bits(format!("live{i}").as_bytes(), &[i, (1 << 20) + i, (1 << 22) + i], true).unwrap();
    }
    drop(master);
    let master = Db::open(a.path()).unwrap();
    let feed = master.start_feed(0, 1 << 30).unwrap();
    let replica = Db::open(b.path()).unwrap();
    full_sync(&master, &feed, &replica);
    let expected = contents(&master);
    replica.stop_following().unwrap();
    for i in 0..100u64 {
        replica.set_bits(format!("new{i}").as_bytes(), &[(1 << 20) + i, (1 << 21) + i, (1 << 22) + i], true).unwrap();
    }
    replica.flush().unwrap();
    let mut after = contents(&replica);
    after.retain(|(_, k), _| !k.starts_with(b"new"));
    same(&after, &expected, 0);
}
