//! Random operations over a store that fails on command, checked against
//! the naive model: the check behind the `fault_model` fuzz target and
//! `tests/fault_model.rs`.
//!
//! The input's first two bytes arm one fault: byte 0 picks how many store
//! batches succeed before one fails (or, for odd byte 1, that every sync
//! fails from the operation that byte 0 names); the rest is a sequence of
//! operations as [`crate::ops_check::decode`] reads it (its reopens are
//! skipped: the faults belong to one handle).
//!
//! Invariants:
//! - until a call fails, every write succeeds; the first failure is the
//!   injected store error or [`bitsled::Error::Poisoned`], and afterwards
//!   every write that would change a key, and every flush, is refused with
//!   `Poisoned`;
//! - a reopen (without faults) finds the keys as the model had them after
//!   some operation no earlier than the last flush that returned `Ok`, and
//!   no later than the failed one (a failed batch loses at most what no
//!   flush acknowledged, and never leaves a state no prefix produced);
//! - `verify` finds nothing after the reopen; with no failure, the reopened
//!   keys are the model's final ones.

use bitsled::model::Model;
use bitsled::testing::{open_faulty, Faults};
use bitsled::{Config, Db, Error};

use crate::ops_check::{bitop_valid, decode as decode_ops, Op, KEYS};

/// The fault an input arms.
#[derive(Clone, Copy, Debug)]
pub enum Fault {
    /// The store batch after this many (modulo 8) succeeds fails.
    ApplyAfter(u8),
    /// Every sync fails from the operation at this position (modulo 64) on.
    SyncFrom(u8),
}

/// The fault and the operations `data` stands for.
#[must_use]
pub fn decode(data: &[u8]) -> (Fault, Vec<Op>) {
    let at = data.first().copied().unwrap_or(0);
    let fault = if data.get(1).copied().unwrap_or(0) & 1 == 1 { Fault::SyncFrom(at) } else { Fault::ApplyAfter(at) };
    (fault, decode_ops(data.get(2..).unwrap_or_default()))
}

fn config(dir: &std::path::Path) -> Config {
    // A tiny cache and dirty budget force evictions and write-backs, so
    // batches happen inside operations too, not only at flushes.
    Config::new(dir).cache_bytes(64 << 10).dirty_bytes(16 << 10).flush_interval(None)
}

/// The keys' values as the model has them.
fn snapshot(m: &Model) -> Vec<Option<Vec<u8>>> {
    KEYS.iter().map(|k| m.get(k)).collect()
}

/// Runs `op` on the model (replies are not needed: the live replies are
/// checked by [`crate::ops_check`]).
fn on_model(m: &mut Model, op: &Op) {
    match op {
        Op::SetBit(k, o, v) => {
            m.setbit(KEYS[*k], *o, *v);
        }
        Op::SetBits(k, offs, v) => {
            for &o in offs {
                m.setbit(KEYS[*k], o, *v);
            }
        }
        Op::Bitop(op, d, srcs) if bitop_valid(*op, srcs.len()) => {
            let names: Vec<&[u8]> = srcs.iter().map(|&s| KEYS[s]).collect();
            m.bitop(*op, KEYS[*d], &names);
        }
        Op::Set(k, v) => m.set(KEYS[*k], v),
        Op::Delete(k) => {
            m.delete(KEYS[*k]);
        }
        _ => {}
    }
}

