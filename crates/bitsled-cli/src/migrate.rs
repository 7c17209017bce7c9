//! `bitsled migrate`: copy the string keys (bitmaps, HyperLogLogs, counters,
//! any string) of a running Redis into the database, with their TTLs, then
//! check each copied key's BITCOUNT and length against the source.
//!
//! Per database: SCAN in batches; for each batch, pipelined TYPE and PTTL,
//! then STRLEN of the strings, then GET of the short ones (one pipeline)
//! and GETRANGE in chunks of the long ones, writing only the 4 KiB pages
//! that are not all zero (a sparse bitmap at offset 2^32-1 stays small).
//! After every batch the SCAN cursor goes to a state file in the database
//! directory, so `--resume` continues an interrupted run; a key copied
//! again is rewritten whole. Keys of other types are counted and left.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use bitsled::{Db, ExpireCondition, SetExpiry};
use clap::Args;
use indicatif::ProgressBar;
use redis::{Connection, RedisResult};

use crate::style;

/// The state file, in the database directory.
const STATE_FILE: &str = "migrate.state";

/// Bytes written per SETRANGE of a long value: a page.
const PAGE: usize = 4096;

/// Values up to this long are read with one GET (pipelined over the
/// batch, so a batch holds at most `batch` times this); longer ones with
/// GETRANGE.
const SHORT: u64 = 64 << 10;

#[derive(Args, Debug)]
pub(crate) struct MigrateArgs {
    /// The source Redis (redis://[user:password@]host:port).
    #[arg(long, default_value = "redis://127.0.0.1:6379")]
    from: String,
    /// Source databases to copy, each into the database of the same number
    /// (repeatable); default: every database INFO keyspace lists.
    #[arg(long = "source-db")]
    source_dbs: Vec<u32>,
    /// Keys per SCAN batch (each batch is a few pipelines).
    #[arg(long, default_value_t = 1000)]
    batch: usize,
    /// Bytes per GETRANGE read of a long value.
    #[arg(long, default_value_t = 4 << 20)]
    chunk: usize,
    /// Continue an interrupted run from the state file.
    #[arg(long)]
    resume: bool,
    /// Stop after this many batches (continue later with --resume).
    #[arg(long)]
    max_batches: Option<u64>,
    /// Skip the comparison of BITCOUNT and length per key afterwards.
    #[arg(long)]
    no_verify: bool,
}

/// Where a run is: the database being copied and its SCAN cursor; the
/// databases already done.
#[derive(Debug, Default, PartialEq)]
struct State {
    source: String,
    done: Vec<u32>,
    current: Option<(u32, u64)>,
}

impl State {
    fn path(dir: &Path) -> PathBuf {
        dir.join(STATE_FILE)
    }

    fn load(dir: &Path) -> Result<Option<State>> {
        let text = match std::fs::read_to_string(Self::path(dir)) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).context("reading the migrate state file"),
        };
        let mut st = State::default();
        for line in text.lines() {
            let mut w = line.split(' ');
            match (w.next(), w.next(), w.next()) {
                (Some("source"), Some(url), None) => st.source = url.to_string(),
                (Some("done"), Some(db), None) => st.done.push(db.parse()?),
                (Some("at"), Some(db), Some(cursor)) => st.current = Some((db.parse()?, cursor.parse()?)),
                _ => bail!("bad line in {}: {line:?}", STATE_FILE),
            }
        }
        Ok(Some(st))
    }

    /// Written to a temporary file, then renamed over the old one.
    fn save(&self, dir: &Path) -> Result<()> {
        let mut text = format!("source {}\n", self.source);
        for db in &self.done {
            text.push_str(&format!("done {db}\n"));
        }
        if let Some((db, cursor)) = self.current {
            text.push_str(&format!("at {db} {cursor}\n"));
        }
        let tmp = dir.join(format!("{STATE_FILE}.tmp"));
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, Self::path(dir))?;
        Ok(())
    }
}

/// Counts for the summary.
#[derive(Default)]
struct Totals {
    keys: u64,
    bytes: u64,
    skipped: BTreeMap<String, u64>,
    vanished: u64,
}

