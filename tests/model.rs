//! Invariant: any sequence of bitmap operations, with flushes and a close and
//! reopen in the middle, gives the same replies and the same final bytes as
//! the naive Redis model (`bitsled::model::Model`). The ops are generated
//! here; the check is the one the fuzz target shares
//! (`bitsled_testkit::ops_check`).

use bitsled::{BitOp, Config, Span, Unit};
use proptest::prelude::*;

#[allow(dead_code, reason = "the byte decoder serves the fuzz replay, not this test")]
use bitsled_testkit::ops_check;

use ops_check::{Op, KEYS};

const PAGE_BITS: u64 = 32_768;

/// Offsets clustered at byte, word and page edges of the first few pages.
fn offset() -> impl Strategy<Value = u64> {
    let edge = prop_oneof![
        Just(0u64),
        Just(1),
        Just(7),
        Just(8),
        Just(63),
        Just(64),
        Just(65),
        Just(4095 * 8),
        Just(PAGE_BITS - 64),
        Just(PAGE_BITS - 1),
    ];
    prop_oneof![
        3 => (0u64..4, edge).prop_map(|(p, e)| p * PAGE_BITS + e),
        2 => (0u64..4, 0u64..PAGE_BITS).prop_map(|(p, e)| p * PAGE_BITS + e),
        1 => 0u64..200,
        1 => 500u64..530,
    ]
}

fn index() -> impl Strategy<Value = i64> {
    prop_oneof![-20i64..20, -20_000i64..20_000, Just(i64::MIN), Just(i64::MAX)]
}

fn unit() -> impl Strategy<Value = Unit> {
    prop_oneof![Just(Unit::Byte), Just(Unit::Bit)]
}

fn span() -> impl Strategy<Value = Option<Span>> {
    prop_oneof![Just(None), (index(), index(), unit()).prop_map(|(s, e, u)| Some(Span { start: s, end: e, unit: u }))]
}

/// Values forcing each page encoding: runs (EWAH), random bytes (dense),
/// a few bits (sparse), and empty; and short values around the 64-byte
/// inline limit (kept in the key's metadata, promoted to pages past it).
fn value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..80),
        (0usize..9000, any::<u8>()).prop_map(|(n, b)| vec![b; n]),
        proptest::collection::vec(any::<u8>(), 0..9000),
        (0usize..12_000, proptest::collection::vec((0usize..12_000, any::<u8>()), 0..20)).prop_map(|(n, pokes)| {
            let mut v = vec![0u8; n];
            for (i, b) in pokes {
                if i < n {
                    v[i] = b;
                }
            }
            v
        }),
    ]
}

fn bitop() -> impl Strategy<Value = BitOp> {
    prop_oneof![
        Just(BitOp::And),
        Just(BitOp::Or),
        Just(BitOp::Xor),
        Just(BitOp::Not),
        Just(BitOp::Diff),
        Just(BitOp::Diff1),
        Just(BitOp::AndOr),
        Just(BitOp::One),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0usize..KEYS.len();
    prop_oneof![
        8 => (k.clone(), offset(), any::<bool>()).prop_map(|(k, o, v)| Op::SetBit(k, o, v)),
        3 => (k.clone(), offset()).prop_map(|(k, o)| Op::GetBit(k, o)),
        2 => (k.clone(), proptest::collection::vec(offset(), 0..3000), any::<bool>()).prop_map(|(k, o, v)| Op::SetBits(k, o, v)),
        3 => (k.clone(), span()).prop_map(|(k, s)| Op::BitCount(k, s)),
        3 => (k.clone(), any::<bool>(), proptest::option::of(index()), proptest::option::of(index()), unit())
            .prop_map(|(k, b, s, e, u)| Op::BitPos(k, b, s, if s.is_some() { e } else { None }, u)),
        3 => (bitop(), k.clone(), proptest::collection::vec(0usize..KEYS.len(), 1..4)).prop_map(|(op, d, s)| Op::Bitop(op, d, s)),
        1 => k.clone().prop_map(Op::Get),
        2 => (k.clone(), value()).prop_map(|(k, v)| Op::Set(k, v)),
        1 => k.clone().prop_map(Op::Delete),
        1 => k.prop_map(Op::Ones),
        1 => Just(Op::Flush),
        1 => Just(Op::Reopen),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn engine_matches_model(ops in proptest::collection::vec(op(), 1..80)) {
        ops_check::check(&ops);
    }
}

/// The BITOP NOT of a missing key is empty; of a short key covers its length
/// exactly (no bit past the end).
#[test]
fn not_is_bounded_by_length() {
    let dir = tempfile::tempdir().unwrap();
    let db = Config::new(dir.path()).flush_interval(None).open().unwrap();
    db.setbit(b"x", 5, true).unwrap();
    assert_eq!(db.bitop(BitOp::Not, b"n", &[b"x"]).unwrap(), 1);
    assert_eq!(db.get(b"n").unwrap(), Some(vec![0b1111_1011]));
    assert_eq!(db.bitop(BitOp::Not, b"n", &[b"missing"]).unwrap(), 0);
    assert!(!db.exists(b"n").unwrap());
    db.setbit(b"y", PAGE_BITS * 2 + 3, true).unwrap();
    assert_eq!(db.bitop(BitOp::Not, b"n", &[b"y"]).unwrap(), 8193);
    assert_eq!(db.bitcount(b"n", None).unwrap(), 8193 * 8 - 1);
    assert!(db.verify().unwrap().is_ok());
}
