//! BITFIELD SET under OVERFLOW SAT of a signed field narrower than 64 bits
//! with a value at most `max - 2^63` (that is, within `max` of `i64::MIN`)
//! stores the field's maximum, like Redis 7: `checkSignedBitfieldOverflow`
//! computes `maxincr = max - value` in 64 bits, which wraps negative for
//! such values, so the check `incr (0) > maxincr` reports an overflow
//! upwards and SAT picks `max`. (WRAP and FAIL are unaffected.)
//!
//! Found by `tests/differential.rs`; every reply below is redis-server
//! 7.0.15's. bitsled stores the minimum instead.

use bitsled_redis::command::{execute, Reply};

fn cmd(s: &str) -> Vec<Vec<u8>> {
    s.split(' ').map(|a| a.as_bytes().to_vec()).collect()
}

#[test]

fn sat_set_far_negative_stores_max_like_redis() {
    let dir = tempfile::tempdir().unwrap();
    let db = bitsled::Db::open(dir.path()).unwrap();
    let run = |s: &str| execute(&db, &cmd(s));
    let ints = |v: &[i64]| Reply::Array(v.iter().map(|&i| Reply::Integer(i)).collect());
    assert_eq!(run("BITFIELD k OVERFLOW SAT SET i38 0 -9223372036854775807 GET i38 0"), ints(&[0, 137438953471]));
    assert_eq!(run("BITFIELD a OVERFLOW SAT SET i8 0 -9223372036854775808 GET i8 0"), ints(&[0, 127]));
    // The last value that hits the quirk, and the first that does not.
    assert_eq!(run("BITFIELD a OVERFLOW SAT SET i8 0 -9223372036854775681 GET i8 0"), ints(&[127, 127]));
    assert_eq!(run("BITFIELD a OVERFLOW SAT SET i8 0 -9223372036854775680 GET i8 0"), ints(&[127, -128]));
    assert_eq!(
        run("BITFIELD b OVERFLOW SAT SET i63 0 -4611686018427387905 GET i63 0"),
        ints(&[0, 4611686018427387903])
    );
    assert_eq!(
        run("BITFIELD b OVERFLOW SAT SET i63 0 -4611686018427387904 GET i63 0"),
        ints(&[4611686018427387903, -4611686018427387904])
    );
}
