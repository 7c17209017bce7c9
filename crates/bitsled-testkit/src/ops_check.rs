//! Op sequences decoded from arbitrary bytes and checked against the naive
//! model: the check shared by the `ops_model` fuzz target,
//! `tests/fuzz_replay_ops.rs` (which replays the fuzz corpus on stable, so a
//! corpus file means the same ops in both) and the property test
//! `tests/model.rs` (which generates the ops with proptest).
//!
//! Invariant: every reply of [`bitsled::Db`] equals the reply of
//! [`bitsled::model::Model`] for the same op, with flushes, tiny cache and
//! dirty budgets (evictions and write-backs) and reopens in between; at the
//! end every key has the model's bytes and count, the key list is the
//! model's, `verify` finds nothing, and a reopen keeps the bytes.
//!
//! The decoder is hand-written rather than `derive(Arbitrary)` because the
//! stable test build has no `arbitrary` dependency; it reads one byte per
//! choice and treats missing bytes as zeros, so every input decodes.

use bitsled::model::Model;
use bitsled::testing::PAGE_BITS;
use bitsled::{BitOp, Config, Db, Span, Unit};

/// The keys ops act on.
pub const KEYS: [&[u8]; 3] = [b"a", b"b", b"c"];

/// At most this many ops per input, so that one execution stays fast.
pub const MAX_OPS: usize = 96;

/// Offsets stay below this many pages, so the model's `Vec<u8>` stays small.
const MAX_PAGES: u64 = 6;

/// Bit positions inside a page where encodings and word arithmetic change.
const EDGES: [u64; 12] = [0, 1, 7, 8, 63, 64, 65, 127, 4095 * 8, PAGE_BITS / 2, PAGE_BITS - 64, PAGE_BITS - 1];

/// One operation.
#[derive(Clone, Debug)]
pub enum Op {
    /// SETBIT.
    SetBit(usize, u64, bool),
    /// GETBIT.
    GetBit(usize, u64),
    /// Several SETBITs at once through `Db::set_bits`.
    SetBits(usize, Vec<u64>, bool),
    /// BITCOUNT.
    BitCount(usize, Option<Span>),
    /// BITPOS (key, bit, start, end, unit).
    BitPos(usize, bool, Option<i64>, Option<i64>, Unit),
    /// BITOP (op, destination, sources).
    Bitop(BitOp, usize, Vec<usize>),
    /// GET.
    Get(usize),
    /// SET.
    Set(usize, Vec<u8>),
    /// DEL.
    Delete(usize),
    /// The set bits, through `Db::ones`.
    Ones(usize),
    /// A durability barrier.
    Flush,
    /// Close and reopen the database.
    Reopen,
}