pub(crate) fn migrate(db: &Db, dir: &Path, args: &MigrateArgs) -> Result<i32> {
    let client = redis::Client::open(args.from.as_str()).with_context(|| format!("bad --from {}", args.from))?;
    let mut con = client.get_connection().with_context(|| format!("connecting to {}", args.from))?;
    let mut state = match (args.resume, State::load(dir)?) {
        (true, Some(st)) if st.source == args.from => {
            eprintln!("resuming: done {:?}, at {:?}", st.done, st.current);
            st
        }
        (true, Some(st)) => bail!("the state file is of a migration from {}, not {}", st.source, args.from),
        (true, None) => bail!("--resume: no {} in {}", STATE_FILE, dir.display()),
        (false, _) => State { source: args.from.clone(), ..State::default() },
    };
    let sizes = source_databases(&mut con)?;
    let dbs: Vec<u32> =
        if args.source_dbs.is_empty() { sizes.keys().copied().collect() } else { args.source_dbs.clone() };
    for &n in &dbs {
        if n >= db.databases() {
            bail!("source database {n} has no counterpart: this database has {} (Config::databases)", db.databases());
        }
    }
    let total: u64 = dbs.iter().filter(|n| !state.done.contains(n)).map(|n| sizes.get(n).copied().unwrap_or(0)).sum();
    let bar = ProgressBar::new(total).with_style(style("{bar:40} {pos}/{len} keys {msg} ({eta})"));
    let t = Instant::now();
    let mut totals = Totals::default();
    let mut batches = 0u64;
    let mut stopped = false;
    'dbs: for &n in &dbs {
        if state.done.contains(&n) {
            continue;
        }
        redis::cmd("SELECT").arg(n).query::<()>(&mut con)?;
        let target = db.select(n)?;
        let mut cursor = match state.current {
            Some((d, c)) if d == n => c,
            _ => 0,
        };
        loop {
            if args.max_batches.is_some_and(|m| batches >= m) {
                stopped = true;
                break 'dbs;
            }
            let (next, keys): (u64, Vec<Vec<u8>>) =
                redis::cmd("SCAN").arg(cursor).arg("COUNT").arg(args.batch).query(&mut con)?;
            copy_batch(&mut con, &target, &keys, args.chunk, &mut totals)?;
            bar.inc(keys.len() as u64);
            bar.set_message(format!("db {n}, {} MB", totals.bytes >> 20));
            target.flush()?;
            batches += 1;
            cursor = next;
            state.current = (cursor != 0).then_some((n, cursor));
            if cursor == 0 {
                state.done.push(n);
            }
            state.save(dir)?;
            if cursor == 0 {
                break;
            }
        }
    }
    bar.finish_and_clear();
    println!("copied {} keys ({} MB of values) in {:.1} s", totals.keys, totals.bytes >> 20, t.elapsed().as_secs_f64());
    for (kind, n) in &totals.skipped {
        println!("left {n} keys of type {kind} (bitsled stores strings only)");
    }
    if totals.vanished > 0 {
        println!("{} keys vanished or changed type while being copied", totals.vanished);
    }
    if stopped {
        println!("stopped after {batches} batches: run again with --resume to continue");
        return Ok(0);
    }
    if args.no_verify {
        return Ok(0);
    }
    let mismatches = verify(&mut con, db, &dbs, args.batch)?;
    Ok(i32::from(mismatches > 0))
}

/// Database number -> keys, from the source's INFO keyspace.
fn source_databases(con: &mut Connection) -> Result<BTreeMap<u32, u64>> {
    let info: String = redis::cmd("INFO").arg("keyspace").query(con)?;
    let mut out = BTreeMap::new();
    for line in info.lines() {
        let Some((name, fields)) = line.split_once(':') else { continue };
        let Some(n) = name.strip_prefix("db").and_then(|n| n.parse().ok()) else { continue };
        let keys = fields.split(',').find_map(|f| f.strip_prefix("keys=")).and_then(|k| k.parse().ok()).unwrap_or(0);
        out.insert(n, keys);
    }
    Ok(out)
}

/// Copies `keys` (of the selected source database) into `db`.
fn copy_batch(con: &mut Connection, db: &Db, keys: &[Vec<u8>], chunk: usize, totals: &mut Totals) -> Result<()> {
    let mut p = redis::pipe();
    for k in keys {
        p.cmd("TYPE").arg(k).cmd("PTTL").arg(k);
    }
    // TTLs count from before they were read: a copy never outlives its
    // source.
    let now = db.now_ms();
    let meta: Vec<RedisResult<redis::Value>> = p.ignore_errors().query(con)?;
    let mut strings: Vec<(&[u8], i64)> = Vec::new();
    for (k, pair) in keys.iter().zip(meta.chunks(2)) {
        let kind = match &pair[0] {
            Ok(redis::Value::SimpleString(s)) => s.clone(),
            Ok(redis::Value::Okay) => "ok".into(),
            _ => "unknown".into(),
        };
        let ttl = match &pair[1] {
            Ok(redis::Value::Int(t)) => *t,
            _ => -2,
        };
        match kind.as_str() {
            "string" if ttl != -2 => strings.push((k, ttl)),
            "none" => totals.vanished += 1,
            _ if ttl == -2 => totals.vanished += 1,
            other => *totals.skipped.entry(other.to_string()).or_default() += 1,
        }
    }
    let mut p = redis::pipe();
    for (k, _) in &strings {
        p.cmd("STRLEN").arg(*k);
    }
    let lens: Vec<RedisResult<u64>> = p.ignore_errors().query(con)?;
    let mut short: Vec<(&[u8], i64)> = Vec::new();
    for ((k, ttl), len) in strings.iter().zip(lens) {
        match len {
            Ok(len) if len <= SHORT => short.push((k, *ttl)),
            Ok(len) => copy_long(con, db, k, len, chunk, expiry(now, *ttl), totals)?,
            Err(_) => totals.vanished += 1,
        }
    }
    let mut p = redis::pipe();
    for (k, _) in &short {
        p.cmd("GET").arg(*k);
    }
    let values: Vec<RedisResult<Option<Vec<u8>>>> = p.ignore_errors().query(con)?;
    for ((k, ttl), v) in short.iter().zip(values) {
        let Ok(Some(v)) = v else {
            totals.vanished += 1;
            continue;
        };
        db.set_with_expiry(k, &v, expiry(now, *ttl))?;
        totals.keys += 1;
        totals.bytes += v.len() as u64;
    }
    Ok(())
}

