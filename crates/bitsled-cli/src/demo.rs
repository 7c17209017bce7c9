//! `bitsled demo`: the seed scenarios end to end on a default database.

use std::time::Instant;

use anyhow::{bail, Context, Result};
use bitsled::Db;
use bitsled_redis::command::cli_syntax::split_args;
use bitsled_redis::command::format::format_reply;
use bitsled_redis::command::{execute, Reply};
use indicatif::ProgressBar;

use crate::{ms, style};

/// splitmix64: a small deterministic generator for the demo's data.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in (0, 1].
    fn unit(&mut self) -> f64 {
        ((self.next() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// Sets bits of `bytes` (Redis order) below `users` with probability
    /// `p` each, by geometric skips; returns how many draws it made.
    fn sprinkle(&mut self, bytes: &mut [u8], users: u64, p: f64, mut progress: impl FnMut(u64)) {
        if p <= 0.0 {
            return;
        }
        let log_q = (1.0 - p.min(1.0)).ln();
        let mut pos = 0u64;
        let mut reported = 0u64;
        loop {
            let skip = if p >= 1.0 { 0 } else { (self.unit().ln() / log_q).floor() as u64 };
            pos = pos.saturating_add(skip);
            if pos >= users {
                break;
            }
            bytes[(pos / 8) as usize] |= 0x80 >> (pos % 8);
            pos += 1;
            if pos - reported >= 1 << 20 {
                progress(pos - reported);
                reported = pos;
            }
        }
        progress(users - reported.min(users));
    }
}

/// Prints a command in redis-cli syntax, runs it through the command layer,
/// prints the reply and the time it took; returns the reply.
fn show(db: &Db, line: &str) -> Result<Reply> {
    let args = split_args(line.as_bytes()).context("bad demo command")?;
    let t = Instant::now();
    let reply = execute(db, &args);
    let took = ms(t);
    let text = String::from_utf8_lossy(&format_reply(&reply)).into_owned();
    let mut lines = text.lines();
    if line.len() > 58 {
        println!("  > {line}");
        println!("    {:<58} {:<22} {took:>9.3} ms", "", lines.next().unwrap_or(""));
    } else {
        println!("  > {line:<58} {:<22} {took:>9.3} ms", lines.next().unwrap_or(""));
    }
    for l in lines {
        println!("    {l}");
    }
    if let Reply::Error(e) = &reply {
        bail!("{line}: {}", String::from_utf8_lossy(e));
    }
    Ok(reply)
}

fn int(r: &Reply) -> i64 {
    match r {
        Reply::Integer(n) => *n,
        _ => 0,
    }
}

pub(crate) fn demo(db: &Db, users: u64, days: u32, density: f64) -> Result<()> {
    if users == 0 || days == 0 || !(0.0..=1.0).contains(&density) {
        bail!("need --users >= 1, --days >= 1 and 0 <= --density <= 1");
    }
    if days > 28 {
        bail!("--days at most 28 (one month of daily keys)");
    }
    let len = usize::try_from(users.div_ceil(8)).context("too many users for this machine")?;
    println!("bitsled demo: {users} users x {days} days, density {density}, store in {}", db.path().display());
    let day_key = |d: u32| format!("checkin:202602{d:02}");

    // Loyal users (5%) check in every day; the others with probability `density`.
    println!("\nloading {days} daily check-in bitmaps (checkin:20260201 ..) with Db::set");
    let bar = ProgressBar::new(users * (u64::from(days) + 1)).with_style(style("{bar:40} {percent}% {msg} ({eta})"));
    let t = Instant::now();
    let mut rng = Rng(2026);
    let mut loyal = vec![0u8; len];
    bar.set_message("loyal users");
    rng.sprinkle(&mut loyal, users, 0.05, |n| bar.inc(n));
    for d in 1..=days {
        bar.set_message(day_key(d));
        let mut bytes = loyal.clone();
        rng.sprinkle(&mut bytes, users, density, |n| bar.inc(n));
        db.set(day_key(d).as_bytes(), &bytes)?;
    }
    // All registered users: everyone who checked in before the last day,
    // plus a few who never did.
    let mut all = vec![0u8; len];
    rng.sprinkle(&mut all, users, 0.5, |_| {});
    db.set(b"user:all", &all)?;
    drop((loyal, all));
    db.flush()?;
    bar.finish_and_clear();
    println!("  loaded and flushed in {:.1} ms", ms(t));

    println!("\nlogin status (SETBIT login_status <uid> 1/0)");
    let last_uid = users - 1;
    show(db, &format!("SETBIT login_status {last_uid} 1"))?;
    show(db, "SETBIT login_status 42 1")?;
    show(db, "SETBIT login_status 42 0")?;
    show(db, "SETBIT login_status 7 1")?;
    show(db, &format!("GETBIT login_status {last_uid}"))?;
    show(db, "GETBIT login_status 42")?;
    show(db, "BITCOUNT login_status")?;

    println!("\none user's monthly sign-ins (SETBIT uid:sign:<uid>:<yyyyMM> <day-1> 1)");
    for day in [3, 4, 5, 9, 20] {
        show(db, &format!("SETBIT uid:sign:1001:202602 {} 1", day - 1))?;
    }
    show(db, "BITCOUNT uid:sign:1001:202602")?;
    show(db, "BITPOS uid:sign:1001:202602 1")?;

    let sources: Vec<String> = (1..=days).map(day_key).collect();
    let all_days = sources.join(" ");
    println!("\n{days}-day consecutive check-ins (BITOP AND + BITCOUNT)");
    show(db, &format!("BITOP AND checkin:streak {all_days}"))?;
    show(db, "BITCOUNT checkin:streak")?;

    println!("\nDAU / MAU / next-day retention");
    let last = day_key(days);
    let dau = int(&show(db, &format!("BITCOUNT {last}"))?);
    show(db, &format!("BITOP OR checkin:active {all_days}"))?;
    show(db, "BITCOUNT checkin:active")?;
    if days >= 2 {
        let prev = day_key(days - 1);
        let before = int(&show(db, &format!("BITCOUNT {prev}"))?);
        show(db, &format!("BITOP AND retained {prev} {last}"))?;
        let kept = int(&show(db, "BITCOUNT retained")?);
        let rate = if before == 0 { 0.0 } else { 100.0 * kept as f64 / before as f64 };
        println!("  next-day retention {prev} -> {last}: {rate:.2}% (DAU {dau})");
    }

    println!("\nnew users on {last} (BITOP DIFF, Redis 8.2), then fold them into all users");
    show(db, &format!("BITOP DIFF new:{last} {last} user:all"))?;
    show(db, &format!("BITCOUNT new:{last}"))?;
    show(db, &format!("BITOP OR user:all user:all {last}"))?;
    show(db, "BITCOUNT user:all")?;

    println!("\ntags: active on {last} and not VIP (XOR with all users, then AND)");
    let t = Instant::now();
    let vip: Vec<u64> = (0..users.div_ceil(10_000)).map(|_| rng.next() % users).collect();
    db.set_bits(b"user:vip", &vip, true)?;
    println!("  set_bits user:vip ({} uids)                         {:>9.3} ms", vip.len(), ms(t));
    // VIPs are registered users, so XOR with all users is NOT within them.
    show(db, "BITOP OR user:all user:all user:vip")?;
    show(db, "BITOP XOR not:vip user:all user:vip")?;
    show(db, &format!("BITOP AND active:not:vip {last} not:vip"))?;
    show(db, "BITCOUNT active:not:vip")?;
    let t = Instant::now();
    let first: Vec<u64> = db.ones(b"active:not:vip", ..)?.take(10).collect::<bitsled::Result<_>>()?;
    println!("  first uids (Db::ones): {first:?}  {:.3} ms", ms(t));

    println!("\nunique visitors (PFADD page:uv:<page> <user>, PFCOUNT, PFMERGE)");
    let t = Instant::now();
    let visitors = users.min(1_000_000);
    for (page, share) in [("home", 2u64), ("cart", 5)] {
        let ids: Vec<String> = (0..visitors / share).map(|_| format!("user:{}", rng.next() % visitors)).collect();
        for chunk in ids.chunks(10_000) {
            db.hll(format!("page:uv:{page}").as_bytes()).add(chunk)?;
        }
    }
    println!("  PFADD of {} page views                          {:>9.3} ms", visitors / 2 + visitors / 5, ms(t));
    show(db, "PFCOUNT page:uv:home")?;
    show(db, "PFCOUNT page:uv:home page:uv:cart")?;
    show(db, "PFMERGE page:uv:all page:uv:home page:uv:cart")?;
    show(db, "PFCOUNT page:uv:all")?;

    println!("\ndedup (BF.RESERVE seen 0.001 <n>, BF.MADD, BF.EXISTS)");
    show(db, &format!("BF.RESERVE seen 0.001 {}", visitors.max(1000)))?;
    let t = Instant::now();
    let msgs: Vec<String> = (0..visitors / 10).map(|i| format!("msg:{i}")).collect();
    for chunk in msgs.chunks(10_000) {
        db.bloom(b"seen").add_many(chunk)?;
    }
    println!("  BF.MADD of {} items                               {:>9.3} ms", msgs.len(), ms(t));
    show(db, "BF.EXISTS seen msg:0")?;
    show(db, &format!("BF.EXISTS seen msg:{visitors}"))?;
    show(db, "BF.CARD seen")?;

    println!("\nhousekeeping (daily keys expire after 30 days)");
    show(db, &format!("EXPIRE {} 2592000", day_key(1)))?;
    show(db, &format!("TTL {}", day_key(1)))?;
    show(db, &format!("PERSIST {}", day_key(1)))?;

    db.flush()?;
    let (mut stored, mut logical) = (0u64, 0u64);
    let keys = db.keys(b"*")?;
    for k in &keys {
        if let Some(st) = db.key_stats(k)? {
            stored += st.stored_bytes;
            logical += st.len;
        }
    }
    println!(
        "\n{} keys: {stored} bytes stored vs {logical} bytes as dense Redis strings (ratio {:.3}); sled on disk {} bytes",
        keys.len(),
        if logical == 0 { 0.0 } else { stored as f64 / logical as f64 },
        db.size_on_disk()?
    );
    Ok(())
}
