//! `bitsled verify`: check every stored record.

use std::time::Instant;

use anyhow::Result;
use bitsled::Db;

use crate::ms;

pub(crate) fn verify(db: &Db) -> Result<i32> {
    let t = Instant::now();
    let report = db.verify()?;
    println!("verified {} keys, {} pages in {:.1} ms", report.keys, report.pages, ms(t));
    if report.misplaced_pages > 0 {
        println!(
            "note: {} small pages are page records of their own (a format 2 store's); they join their \
             groups when next written, or all at once with `bitsled compact`",
            report.misplaced_pages
        );
    }
    for p in &report.problems {
        println!("problem: {p}");
    }
    if report.is_ok() {
        println!("ok");
        Ok(0)
    } else {
        println!("{} problems", report.problems.len());
        Ok(1)
    }
}
