//! A string whose bits fit one small page keeps that page in its metadata
//! entry (format 9): no page record, no page group. These tests check that
//! every read answers as for any other value, that the value moves to pages
//! when it grows past the limit or into a second page, and that all of it
//! survives a reopen and passes `verify`.

use std::path::Path;

use bitsled::{BitOp, Config, Db, Unit};

fn open(dir: &Path) -> Db {
    Config::new(dir).flush_interval(None).open().unwrap()
}

/// The Redis bytes of a value with these bits set, `len` bytes long.
fn bytes_of(bits: &[u64], len: u64) -> Vec<u8> {
    let mut out = vec![0u8; usize::try_from(len).unwrap()];
    for &b in bits {
        out[usize::try_from(b / 8).unwrap()] |= 0x80 >> (b % 8);
    }
    out
}

/// Every read of `key` agrees with a value of `len` bytes with `bits` set.
fn check(db: &Db, key: &[u8], bits: &[u64], len: u64) {
    let want = bytes_of(bits, len);
    assert_eq!(db.strlen(key).unwrap(), len);
    assert_eq!(db.get(key).unwrap().as_deref(), Some(&want[..]));
    assert_eq!(db.bitcount(key, None).unwrap(), bits.len() as u64);
    let first = bits.iter().min().map_or(-1, |&b| i64::try_from(b).unwrap());
    assert_eq!(db.bitpos(key, true, None, None, Unit::Byte).unwrap(), first);
    for &b in bits {
        assert!(db.getbit(key, b).unwrap(), "bit {b}");
        assert!(!db.getbit(key, b + 1).unwrap() || bits.contains(&(b + 1)), "bit {}", b + 1);
    }
    if let Some(&b) = bits.iter().max() {
        let at = i64::try_from(b / 8).unwrap();
        assert_eq!(
            db.getrange(key, at - 2, at + 2).unwrap(),
            want[(b / 8 - 2) as usize..=(b / 8 + 2).min(len - 1) as usize]
        );
    }
}

/// Invariant: one bit, or one run, at a high offset costs its metadata
/// entry only (no record of pages), and reads, counts, BITOP and a reopen
/// see exactly those bits.
#[test]
fn one_small_page_is_kept_in_the_entry() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.setbit(b"one", 999_999_999, true).unwrap();
    let run: Vec<u64> = (5_000_300..5_000_800).collect();
    db.set_bits(b"run", &run, true).unwrap();
    for (key, bits, len) in [(&b"one"[..], vec![999_999_999u64], 125_000_000u64), (b"run", run.clone(), 625_100)] {
        check(&db, key, &bits, len);
        let st = db.key_stats(key).unwrap().unwrap();
        assert!(st.inline && st.records == 0 && st.pages() == 0, "{key:?}: {st:?}");
        assert!(st.stored_bytes <= 40, "{key:?}: {} bytes for the entry", st.stored_bytes);
    }
    assert_eq!(db.bitop(BitOp::Or, b"both", &[b"one", b"run"]).unwrap(), 125_000_000);
    assert_eq!(db.bitcount(b"both", None).unwrap(), 501);
    db.flush().unwrap();
    drop(db);
    let db = open(dir.path());
    check(&db, b"one", &[999_999_999], 125_000_000);
    check(&db, b"run", &run, 625_100);
    assert!(db.key_stats(b"one").unwrap().unwrap().inline);
    assert!(db.verify().unwrap().is_ok());
}

