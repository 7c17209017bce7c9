//! Invariant: after kill -9 at any moment (also during open and during a
//! BITOP), reopening gives exactly the state after some prefix of the
//! operations that includes every operation acknowledged by a completed
//! `flush()`; `verify()` is clean; and that holds again and again as the
//! store keeps being reopened and killed.
//!
//! The test runs its own binary as the child (`BITSLED_CRASH_CHILD` set):
//! the child applies a deterministic stream of operations and prints
//! `ack N` after each flush that covers operations `0..=N`. Set
//! `BITSLED_CRASH_CYCLES` to run more kill cycles (the default suits CI).
//!
//! Besides small keys, two keys of 160 pages (640 KiB, more than the
//! child's dirty budget) take whole-value SETs and BITOPs, so kills land
//! while a result is half written back; the prefix check then shows that a
//! BITOP destination is entirely old or entirely new. Expiries (far in the
//! future, or in the past: a delete) are part of the compared state.
//!
//! Operations run in two databases; FLUSHDB, FLUSHALL, SWAPDB and MOVE
//! take part, so a kill can land just before or after a database switches
//! keyspace, and the old keyspace's records are reclaimed across kills.
//! Small offsets and short SET values keep keys inline in their metadata
//! bucket, and later writes promote them to pages.
//!
//! A HyperLogLog key (PFADD) and a Bloom filter (BF.ADD and BF.MADD,
//! growing its chain of sub-filters) take part too. Their expected state comes from a
//! reference database that applies the same operations without crashing:
//! the HyperLogLog's bytes, and the filter's figures and answers for a fixed
//! set of probe items.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bitsled::model::Model;
use bitsled::{BitOp, Config, Db, ExpireCondition, Expiry};
use rand::{Rng, SeedableRng};

const KEYS: [&[u8]; 7] = [b"k0", b"k1", b"k2", b"k3", b"big0", b"big1", b"hll"];
/// The small keys are `KEYS[..SMALL]`, the big ones up to `HLL`.
const SMALL: usize = 4;
/// Index of the HyperLogLog key in `KEYS`.
const HLL: usize = 6;
/// The Bloom filter's key.
const BLOOM: &[u8] = b"bloom";
/// Items added to the filter are drawn from `item0 .. item{ITEMS}`; the
/// first `PROBES` of them are probed when states are compared.
const ITEMS: u64 = 3000;
const PROBES: u64 = 600;
/// Length of a big key's value: 160 pages.
const BIG_LEN: usize = 160 * 4096;
/// Expiry times are this far in the future (2100-01-01), so none passes
/// during the test.
const FAR: u64 = 4_102_444_800_000;
/// Offsets span eight pages, so BITOP and SET touch many pages.
const SPAN: u64 = 8 * 32_768;
/// Operations between flushes in the child.
const FLUSH_EVERY: u64 = 25;
/// Databases the operations run in.
const DBS: usize = 2;

/// Operation `i` of the stream of `seed`.
#[derive(Debug)]
enum Op {
    SetBit(usize, u64, bool),
    SetBits(usize, Vec<u64>),
    Bitop(BitOp, usize, Vec<usize>),
    Set(usize, Vec<u8>),
    Delete(usize),
    /// Expire at this Unix time in ms (1: in the past, so a delete).
    ExpireAt(usize, u64),
    Persist(usize),
    PfAdd(Vec<Vec<u8>>),
    BfAdd(Vec<Vec<u8>>),
    FlushDb,
    FlushAll,
    SwapDb,
    /// MOVE the key to the other database.
    Move(usize),
}

/// An operation and the database it runs in.
#[derive(Debug)]
struct Step {
    db: usize,
    op: Op,
}

