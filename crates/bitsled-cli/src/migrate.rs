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
//! again is rewritten whole; a finished run removes the file. Keys of other
//! types are counted and left.
//!
//! The source's password is never stored or printed: the state file holds
//! the URL without it, every error's text has it replaced, and it may come
//! from `BITSLED_MIGRATE_PASSWORD` or `--password-file` rather than the
//! URL (which other users can see in the process list). The state file is
//! created anew, readable by its owner only, and never through a symlink.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use bitsled::{Db, ExpireCondition, SetExpiry};
use clap::Args;
use indicatif::ProgressBar;
use redis::{Connection, ConnectionInfo, IntoConnectionInfo, RedisResult};

use crate::style;

/// The state file, in the database directory.
const STATE_FILE: &str = "migrate.state";

/// The state file is written here first, then renamed over [`STATE_FILE`].
const STATE_TMP: &str = "migrate.state.tmp";

/// The environment variable the source's password may come from.
const PASSWORD_ENV: &str = "BITSLED_MIGRATE_PASSWORD";

/// What replaces a password in printed text.
const REDACTED: &str = "(redacted)";

/// Bytes written per SETRANGE of a long value: a page.
const PAGE: usize = 4096;

/// Values up to this long are read with one GET (pipelined over the
/// batch, so a batch holds at most `batch` times this); longer ones with
/// GETRANGE.
const SHORT: u64 = 64 << 10;

#[derive(Args, Debug)]
pub(crate) struct MigrateArgs {
    /// The source Redis (redis://[user@]host:port[/db]). A password in the
    /// URL works but shows in the process list: prefer
    /// BITSLED_MIGRATE_PASSWORD or --password-file, which take precedence.
    #[arg(long, default_value = "redis://127.0.0.1:6379")]
    from: String,
    /// A file whose first line is the source's password (takes precedence
    /// over BITSLED_MIGRATE_PASSWORD and the URL's).
    #[arg(long)]
    password_file: Option<PathBuf>,
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

/// Where a run is: the source (its URL without a password), the database
/// being copied and its SCAN cursor; the databases already done.
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

    /// The state file of `dir`, if there is one. A file an older version
    /// wrote with the source's password in it is rewritten without it.
    fn load(dir: &Path) -> Result<Option<State>> {
        let text = match std::fs::read_to_string(Self::path(dir)) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).context("reading the migrate state file"),
        };
        let mut st = State::default();
        let mut had_password = false;
        for line in text.lines() {
            let mut w = line.split(' ');
            match (w.next(), w.next(), w.next()) {
                // An older version stored the URL as given, password and all.
                (Some("source"), Some(url), None) => {
                    st.source = redact_url(url);
                    had_password |= st.source != url;
                }
                (Some("done"), Some(db), None) => st.done.push(db.parse()?),
                (Some("at"), Some(db), Some(cursor)) => st.current = Some((db.parse()?, cursor.parse()?)),
                // The line is not shown: it may be a password.
                _ => bail!("bad line in {STATE_FILE}"),
            }
        }
        if had_password {
            // Rewritten at once (owner-only, without the password), so the
            // password does not stay on disk until the next batch.
            st.save(dir)?;
        }
        Ok(Some(st))
    }

    /// Written to a new temporary file (owner-only), synced, then renamed
    /// over the old one.
    fn save(&self, dir: &Path) -> Result<()> {
        let mut text = format!("source {}\n", self.source);
        for db in &self.done {
            text.push_str(&format!("done {db}\n"));
        }
        if let Some((db, cursor)) = self.current {
            text.push_str(&format!("at {db} {cursor}\n"));
        }
        let tmp = dir.join(STATE_TMP);
        let mut f = create_private(&tmp)?;
        f.write_all(text.as_bytes()).and_then(|()| f.sync_all()).context("writing the migrate state file")?;
        drop(f);
        std::fs::rename(&tmp, Self::path(dir)).context("renaming the migrate state file")?;
        Ok(())
    }

    /// Removes the state file of `dir` (a finished run needs none).
    fn remove(dir: &Path) -> Result<()> {
        match std::fs::remove_file(Self::path(dir)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e).context("removing the migrate state file"),
            _ => Ok(()),
        }
    }
}

/// Creates `path` for writing: a new file (`O_EXCL`), readable and writable
/// by its owner only. A regular file left there by an interrupted run is
/// removed first; a symlink or anything else is refused, never followed
/// (and one placed there after the check makes the exclusive create fail).
fn create_private(path: &Path) -> Result<File> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_file() => {
            std::fs::remove_file(path).with_context(|| format!("removing the leftover {}", path.display()))?;
        }
        Ok(_) => bail!("refusing to write {}: it exists and is not a regular file (a symlink?)", path.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("checking {}", path.display())),
    }
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options.open(path).with_context(|| format!("creating {}", path.display()))
}