/// Invariant: a kept page that grows past the entry's limit, or a second
/// page, moves the value to pages with every bit; a page that loses all
/// its bits leaves the value's length and no bit.
#[test]
fn a_kept_page_moves_to_pages_when_it_outgrows_the_entry() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    // Scattered bits in one page: kept while few, paged past 15 positions.
    let mut bits = Vec::new();
    for i in 0..20u64 {
        let b = 3_000_000 + i * 97;
        db.setbit(b"grow", b, true).unwrap();
        bits.push(b);
        let st = db.key_stats(b"grow").unwrap().unwrap();
        assert_eq!(st.inline, i < 15, "after {} bits: {st:?}", i + 1);
        check(&db, b"grow", &bits, 3_000_000 / 8 + i * 97 / 8 + 1);
    }
    // A second page.
    db.setbit(b"two", 70_000, true).unwrap();
    assert!(db.key_stats(b"two").unwrap().unwrap().inline);
    db.setbit(b"two", 10, true).unwrap();
    let st = db.key_stats(b"two").unwrap().unwrap();
    assert!(!st.inline && st.pages() == 2, "{st:?}");
    check(&db, b"two", &[10, 70_000], 8_751);
    // Clearing the only bit keeps the length.
    db.setbit(b"gone", 1_000_000, true).unwrap();
    db.setbit(b"gone", 1_000_000, false).unwrap();
    check(&db, b"gone", &[], 125_001);
    // Bits past an inline string's 64 bytes, in page 0: kept.
    db.set(b"short", b"ab").unwrap();
    db.setbit(b"short", 10_000, true).unwrap();
    let st = db.key_stats(b"short").unwrap().unwrap();
    assert!(st.inline && st.len == 1_251, "{st:?}");
    let mut short_bits: Vec<u64> = (0..16).filter(|&b| b"ab"[(b / 8) as usize] & (0x80 >> (b % 8)) != 0).collect();
    short_bits.push(10_000);
    check(&db, b"short", &short_bits, 1_251);
    // Expiry, rename and copy keep the page.
    db.setbit(b"tmp", 2_000_000, true).unwrap();
    assert!(db.expire_at(b"tmp", u64::MAX / 2, bitsled::ExpireCondition::Always).unwrap());
    assert!(db.rename(b"tmp", b"moved", false).unwrap());
    assert!(db.copy(b"moved", b"copied", false).unwrap());
    for key in [&b"moved"[..], b"copied"] {
        check(&db, key, &[2_000_000], 250_001);
        let st = db.key_stats(key).unwrap().unwrap();
        assert!(st.inline && st.records == 0, "{key:?}: a value built whole keeps its one page too: {st:?}");
    }
    db.flush().unwrap();
    drop(db);
    let db = open(dir.path());
    check(&db, b"grow", &bits, 3_000_000 / 8 + 19 * 97 / 8 + 1);
    check(&db, b"two", &[10, 70_000], 8_751);
    check(&db, b"gone", &[], 125_001);
    check(&db, b"short", &short_bits, 1_251);
    check(&db, b"moved", &[2_000_000], 250_001);
    assert!(db.verify().unwrap().is_ok());
}

/// Invariant: SETBITs on strings kept inline in their entries (plain,
/// numeric, with an expiry) answer and store what a byte model says: the
/// old bit, the bytes, the count, the expiry kept, and the in-place mark
/// (set by a SETBIT that changed the bit or the length, not by one that
/// changed nothing); SETBITs past the end grow the string; all of it
/// survives flushes and reopens (after which the mark reads false).
#[test]
fn setbit_inside_an_inline_string_matches_a_model() {
    use bitsled::SetExpiry;
    let dir = tempfile::tempdir().unwrap();
    let mut db = open(dir.path());
    let far = db.now_ms() + 3_600_000;
    let keys: [&[u8]; 3] = [b"plain", b"counter", b"expiring"];
    db.set(keys[0], b"\x00\xff\x0f").unwrap();
    db.set(keys[1], b"123").unwrap();
    db.set_with_expiry(keys[2], b"abcd", SetExpiry::At(far)).unwrap();
    let mut model: Vec<Vec<u8>> = vec![b"\x00\xff\x0f".to_vec(), b"123".to_vec(), b"abcd".to_vec()];
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    for step in 0..600 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let k = usize::try_from(x % 3).unwrap();
        let len_bits = model[k].len() as u64 * 8;
        // Mostly inside the string; one in eight a few bytes past its end.
        let offset = if x % 8 == 0 { len_bits + (x >> 8) % 24 } else { (x >> 8) % len_bits };
        let value = (x >> 40) % 2 == 1;
        let byte = usize::try_from(offset / 8).unwrap();
        let grows = byte >= model[k].len();
        if grows {
            model[k].resize(byte + 1, 0);
        }
        let mask = 0x80u8 >> (offset % 8);
        let was = model[k][byte] & mask != 0;
        if value {
            model[k][byte] |= mask;
        } else {
            model[k][byte] &= !mask;
        }
        let marked_before = db.changed_in_place(keys[k]).unwrap();
        assert_eq!(db.setbit(keys[k], offset, value).unwrap(), was, "step {step}: old bit");
        assert_eq!(db.get(keys[k]).unwrap().as_deref(), Some(&model[k][..]), "step {step}");
        let ones: u64 = model[k].iter().map(|b| u64::from(b.count_ones())).sum();
        assert_eq!(db.bitcount(keys[k], None).unwrap(), ones, "step {step}");
        let marked = db.changed_in_place(keys[k]).unwrap();
        if was == value && !grows {
            assert_eq!(marked, marked_before, "step {step}: a SETBIT that changed nothing marks nothing");
        } else {
            assert_eq!(marked, Some(true), "step {step}: a changed bit or length marks the key");
        }
        if step % 97 == 96 {
            db.flush().unwrap();
            drop(db);
            db = open(dir.path());
        }
    }
    assert!(matches!(db.expiry(keys[2]).unwrap(), bitsled::Expiry::At(at) if at == far), "the expiry is kept");
    assert!(matches!(db.expiry(keys[0]).unwrap(), bitsled::Expiry::Never));
    db.flush().unwrap();
    drop(db);
    let db = open(dir.path());
    for (k, key) in keys.iter().enumerate() {
        assert_eq!(db.get(key).unwrap().as_deref(), Some(&model[k][..]));
    }
    let report = db.verify().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
}
