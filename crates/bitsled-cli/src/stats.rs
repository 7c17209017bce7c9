//! `bitsled stats`: how keys are stored.

use anyhow::Result;
use bitsled::Db;

pub(crate) fn stats(db: &Db, key: Option<Vec<u8>>) -> Result<()> {
    if let Some(k) = key {
        match db.key_stats(&k)? {
            Some(st) => print_stats(&String::from_utf8_lossy(&k), &st),
            None => println!("{}: no such key", String::from_utf8_lossy(&k)),
        }
        return Ok(());
    }
    let (n, total) = db.all_key_stats()?;
    print_stats(&format!("{n} keys"), &total);
    println!("size on disk:   {} bytes", db.size_on_disk()?);
    Ok(())
}

fn print_stats(name: &str, st: &bitsled::KeyStats) {
    println!("{name}");
    println!("  logical bytes:  {}", st.len);
    println!("  set bits:       {}", st.ones);
    println!(
        "  pages:          {} (dense {}, sparse {}, ewah {}, runs {})",
        st.pages(),
        st.dense_pages,
        st.sparse_pages,
        st.ewah_pages,
        st.runs_pages
    );
    println!("  records:        {} (page records and page groups)", st.records);
    let ratio = if st.len == 0 { 0.0 } else { st.stored_bytes as f64 / st.len as f64 };
    println!("  stored bytes:   {} ({:.4} of logical)", st.stored_bytes, ratio);
}
