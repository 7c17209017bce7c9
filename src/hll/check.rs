//! Fuzzing and replay support for the sketch functions (test builds and the
//! `testing` feature only).

use super::{
    add, check_header, count, estimate_registers, hash_element, is_dense, merge_into, merge_write, new_sparse,
    registers, HllError, ENCODING_AT, HEADER_LEN, REGISTERS,
};

/// Fuzzing and replay support: runs every sketch operation on arbitrary
/// bytes and checks that each returns `Ok` or `Err` and keeps its
/// invariants. Panics (with the broken invariant) only on a bug.
///
/// Byte 0 of `data` picks the elements added; the rest is taken as a
/// stored value, as is, and also with a valid header in front (so that
/// random bytes reach the opcode parser).
pub(crate) fn check_hll_value(data: &[u8]) {
    let (seed, rest) = data.split_first().map_or((0, data), |(s, r)| (*s, r));
    check_one(seed, rest);
    let mut framed = new_sparse();
    framed.truncate(HEADER_LEN);
    framed[ENCODING_AT] = seed & 1;
    framed.extend_from_slice(rest);
    check_one(seed, &framed);
}

fn check_one(seed: u8, value: &[u8]) {
    let header = check_header(value);
    let before = registers(value);
    // PFADD.
    let elements: Vec<Vec<u8>> = (0..usize::from(seed % 8)).map(|i| vec![seed, i as u8]).collect();
    // Redis's quirk, copied: a sparse value whose last byte starts an XZERO
    // reads as valid (the missing byte reads as 0), but an add there may
    // leave it corrupt (the value shrinks past the opcode's missing byte,
    // see `sparse::set`), so that a later element of the same add finds no
    // opcode for its register.
    let cut_short = !is_dense(value) && value.len() > HEADER_LEN && value.last().is_some_and(|b| b & 0xc0 == 0x40);
    let mut v = value.to_vec();
    match add(&mut v, &elements) {
        Ok(n) => {
            assert!(header.is_ok(), "add succeeded on a bad header");
            assert!(check_header(&v).is_ok(), "add left a bad header");
            let left_corrupt = cut_short && registers(&v).is_err();
            if let (Ok(mut model), false) = (before, left_corrupt) {
                for e in &elements {
                    let (i, c) = hash_element(e);
                    model[i] = model[i].max(c);
                }
                assert_eq!(registers(&v), Ok(model), "add on a valid sketch gives the model's registers");
                assert_eq!(n > 0, registers(value) != Ok(model), "add reports a change exactly when one happened");
            }
        }
        Err(HllError::NotHll) => assert!(header.is_err(), "add refused a good header"),
        Err(HllError::Corrupt) => {
            assert!(before.is_err() || cut_short, "add found corruption in a valid sketch");
        }
    }
    // PFCOUNT, twice: the second answer comes from the cache, unless the
    // count has bit 63 set (an estimate past i64 range): that bit is the
    // cache's "invalid" flag, so Redis, and bitsled, recount every time.
    let mut v = value.to_vec();
    if let Ok((c, _)) = count(&mut v) {
        assert_eq!(count(&mut v), Ok((c, c >> 63 == 1)), "a count is cached unless it sets the invalid flag");
    }
    // PFCOUNT of several and PFMERGE.
    let mut max = [0u8; REGISTERS];
    if merge_into(&mut max, value).is_ok() {
        let _ = estimate_registers(&max);
        let mut dest = new_sparse();
        merge_write(&mut dest, &max, is_dense(value)).expect("a new sketch takes any merge");
        assert_eq!(registers(&dest), Ok(max), "merge writes the union");
        let mut same = value.to_vec();
        assert!(merge_write(&mut same, &max, false).is_ok(), "merge into a checked value");
    }
}
