//! Invariant: a bitmap with one bit at a high offset stores one small page,
//! kept in its metadata entry, not the zero prefix (Redis allocates the
//! whole prefix).

use bitsled::Config;

#[test]
fn one_high_bit_costs_one_small_page() {
    let dir = tempfile::tempdir().unwrap();
    let db = Config::new(dir.path()).flush_interval(None).open().unwrap();
    for (key, offset) in
        [(&b"uid:1e9"[..], 999_999_999u64), (b"uid:2^40", 1u64 << 40), (b"uid:2^32-1", u64::from(u32::MAX))]
    {
        db.setbit(key, offset, true).unwrap();
        let st = db.key_stats(key).unwrap().unwrap();
        println!(
            "one bit at {offset}: strlen {} bytes, {} page(s), {} bytes stored",
            st.len,
            st.pages(),
            st.stored_bytes
        );
        assert_eq!(st.len, offset / 8 + 1);
        assert!(st.inline && st.pages() == 0 && st.records == 0, "{st:?}");
        assert!(st.stored_bytes < 48, "{st:?}");
        assert!(db.getbit(key, offset).unwrap());
        assert_eq!(db.bitpos(key, true, None, None, bitsled::Unit::Byte).unwrap(), offset as i64);
        assert_eq!(db.bitcount(key, None).unwrap(), 1);
    }
}
