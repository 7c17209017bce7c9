//! `bitsled stats`: how keys are stored.

use anyhow::Result;
use bitsled::Db;

pub(crate) fn stats(db: &Db, key: Option<Vec<u8>>) -> Result<()> {
    let single = key.is_some();
    let keys = match key {
        Some(k) => vec![k],
        None => db.keys(b"*")?,
    };
    let mut total = bitsled::KeyStats::default();
    let mut n = 0u64;
    for k in &keys {
        let Some(st) = db.key_stats(k)? else {
            println!("{}: no such key", String::from_utf8_lossy(k));
            continue;
        };
        n += 1;
        if single {
            print_stats(&String::from_utf8_lossy(k), &st);
        }
        total.len += st.len;
        total.ones += st.ones;
        total.dense_pages += st.dense_pages;
        total.sparse_pages += st.sparse_pages;
        total.ewah_pages += st.ewah_pages;
        total.stored_bytes += st.stored_bytes;
        total.records += st.records;
    }
    if !single {
        print_stats(&format!("{n} keys"), &total);
        println!("size on disk:   {} bytes", db.size_on_disk()?);
    }
    Ok(())
}

fn print_stats(name: &str, st: &bitsled::KeyStats) {
    println!("{name}");
    println!("  logical bytes:  {}", st.len);
    println!("  set bits:       {}", st.ones);
    println!(
        "  pages:          {} (dense {}, sparse {}, ewah {})",
        st.pages(),
        st.dense_pages,
        st.sparse_pages,
        st.ewah_pages
    );
    println!("  records:        {} (page records and page groups)", st.records);
    let ratio = if st.len == 0 { 0.0 } else { st.stored_bytes as f64 / st.len as f64 };
    println!("  stored bytes:   {} ({:.4} of logical)", st.stored_bytes, ratio);
}