fn op(seed: u64, i: u64) -> Step {
    let mut r = rand::rngs::StdRng::seed_from_u64(seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let db = usize::from(r.gen_bool(0.3));
    Step { db, op: db_op(&mut r, i) }
}

fn db_op(r: &mut impl Rng, i: u64) -> Op {
    let k = r.gen_range(0..SMALL);
    let big = r.gen_range(SMALL..HLL);
    let ops = [BitOp::And, BitOp::Or, BitOp::Xor, BitOp::Diff, BitOp::AndOr, BitOp::One];
    // A third of the small-key writes stay near the start: inline values
    // (up to 512 bits) and their promotion to pages.
    let span = if r.gen_bool(0.3) { 600 } else { SPAN };
    match r.gen_range(0..118) {
        110 => Op::FlushDb,
        111 => Op::FlushAll,
        112..=115 => Op::Move(r.gen_range(0..KEYS.len())),
        116..=117 => Op::SwapDb,
        100..=104 => {
            Op::PfAdd((0..r.gen_range(0..400)).map(|_| format!("u{}", r.gen_range(0..100_000)).into_bytes()).collect())
        }
        105..=109 => {
            // Half of them one item: a small filter's fast path, whose
            // change a write-back stores as the bits it set.
            let n = if r.gen_bool(0.5) { 1 } else { r.gen_range(2..60) };
            Op::BfAdd((0..n).map(|_| format!("item{}", r.gen_range(0..ITEMS)).into_bytes()).collect())
        }
        0..=44 => Op::SetBit(k, r.gen_range(0..span), r.gen_bool(0.8)),
        45..=62 => Op::SetBits(k, (0..r.gen_range(1..2000)).map(|_| r.gen_range(0..span)).collect()),
        63..=76 => Op::Bitop(ops[r.gen_range(0..ops.len())], k, vec![r.gen_range(0..SMALL), r.gen_range(0..SMALL)]),
        77..=85 => {
            let len = r.gen_range(0..(span / 8) as usize);
            let fill: u8 = r.gen();
            Op::Set(k, (0..len).map(|j| if j % 7 == 0 { fill } else { 0 }).collect())
        }
        86..=88 => Op::Delete(k),
        89..=91 => Op::ExpireAt(r.gen_range(0..KEYS.len()), if r.gen_bool(0.2) { 1 } else { FAR + i }),
        92 => Op::Persist(r.gen_range(0..KEYS.len())),
        93..=94 => {
            // Dense random bytes over 160 pages: every page is written.
            let v: Vec<u8> = (0..BIG_LEN).map(|_| if r.gen_bool(0.3) { r.gen() } else { 0 }).collect();
            Op::Set(big, v)
        }
        95..=97 => {
            let op = ops[r.gen_range(0..ops.len())];
            Op::Bitop(op, big, vec![r.gen_range(SMALL..HLL), r.gen_range(SMALL..HLL)])
        }
        _ => {
            // Within 64 pages: `set_bits` is atomic per group of 64 pages
            // only (a crash may keep a prefix of the groups).
            let first = r.gen_range(0..=96) * 32_768;
            Op::SetBits(big, (0..r.gen_range(1..5000)).map(|_| first + r.gen_range(0..64 * 32_768)).collect())
        }
    }
}

/// Applies `step` through `db`, a handle of database 0.
fn apply_db(db: &Db, step: &Step) {
    let other = u32::from(step.db == 0);
    let db = &db.select(u32::from(step.db == 1)).unwrap();
    match &step.op {
        Op::SetBit(k, o, v) => {
            db.setbit(KEYS[*k], *o, *v).unwrap();
        }
        Op::SetBits(k, offs) => {
            db.set_bits(KEYS[*k], offs, true).unwrap();
        }
        Op::Bitop(o, d, s) => {
            let srcs: Vec<&[u8]> = s.iter().map(|&i| KEYS[i]).collect();
            db.bitop(*o, KEYS[*d], &srcs).unwrap();
        }
        Op::Set(k, v) => db.set(KEYS[*k], v).unwrap(),
        Op::Delete(k) => {
            db.delete(KEYS[*k]).unwrap();
        }
        Op::ExpireAt(k, at) => {
            db.expire_at(KEYS[*k], *at, ExpireCondition::Always).unwrap();
        }
        Op::Persist(k) => {
            db.persist(KEYS[*k]).unwrap();
        }
        Op::PfAdd(elements) => {
            db.hll(KEYS[HLL]).add(elements).unwrap();
        }
        Op::BfAdd(items) if items.len() == 1 => {
            db.bloom(BLOOM).add(&items[0]).unwrap();
        }
        Op::BfAdd(items) => {
            db.bloom(BLOOM).add_many(items).unwrap();
        }
        Op::FlushDb => {
            db.flush_db().unwrap();
        }
        Op::FlushAll => {
            db.flush_all().unwrap();
        }
        Op::SwapDb => db.swap_db(0, 1).unwrap(),
        Op::Move(k) => {
            db.move_key(KEYS[*k], other).unwrap();
        }
    }
}

/// The model: per database, values and the expiry times of the keys that
/// have one; and a reference database for the HyperLogLog and the Bloom
/// filter.
struct State {
    values: [Model; DBS],
    expiry: [HashMap<usize, u64>; DBS],
    reference: Db,
    _dir: tempfile::TempDir,
}

impl State {
    fn new() -> State {
        let dir = tempfile::tempdir().unwrap();
        let reference = Config::new(dir.path()).flush_interval(None).open().unwrap();
        State { values: Default::default(), expiry: Default::default(), reference, _dir: dir }
    }
}

fn apply_model(m: &mut State, step: &Step) {
    // The reference follows every operation on the HyperLogLog, the filter
    // and whole databases; the model takes the HyperLogLog's bytes from it.
    match &step.op {
        Op::PfAdd(_) | Op::BfAdd(_) | Op::FlushDb | Op::FlushAll | Op::SwapDb | Op::Move(_) => {
            apply_db(&m.reference, step);
        }
        Op::ExpireAt(k, _) | Op::Persist(k) if *k == HLL => apply_db(&m.reference, step),
        _ => {}
    }
    let d = step.db;
    if let Op::PfAdd(_) = step.op {
        match m.reference.select(u32::from(d == 1)).unwrap().get(KEYS[HLL]).unwrap() {
            Some(v) => m.values[d].set(KEYS[HLL], &v),
            None => {
                m.values[d].delete(KEYS[HLL]);
            }
        }
        return;
    }
    let (values, expiry) = (&mut m.values[d], &mut m.expiry[d]);
    match &step.op {
        // In-place writes keep the expiry.
        Op::SetBit(k, o, v) => {
            values.setbit(KEYS[*k], *o, *v);
        }
        Op::SetBits(k, offs) => {
            for &o in offs {
                values.setbit(KEYS[*k], o, true);
            }
        }
        // A BITOP destination and a SET value lose the expiry.
        Op::Bitop(o, dest, s) => {
            let srcs: Vec<&[u8]> = s.iter().map(|&i| KEYS[i]).collect();
            values.bitop(*o, KEYS[*dest], &srcs);
            expiry.remove(dest);
        }
        Op::Set(k, v) => {
            values.set(KEYS[*k], v);
            expiry.remove(k);
        }
        Op::Delete(k) => {
            values.delete(KEYS[*k]);
            expiry.remove(k);
        }
        Op::ExpireAt(k, at) => {
            if values.get(KEYS[*k]).is_some() {
                if *at < FAR {
                    values.delete(KEYS[*k]);
                    expiry.remove(k);
                } else {
                    expiry.insert(*k, *at);
                }
            }
        }
        Op::Persist(k) => {
            expiry.remove(k);
        }
        Op::PfAdd(_) | Op::BfAdd(_) => {}
        Op::FlushDb => {
            m.values[d] = Model::default();
            m.expiry[d].clear();
        }
        Op::FlushAll => {
            m.values = Default::default();
            m.expiry = Default::default();
        }
        Op::SwapDb => {
            m.values.swap(0, 1);
            m.expiry.swap(0, 1);
        }
        Op::Move(k) => {
            // MOVE does nothing when the key is missing here or exists there.
            let key = KEYS[*k];
            if let (Some(v), None) = (m.values[d].get(key), m.values[1 - d].get(key)) {
                m.values[d].delete(key);
                m.values[1 - d].set(key, &v);
                if let Some(at) = m.expiry[d].remove(k) {
                    m.expiry[1 - d].insert(*k, at);
                }
            }
        }
    }
}

/// The child: applies operations from `start` on, flushing every
/// `FLUSH_EVERY`, until killed.
fn child(dir: &str, seed: u64, start: u64) {
    // A short flush interval adds background write-backs at random moments
    // (each writes metadata delta records; FLUSHDB and FLUSHALL fold every
    // shard, and each open replays and folds); a small cache evicts pages
    // and clean buckets often.
    let db = Config::new(dir)
        .flush_interval(Some(Duration::from_millis(7)))
        .dirty_bytes(256 << 10)
        .cache_bytes(1 << 20)
        .open()
        .unwrap();
    let mut out = std::io::stdout();
    writeln!(out, "open").unwrap();
    out.flush().unwrap();
    for i in start.. {
        apply_db(&db, &op(seed, i));
        if (i + 1) % FLUSH_EVERY == 0 {
            db.flush().unwrap();
            writeln!(out, "ack {i}").unwrap();
            out.flush().unwrap();
        }
    }
}

/// A Bloom filter's figures (capacity, sub-filters, items) and answers for
/// the probe items, if there is one.
type BloomState = Option<(u64, u64, u64, Vec<bool>)>;

/// Per database: each key's value and expiry, and the Bloom filter.
#[derive(PartialEq)]
struct Snapshot {
    keys: Vec<(Option<Vec<u8>>, Expiry)>,
    bloom: Vec<BloomState>,
}

fn bloom_state(db: &Db) -> Vec<BloomState> {
    let probes: Vec<Vec<u8>> = (0..PROBES).map(|i| format!("item{i}").into_bytes()).collect();
    (0..DBS as u32)
        .map(|d| {
            let db = db.select(d).unwrap();
            let info = db.bloom(BLOOM).info().unwrap()?;
            Some((info.capacity, info.filters, info.items, db.bloom(BLOOM).contains_many(&probes).unwrap()))
        })
        .collect()
}

fn state(db: &Db) -> Snapshot {
    let mut keys = Vec::new();
    for d in 0..DBS as u32 {
        let db = db.select(d).unwrap();
        keys.extend(KEYS.iter().map(|k| (db.get(k).unwrap(), db.expiry(k).unwrap())));
    }
    Snapshot { keys, bloom: bloom_state(db) }
}

fn model_state(m: &State) -> Snapshot {
    let mut keys = Vec::new();
    for d in 0..DBS {
        keys.extend((0..KEYS.len()).map(|i| {
            let v = m.values[d].get(KEYS[i]);
            let e = match (&v, m.expiry[d].get(&i)) {
                (None, _) => Expiry::Missing,
                (Some(_), None) => Expiry::Never,
                (Some(_), Some(&at)) => Expiry::At(at),
            };
            (v, e)
        }));
    }
    Snapshot { keys, bloom: bloom_state(&m.reference) }
}

/// Length, set bits and expiry of each key, for failure messages.
fn describe(s: &Snapshot) -> String {
    let bloom: Vec<String> = s
        .bloom
        .iter()
        .map(|b| match b {
            None => "-".to_string(),
            Some((c, f, n, probes)) => {
                format!("capacity {c}, {f} filters, {n} items, {} probes found", probes.iter().filter(|&&p| p).count())
            }
        })
        .collect();
    s.keys
        .iter()
        .map(|(v, e)| match v {
            None => "-".to_string(),
            Some(v) => format!("{}B/{}/{e:?}", v.len(), v.iter().map(|b| b.count_ones()).sum::<u32>()),
        })
        .collect::<Vec<_>>()
        .join(" ")
        + &format!(" bloom: {}", bloom.join(" | "))
}

/// An operation without its bulk data, for failure messages.
fn summary(step: &Step) -> String {
    let op = match &step.op {
        Op::SetBits(k, offs) => format!("SetBits({k}, {} offsets)", offs.len()),
        Op::Set(k, v) => format!("Set({k}, {} bytes)", v.len()),
        Op::PfAdd(e) => format!("PfAdd({} elements)", e.len()),
        Op::BfAdd(e) => format!("BfAdd({} items)", e.len()),
        other => format!("{other:?}"),
    };
    format!("db{} {op}", step.db)
}

#[test]
fn kill_9_keeps_every_acknowledged_write() {
    if let Ok(dir) = std::env::var("BITSLED_CRASH_CHILD") {
        let seed = std::env::var("BITSLED_CRASH_SEED").unwrap().parse().unwrap();
        let start = std::env::var("BITSLED_CRASH_START").unwrap().parse().unwrap();
        child(&dir, seed, start);
        return;
    }
    let cycles: u32 = std::env::var("BITSLED_CRASH_CYCLES").ok().and_then(|s| s.parse().ok()).unwrap_or(50);
    let seed: u64 = rand::random();
    println!("seed {seed}, {cycles} cycles");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    // `done` operations are in the store; the model holds their result.
    let mut done = 0u64;
    let mut model = State::new();
    let mut kills_after_open = 0;
    for cycle in 0..cycles {
        let mut childp = Command::new(&exe)
            .args(["--exact", "kill_9_keeps_every_acknowledged_write", "--nocapture", "--test-threads=1"])
            .env("BITSLED_CRASH_CHILD", dir.path())
            .env("BITSLED_CRASH_SEED", seed.to_string())
            .env("BITSLED_CRASH_START", done.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // Some kills land during open, most during the operations.
        let wait = if cycle % 5 == 0 { rng.gen_range(0..15) } else { rng.gen_range(20..250) };
        let stdout = childp.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut acked: Option<u64> = None;
            let mut opened = false;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.ends_with("open") {
                    opened = true;
                } else if let Some(n) = line.rsplit(' ').next().and_then(|n| n.parse().ok()) {
                    if line.contains("ack ") {
                        acked = Some(n);
                    }
                }
            }
            (opened, acked)
        });
        let started = Instant::now();
        std::thread::sleep(Duration::from_millis(wait));
        childp.kill().unwrap(); // SIGKILL
        childp.wait().unwrap();
        let (opened, acked) = reader.join().unwrap();
        if opened {
            kills_after_open += 1;
        }

        let db = Config::new(dir.path()).flush_interval(None).open().unwrap();
        let report = db.verify().unwrap();
        assert!(report.is_ok(), "cycle {cycle} (seed {seed}): verify after kill: {report:?}");
        let got = state(&db);
        // The store must be the model after some prefix that includes every
        // acknowledged operation.
        let must = acked.map_or(done, |a| a + 1);
        while done < must {
            apply_model(&mut model, &op(seed, done));
            done += 1;
        }
        let mut extra = 0;
        let at_must = model_state(&model);
        while model_state(&model) != got {
            assert!(
                extra < 2_000,
                "cycle {cycle} (seed {seed}): store matches no prefix from operation {must} on (killed after {:?})\n\
                 store:    {}\nmodel at {must}: {}\nnext operations: {}",
                started.elapsed(),
                describe(&got),
                describe(&at_must),
                (must..must + 8).map(|i| summary(&op(seed, i))).collect::<Vec<_>>().join("; "),
            );
            apply_model(&mut model, &op(seed, done));
            done += 1;
            extra += 1;
        }
        for (i, (v, _)) in got.keys.iter().enumerate() {
            let (d, k) = (i / KEYS.len(), KEYS[i % KEYS.len()]);
            let ones = v.as_ref().map_or(0, |v| v.iter().map(|b| u64::from(b.count_ones())).sum());
            let stored = db.select(d as u32).unwrap().bitcount(k, None).unwrap();
            assert_eq!(stored, ones, "cycle {cycle}: stored count of {k:?} in db {d}");
        }
        // The key counts behind DBSIZE are exact after recovery.
        for d in 0..DBS {
            let live = got.keys[d * KEYS.len()..(d + 1) * KEYS.len()].iter().filter(|(v, _)| v.is_some()).count()
                + usize::from(got.bloom[d].is_some());
            assert_eq!(db.select(d as u32).unwrap().dbsize().unwrap(), live as u64, "cycle {cycle}: DBSIZE of db {d}");
        }
    }
    println!("{cycles} kill cycles, {kills_after_open} after open completed, {done} operations recovered");
    assert!(kills_after_open > cycles / 2, "most kills should land after open");
}