/// The expiry of a key with `ttl` ms left (PTTL; -1: none) at `now`.
fn expiry(now: u64, ttl: i64) -> SetExpiry {
    match u64::try_from(ttl) {
        Ok(t) => SetExpiry::At(now + t.max(1)),
        Err(_) => SetExpiry::Clear,
    }
}

/// Copies a string longer than a chunk with GETRANGE reads, writing only
/// the pages that are not all zero.
fn copy_long(
    con: &mut Connection,
    db: &Db,
    key: &[u8],
    len: u64,
    chunk: usize,
    expiry: SetExpiry,
    totals: &mut Totals,
) -> Result<()> {
    db.delete(key)?;
    let mut at = 0u64;
    while at < len {
        // Sixteen chunks per pipeline.
        let mut p = redis::pipe();
        let mut starts = Vec::new();
        for _ in 0..16 {
            if at >= len {
                break;
            }
            let end = (at + chunk as u64).min(len) - 1;
            p.cmd("GETRANGE").arg(key).arg(at).arg(end);
            starts.push(at);
            at = end + 1;
        }
        let parts: Vec<Vec<u8>> = p.query(con)?;
        for (start, part) in starts.into_iter().zip(parts) {
            for (i, page) in part.chunks(PAGE).enumerate() {
                if page.iter().any(|&b| b != 0) {
                    db.setrange(key, start + (i * PAGE) as u64, page)?;
                }
            }
            totals.bytes += part.len() as u64;
        }
    }
    // The length, if the value ends in zero bytes.
    if db.strlen(key)? < len {
        db.setrange(key, len - 1, &[0])?;
    }
    if let SetExpiry::At(t) = expiry {
        db.expire_at(key, t, ExpireCondition::Always)?;
    }
    totals.keys += 1;
    Ok(())
}

/// Compares BITCOUNT and STRLEN of every string key of `dbs` with the
/// source; returns the number of mismatches (printing the first ones).
fn verify(con: &mut Connection, db: &Db, dbs: &[u32], batch: usize) -> Result<u64> {
    let t = Instant::now();
    let (mut checked, mut mismatches) = (0u64, 0u64);
    for &n in dbs {
        redis::cmd("SELECT").arg(n).query::<()>(con)?;
        let target = db.select(n)?;
        let mut cursor = 0u64;
        loop {
            let (next, keys): (u64, Vec<Vec<u8>>) =
                redis::cmd("SCAN").arg(cursor).arg("COUNT").arg(batch).query(con)?;
            let mut p = redis::pipe();
            for k in &keys {
                p.cmd("TYPE").arg(k).cmd("STRLEN").arg(k).cmd("BITCOUNT").arg(k);
            }
            let got: Vec<RedisResult<redis::Value>> = p.ignore_errors().query(con)?;
            for (k, r) in keys.iter().zip(got.chunks(3)) {
                if !matches!(&r[0], Ok(redis::Value::SimpleString(s)) if s == "string") {
                    continue;
                }
                let (Ok(redis::Value::Int(len)), Ok(redis::Value::Int(ones))) = (&r[1], &r[2]) else { continue };
                checked += 1;
                let here = (target.strlen(k)?, target.bitcount(k, None)?);
                if (u64::try_from(*len).unwrap_or(0), u64::try_from(*ones).unwrap_or(0)) != here {
                    mismatches += 1;
                    if mismatches <= 10 {
                        println!(
                            "mismatch: db {n} key {:?}: source {len} bytes / {ones} bits, here {} / {}",
                            String::from_utf8_lossy(k),
                            here.0,
                            here.1
                        );
                    }
                }
            }
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
    }
    println!(
        "verified {checked} keys against the source in {:.1} s: {mismatches} mismatches",
        t.elapsed().as_secs_f64()
    );
    Ok(mismatches)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let st = State { source: "redis://h:1".into(), done: vec![0, 2], current: Some((3, 12345)) };
        st.save(dir.path()).unwrap();
        assert_eq!(State::load(dir.path()).unwrap(), Some(st));
        std::fs::write(dir.path().join(STATE_FILE), "nonsense\n").unwrap();
        assert!(State::load(dir.path()).is_err());
    }

    #[test]
    fn ttls_become_expiry_times() {
        assert_eq!(expiry(1000, -1), SetExpiry::Clear);
        assert_eq!(expiry(1000, 0), SetExpiry::At(1001));
        assert_eq!(expiry(1000, 500), SetExpiry::At(1500));
    }
}