/// A cursor over the fuzz input; past the end every byte reads as zero.
struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl Input<'_> {
    fn done(&self) -> bool {
        self.pos >= self.data.len()
    }

    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.byte(), self.byte()])
    }

    fn key(&mut self) -> usize {
        usize::from(self.byte()) % KEYS.len()
    }

    fn bool(&mut self) -> bool {
        self.byte() & 1 == 1
    }

    /// Offsets clustered at byte, word and page edges (give or take two
    /// bits), some anywhere in the first pages, some in the first bytes.
    fn offset(&mut self) -> u64 {
        let page = u64::from(self.byte()) % MAX_PAGES;
        match self.byte() % 4 {
            0 | 1 => {
                let edge = EDGES[usize::from(self.byte()) % EDGES.len()];
                let delta = i64::from(self.byte() % 5) - 2;
                (page * PAGE_BITS + edge).saturating_add_signed(delta)
            }
            2 => page * PAGE_BITS + u64::from(self.u16()) % PAGE_BITS,
            _ => u64::from(self.byte()),
        }
    }

    fn index(&mut self) -> i64 {
        match self.byte() % 6 {
            0 => i64::MIN,
            1 => i64::MAX,
            2 => i64::from(self.u16() as i16),
            // Byte and bit indexes near the page edges, from either end.
            3 => {
                let i = i64::try_from(self.offset()).unwrap_or(0);
                if self.bool() {
                    -i
                } else {
                    i
                }
            }
            _ => i64::from(self.byte() as i8) / 4,
        }
    }

    fn unit(&mut self) -> Unit {
        if self.bool() {
            Unit::Bit
        } else {
            Unit::Byte
        }
    }

    /// Values that force each page encoding: runs, random bytes, a few
    /// bytes set in zeros, and empty.
    fn value(&mut self) -> Vec<u8> {
        let len = usize::from(self.u16()) % 12_000;
        match self.byte() % 4 {
            0 => vec![self.byte(); len],
            1 => (0..usize::from(self.byte())).map(|_| self.byte()).collect(),
            2 => {
                let mut v = vec![0u8; len];
                for _ in 0..self.byte() % 16 {
                    let at = usize::from(self.u16()) % 12_000;
                    let b = self.byte();
                    if let Some(slot) = v.get_mut(at) {
                        *slot = b;
                    }
                }
                v
            }
            _ => Vec::new(),
        }
    }

    fn bitop(&mut self) -> BitOp {
        const OPS: [BitOp; 8] =
            [BitOp::And, BitOp::Or, BitOp::Xor, BitOp::Not, BitOp::Diff, BitOp::Diff1, BitOp::AndOr, BitOp::One];
        OPS[usize::from(self.byte()) % OPS.len()]
    }

    fn op(&mut self) -> Op {
        match self.byte() % 24 {
            0..=5 => Op::SetBit(self.key(), self.offset(), self.bool()),
            6 | 7 => Op::GetBit(self.key(), self.offset()),
            8 => {
                let k = self.key();
                let n = self.byte() % 40;
                let offs = (0..n).map(|_| self.offset()).collect();
                Op::SetBits(k, offs, self.bool())
            }
            9 | 10 => {
                let k = self.key();
                let span = self.bool().then(|| Span { start: self.index(), end: self.index(), unit: self.unit() });
                Op::BitCount(k, span)
            }
            11 | 12 => {
                let (k, bit) = (self.key(), self.bool());
                let start = self.bool().then(|| self.index());
                let end = if start.is_some() && self.bool() { Some(self.index()) } else { None };
                Op::BitPos(k, bit, start, end, self.unit())
            }
            13..=15 => {
                let (op, dest) = (self.bitop(), self.key());
                let n = 1 + self.byte() % 3;
                Op::Bitop(op, dest, (0..n).map(|_| self.key()).collect())
            }
            16 => Op::Get(self.key()),
            17 | 18 => Op::Set(self.key(), self.value()),
            19 => Op::Delete(self.key()),
            20 => Op::Ones(self.key()),
            21 | 22 => Op::Flush,
            _ => Op::Reopen,
        }
    }
}

/// Whether BITOP `op` accepts `sources` source keys (NOT takes one, DIFF,
/// DIFF1 and ANDOR at least two); the others are refused as
/// `InvalidArgument`.
#[must_use]
pub fn bitop_valid(op: BitOp, sources: usize) -> bool {
    match op {
        BitOp::Not => sources == 1,
        BitOp::Diff | BitOp::Diff1 | BitOp::AndOr => sources >= 2,
        _ => true,
    }
}

/// The ops `data` stands for (at most [`MAX_OPS`]).
#[must_use]
pub fn decode(data: &[u8]) -> Vec<Op> {
    let mut input = Input { data, pos: 0 };
    let mut ops = Vec::new();
    while !input.done() && ops.len() < MAX_OPS {
        ops.push(input.op());
    }
    ops
}

fn open(dir: &std::path::Path) -> Db {
    // A tiny cache and dirty budget force evictions and write-backs.
    Config::new(dir).cache_bytes(64 << 10).dirty_bytes(16 << 10).flush_interval(None).open().expect("open the database")
}