/// Runs `op` on the database: the first error of a write or a flush (reads
/// are run for the loads and evictions they cause; their replies are the
/// other check's).
fn on_db(db: &Db, op: &Op) -> bitsled::Result<()> {
    match op {
        Op::SetBit(k, o, v) => db.setbit(KEYS[*k], *o, *v).map(drop),
        Op::SetBits(k, offs, v) => db.set_bits(KEYS[*k], offs, *v).map(drop),
        Op::Bitop(op, d, srcs) => {
            let names: Vec<&[u8]> = srcs.iter().map(|&s| KEYS[s]).collect();
            match db.bitop(*op, KEYS[*d], &names) {
                Err(Error::InvalidArgument(_)) if !bitop_valid(*op, srcs.len()) => Ok(()),
                r => r.map(drop),
            }
        }
        Op::Set(k, v) => db.set(KEYS[*k], v),
        Op::Delete(k) => db.delete(KEYS[*k]).map(drop),
        Op::Flush => db.flush(),
        Op::GetBit(k, o) => db.getbit(KEYS[*k], *o).map(drop),
        Op::Get(k) => db.get(KEYS[*k]).map(drop),
        Op::BitCount(k, s) => db.bitcount(KEYS[*k], *s).map(drop),
        Op::BitPos(k, b, s, e, u) => db.bitpos(KEYS[*k], *b, *s, *e, *u).map(drop),
        Op::Ones(k) => {
            db.ones(KEYS[*k], ..).and_then(std::iter::Iterator::collect::<bitsled::Result<Vec<u64>>>).map(drop)
        }
        Op::Reopen => Ok(()),
    }
}

fn arm(faults: &Faults, fault: Fault, at: usize) {
    match fault {
        Fault::ApplyAfter(n) if at == 0 => faults.fail_apply_after(i64::from(n % 8)),
        Fault::SyncFrom(n) if at == usize::from(n) % 64 => faults.fail_sync(true),
        _ => {}
    }
}

/// Runs `ops` with `fault` armed, then checks the invariants of the module
/// documentation; panics (naming the operation) at the first broken one.
/// Returns whether the fault struck (a call failed).
pub fn check(fault: Fault, ops: &[Op]) -> bool {
    let dir = tempfile::tempdir().expect("tempdir");
    let (db, faults) = open_faulty(config(dir.path())).expect("open over the faulty store");
    let mut m = Model::default();
    // The model's states from the last acknowledged flush on: the states a
    // reopen may find.
    let mut allowed = vec![snapshot(&m)];
    let mut failed = None;
    for (i, op) in ops.iter().enumerate() {
        arm(&faults, fault, i);
        let result = on_db(&db, op);
        match (&failed, result) {
            (None, Ok(())) => {
                on_model(&mut m, op);
                if matches!(op, Op::Flush) {
                    allowed.clear();
                }
                allowed.push(snapshot(&m));
            }
            (None, Err(e)) => {
                assert!(
                    matches!(&e, Error::Io(_) | Error::Poisoned(_)),
                    "op {i}: {op:?}: the first failure is the injected one or Poisoned, got {e:?}"
                );
                // The failed write may have changed the keys in memory,
                // and a batch before the failed one may have stored them.
                on_model(&mut m, op);
                allowed.push(snapshot(&m));
                failed = Some(i);
            }
            (Some(_), Ok(())) => {
                // Only a call that changes nothing may succeed.
                let mut after = m.clone();
                on_model(&mut after, op);
                assert!(!matches!(op, Op::Flush), "op {i}: a flush after a failure succeeded");
                assert_eq!(snapshot(&after), snapshot(&m), "op {i}: {op:?}: a write after a failure succeeded");
            }
            (Some(_), Err(e)) => {
                assert!(matches!(e, Error::Poisoned(_)), "op {i}: {op:?}: after a failure, got {e:?}");
            }
        }
    }
    if failed.is_none() {
        // A final flush that fails (the fault struck only now) leaves the
        // states since the last acknowledged flush allowed.
        match db.flush() {
            Ok(()) => allowed = vec![snapshot(&m)],
            Err(_) => failed = Some(ops.len()),
        }
    }
    drop(db);
    drop(faults);
    let db = config(dir.path()).open().expect("reopen without faults");
    let found: Vec<Option<Vec<u8>>> = KEYS.iter().map(|k| db.get(k).expect("read after reopen")).collect();
    assert!(
        allowed.contains(&found),
        "after reopen the keys are {found:?}, which no state from the last acknowledged flush on had \
         ({} allowed; first failure at {failed:?}; {fault:?})",
        allowed.len()
    );
    let report = db.verify().expect("verify");
    assert!(report.is_ok(), "verify after reopen: {report:?}");
    failed.is_some()
}