/// `url` with its password (user info, or a Unix socket URL's `pass`
/// parameter) removed; a URL that does not parse is not shown at all.
fn redact_url(url: &str) -> String {
    let Some(mut u) = redis::parse_redis_url(url) else { return "(a URL that does not parse)".into() };
    // Fails only for URLs that cannot have user info, which then has none.
    let _ = u.set_password(None);
    let pairs: Vec<(String, String)> =
        u.query_pairs().filter(|(k, _)| k != "pass").map(|(k, v)| (k.into_owned(), v.into_owned())).collect();
    if pairs.is_empty() {
        u.set_query(None);
    } else {
        u.query_pairs_mut().clear().extend_pairs(pairs);
    }
    u.to_string()
}

/// The source to copy from, and what must never be printed.
struct Source {
    info: ConnectionInfo,
    /// The URL without its password: for messages and the state file.
    shown: String,
    /// The password in every form it was given (as typed in the URL,
    /// percent-decoded, from the file or the environment).
    secrets: Vec<String>,
}

impl Source {
    /// The source of `args`: `--from`, with the password from
    /// `--password-file`, else `BITSLED_MIGRATE_PASSWORD`, else the URL.
    ///
    /// # Errors
    /// A URL that does not parse, an unreadable or empty password file, a
    /// password that is not UTF-8. No error text contains the URL or the
    /// password.
    fn from_args(args: &MigrateArgs) -> Result<Source> {
        let shown = redact_url(&args.from);
        let mut secrets = Vec::new();
        if let Some(u) = redis::parse_redis_url(&args.from) {
            secrets.extend(u.password().map(str::to_string));
            secrets.extend(u.query_pairs().filter(|(k, _)| k == "pass").map(|(_, v)| v.into_owned()));
        }
        // The redis crate's errors for a bad URL do not quote it.
        let mut info = args.from.as_str().into_connection_info().map_err(|e| anyhow!("bad --from {shown}: {e}"))?;
        secrets.extend(info.redis_settings().password().map(str::to_string));
        let given = match &args.password_file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading the password file {}", path.display()))?;
                let line = text.lines().next().unwrap_or_default();
                if line.is_empty() {
                    bail!("the password file {} is empty", path.display());
                }
                Some(line.to_string())
            }
            None => match std::env::var(PASSWORD_ENV) {
                Ok(p) if !p.is_empty() => Some(p),
                Ok(_) | Err(std::env::VarError::NotPresent) => None,
                Err(std::env::VarError::NotUnicode(_)) => bail!("{PASSWORD_ENV} is not UTF-8"),
            },
        };
        if let Some(p) = given {
            let settings = info.redis_settings().clone().set_password(&p);
            info = info.set_redis_settings(settings);
            secrets.push(p);
        } else if !secrets.is_empty() {
            eprintln!(
                "note: a password in --from shows in the process list; {PASSWORD_ENV} or --password-file keep it out"
            );
        }
        secrets.retain(|s| !s.is_empty());
        Ok(Source { info, shown, secrets })
    }

    /// `e` with every occurrence of the password replaced.
    fn redact(&self, e: anyhow::Error) -> anyhow::Error {
        let text = format!("{e:#}");
        if !self.secrets.iter().any(|s| text.contains(s.as_str())) {
            return e;
        }
        anyhow!(self.secrets.iter().fold(text, |t, s| t.replace(s.as_str(), REDACTED)))
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

/// Runs `bitsled migrate`; the exit status is 1 if the check found
/// mismatches.
///
/// # Errors
/// Any failure to read the source or write the database; the error's text
/// never contains the source's password.
pub(crate) fn migrate(db: &Db, dir: &Path, args: &MigrateArgs) -> Result<i32> {
    let source = Source::from_args(args)?;
    run(db, dir, args, &source).map_err(|e| source.redact(e))
}

fn run(db: &Db, dir: &Path, args: &MigrateArgs, source: &Source) -> Result<i32> {
    let client = redis::Client::open(source.info.clone()).with_context(|| format!("bad --from {}", source.shown))?;
    let mut con = client.get_connection().with_context(|| format!("connecting to {}", source.shown))?;
    let mut state = match (args.resume, State::load(dir)?) {
        (true, Some(st)) if st.source == source.shown => {
            eprintln!("resuming: done {:?}, at {:?}", st.done, st.current);
            st
        }
        (true, Some(st)) => bail!("the state file is of a migration from {}, not {}", st.source, source.shown),
        (true, None) => bail!("--resume: no {} in {}", STATE_FILE, dir.display()),
        (false, _) => State { source: source.shown.clone(), ..State::default() },
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
    let mismatches = if args.no_verify { 0 } else { verify(&mut con, db, &dbs, args.batch)? };
    // Every database is copied: nothing is left to resume.
    State::remove(dir)?;
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

/// The replies of pipeline `p`, errors kept per command. An empty
/// pipeline (SCAN may answer a page with no keys, or a page may hold no
/// string) has no replies; the client would refuse to send it.
fn replies<T: redis::FromRedisValue>(mut p: redis::Pipeline, con: &mut Connection) -> Result<Vec<RedisResult<T>>> {
    if p.is_empty() {
        return Ok(Vec::new());
    }
    Ok(p.ignore_errors().query(con)?)
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
    let meta: Vec<RedisResult<redis::Value>> = replies(p, con)?;
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
    let lens: Vec<RedisResult<u64>> = replies(p, con)?;
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
    let values: Vec<RedisResult<Option<Vec<u8>>>> = replies(p, con)?;
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
            let got: Vec<RedisResult<redis::Value>> = replies(p, con)?;
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

    /// No password survives in a shown URL, in any of the forms the redis
    /// crate accepts; the rest of the URL does.
    #[test]
    fn urls_lose_their_passwords() {
        assert_eq!(redact_url("redis://:hunter2@h:1/2"), "redis://h:1/2");
        assert_eq!(redact_url("redis://me:hunter2@h:1"), "redis://me@h:1");
        assert_eq!(redact_url("redis://me:hun%40ter2@h:1"), "redis://me@h:1");
        assert_eq!(redact_url("redis://h:1"), "redis://h:1");
        assert_eq!(redact_url("redis+unix:///run/r.sock?pass=hunter2&db=3"), "redis+unix:///run/r.sock?db=3");
        assert_eq!(redact_url("unix:///run/r.sock?pass=hunter2"), "unix:///run/r.sock");
        assert!(!redact_url("redis://:hunter2@h:notaport").contains("hunter2"));
    }

    /// An older state file's password is dropped on load, from the state
    /// and from the file, which is rewritten owner-only.
    #[test]
    fn old_state_files_lose_their_passwords() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(STATE_FILE), "source redis://:hunter2@h:1\ndone 0\n").unwrap();
        let st = State::load(dir.path()).unwrap().unwrap();
        assert_eq!(st.source, "redis://h:1");
        let text = std::fs::read_to_string(dir.path().join(STATE_FILE)).unwrap();
        assert_eq!(text, "source redis://h:1\ndone 0\n");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(STATE_FILE)).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        }
        assert_eq!(State::load(dir.path()).unwrap(), Some(st));
        std::fs::write(dir.path().join(STATE_FILE), "hunter2\n").unwrap();
        let err = format!("{:#}", State::load(dir.path()).unwrap_err());
        assert!(!err.contains("hunter2"), "{err}");
    }

    /// The state file is owner-only; a symlink at the temporary path is
    /// refused and its target left alone; a leftover regular file there is
    /// replaced.
    #[test]
    #[cfg(unix)]
    fn state_file_is_private_and_never_follows_a_symlink() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let st = State { source: "redis://h:1".into(), done: vec![0], current: None };
        st.save(dir.path()).unwrap();
        let mode = std::fs::metadata(dir.path().join(STATE_FILE)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");

        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join(STATE_TMP)).unwrap();
        let err = st.save(dir.path()).unwrap_err();
        assert!(format!("{err:#}").contains("refusing"), "{err:#}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        // A dangling symlink is refused too.
        std::fs::remove_file(&victim).unwrap();
        assert!(st.save(dir.path()).is_err());
        assert!(!victim.exists());

        std::fs::remove_file(dir.path().join(STATE_TMP)).unwrap();
        std::fs::write(dir.path().join(STATE_TMP), "leftover").unwrap();
        st.save(dir.path()).unwrap();
        assert_eq!(State::load(dir.path()).unwrap(), Some(st));
        assert!(!dir.path().join(STATE_TMP).exists());
        State::remove(dir.path()).unwrap();
        assert!(!dir.path().join(STATE_FILE).exists());
        State::remove(dir.path()).unwrap();
    }

    #[test]
    fn ttls_become_expiry_times() {
        assert_eq!(expiry(1000, -1), SetExpiry::Clear);
        assert_eq!(expiry(1000, 0), SetExpiry::At(1001));
        assert_eq!(expiry(1000, 500), SetExpiry::At(1500));
    }
}