/// Runs `ops` against a fresh database and the model; panics (with the op
/// and its position) at the first difference.
pub fn check(ops: &[Op]) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut db = open(dir.path());
    let mut m = Model::default();
    for (i, op) in ops.iter().enumerate() {
        let ctx = format!("op {i}: {op:?}");
        match op {
            Op::SetBit(k, o, v) => {
                assert_eq!(db.setbit(KEYS[*k], *o, *v).unwrap(), m.setbit(KEYS[*k], *o, *v), "{ctx}");
            }
            Op::GetBit(k, o) => assert_eq!(db.getbit(KEYS[*k], *o).unwrap(), m.getbit(KEYS[*k], *o), "{ctx}"),
            Op::SetBits(k, offs, v) => {
                let mut changed = std::collections::BTreeSet::new();
                for &o in offs {
                    if m.setbit(KEYS[*k], o, *v) != *v {
                        changed.insert(o);
                    }
                }
                assert_eq!(db.set_bits(KEYS[*k], offs, *v).unwrap(), changed.len() as u64, "{ctx}");
            }
            Op::BitCount(k, s) => assert_eq!(db.bitcount(KEYS[*k], *s).unwrap(), m.bitcount(KEYS[*k], *s), "{ctx}"),
            Op::BitPos(k, b, s, e, u) => {
                assert_eq!(db.bitpos(KEYS[*k], *b, *s, *e, *u).unwrap(), m.bitpos(KEYS[*k], *b, *s, *e, *u), "{ctx}");
            }
            Op::Bitop(op, d, srcs) => {
                let names: Vec<&[u8]> = srcs.iter().map(|&s| KEYS[s]).collect();
                let valid = bitop_valid(*op, names.len());
                let got = db.bitop(*op, KEYS[*d], &names);
                if valid {
                    assert_eq!(got.unwrap(), m.bitop(*op, KEYS[*d], &names), "{ctx}");
                } else {
                    assert!(matches!(got, Err(bitsled::Error::InvalidArgument(_))), "{ctx}: {got:?}");
                }
            }
            Op::Get(k) => assert_eq!(db.get(KEYS[*k]).unwrap(), m.get(KEYS[*k]), "{ctx}"),
            Op::Set(k, v) => {
                db.set(KEYS[*k], v).unwrap();
                m.set(KEYS[*k], v);
            }
            Op::Delete(k) => assert_eq!(db.delete(KEYS[*k]).unwrap(), m.delete(KEYS[*k]), "{ctx}"),
            Op::Ones(k) => {
                let got: Vec<u64> = db.ones(KEYS[*k], ..).unwrap().map(Result::unwrap).collect();
                assert_eq!(got, m.ones(KEYS[*k]), "{ctx}");
            }
            Op::Flush => db.flush().unwrap(),
            Op::Reopen => {
                drop(db);
                db = open(dir.path());
            }
        }
        for k in KEYS {
            assert_eq!(db.strlen(k).unwrap(), m.strlen(k), "strlen {k:?} after {ctx}");
            assert_eq!(db.exists(k).unwrap(), m.keys.contains_key(k), "exists {k:?} after {ctx}");
        }
    }
    for k in KEYS {
        assert_eq!(db.get(k).unwrap(), m.get(k), "final bytes of {k:?}");
        assert_eq!(db.bitcount(k, None).unwrap(), m.bitcount(k, None), "final count of {k:?}");
    }
    let keys: Vec<Vec<u8>> = m.keys.keys().cloned().collect();
    let mut listed = db.keys(b"*").unwrap();
    listed.sort();
    assert_eq!(listed, keys, "the key list");
    let report = db.verify().unwrap();
    assert!(report.is_ok(), "verify: {report:?}");
    drop(db);
    let db = open(dir.path());
    for k in KEYS {
        assert_eq!(db.get(k).unwrap(), m.get(k), "bytes of {k:?} after reopen");
    }
}
