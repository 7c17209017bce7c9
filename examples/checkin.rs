//! The 7-day consecutive check-in scenario, end to end on an on-disk store.
//!
//! ```text
//! cargo run --release --example checkin -- [--users N] [--db DIR]
//! ```
//!
//! Loads one bitmap per day (`checkin:2026010D`) for N users (default
//! 10^8): an eighth of the users check in every day, the others on about a
//! quarter of the days. Then answers: daily active users (BITCOUNT), users
//! who checked in all 7 days (BITOP AND + BITCOUNT), weekly actives (BITOP
//! OR), next-day retention, the first few uids of the loyal users, and how
//! many bytes are stored against a dense layout.

use std::time::Instant;

use bitsled::{BitOp, Config};
use rand::{Rng, SeedableRng};

const DAYS: usize = 7;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let users: u64 = arg("--users").map(|s| s.parse()).transpose()?.unwrap_or(100_000_000);
    let dir = arg("--db").unwrap_or_else(|| "bitsled-data".into());
    let words = users.div_ceil(64) as usize;
    println!("bitsled check-in demo: {users} users x {DAYS} days, store in {dir}/");

    let t = Instant::now();
    let db = Config::new(&dir).open()?;
    println!("open                         {:>9.1} ms", ms(t));

    // Loyal users: a fixed eighth of the population (AND of three random words).
    let mut rng = rand::rngs::StdRng::seed_from_u64(2026);
    let loyal: Vec<u64> = (0..words).map(|_| rng.gen::<u64>() & rng.gen::<u64>() & rng.gen::<u64>()).collect();
    let names: Vec<String> = (1..=DAYS).map(|d| format!("checkin:2026010{d}")).collect();
    let t = Instant::now();
    for name in &names {
        let mut bytes = Vec::with_capacity(words * 8);
        for &l in &loyal {
            let w = l | (rng.gen::<u64>() & rng.gen::<u64>());
            bytes.extend_from_slice(&w.to_be_bytes());
        }
        bytes.truncate(users.div_ceil(8) as usize);
        if users % 8 != 0 {
            // Users past N do not exist: clear the padding bits.
            if let Some(last) = bytes.last_mut() {
                *last &= 0xffu8 << (8 - users % 8);
            }
        }
        db.set(name.as_bytes(), &bytes)?;
    }
    db.flush()?;
    println!("load {DAYS} days + flush           {:>9.1} ms", ms(t));

    for name in &names[..2] {
        let t = Instant::now();
        let dau = db.bitcount(name.as_bytes(), None)?;
        println!("DAU {name}     {dau:>12}  {:>7.3} ms", ms(t));
    }

    let srcs: Vec<&[u8]> = names.iter().map(std::string::String::as_bytes).collect();
    let t = Instant::now();
    db.bitop(BitOp::And, b"checkin:7days", &srcs)?;
    let seven = db.bitcount(b"checkin:7days", None)?;
    println!("7-day streak (AND+BITCOUNT) {seven:>12}  {:>7.1} ms", ms(t));

    let t = Instant::now();
    db.bitop(BitOp::Or, b"checkin:week", &srcs)?;
    let wau = db.bitcount(b"checkin:week", None)?;
    println!("weekly active (OR+BITCOUNT) {wau:>12}  {:>7.1} ms", ms(t));

    let t = Instant::now();
    db.bitop(BitOp::And, b"retained", &srcs[..2])?;
    let kept = db.bitcount(b"retained", None)? as f64;
    let day1 = db.bitcount(srcs[0], None)? as f64;
    println!("day-1 retention             {:>11.2}%  {:>7.1} ms", 100.0 * kept / day1, ms(t));

    let t = Instant::now();
    let first: Vec<u64> = db.ones(b"checkin:7days", ..)?.take(5).collect::<bitsled::Result<_>>()?;
    println!("first loyal uids            {first:?}  {:.3} ms", ms(t));
    println!("user 12345 checked in on day 1: {}", db.getbit(srcs[0], 12_345)?);

    db.flush()?;
    let mut stored = 0;
    for name in names.iter().map(String::as_bytes).chain([&b"checkin:7days"[..], b"checkin:week"]) {
        if let Some(st) = db.key_stats(name)? {
            stored += st.stored_bytes;
        }
    }
    let dense = (DAYS as u64 + 2) * users.div_ceil(8);
    println!(
        "stored bytes {stored} for {} bitmaps (dense layout: {dense}, ratio {:.3}); sled on disk: {} bytes",
        DAYS + 2,
        stored as f64 / dense as f64,
        db.size_on_disk()?
    );
    let report = db.verify()?;
    println!("verify: {} keys, {} pages, {} problems", report.keys, report.pages, report.problems.len());
    Ok(())
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}
