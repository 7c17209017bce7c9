//! `bitsled`: run Redis bitmap commands against an on-disk bitsled database.
//!
//! ```text
//! bitsled [--db DIR] CMD ARGS...     run one command, print the reply as redis-cli --no-raw
//! bitsled [--db DIR] < script        run redis-cli-syntax lines from stdin
//! bitsled [--db DIR]                 on a terminal: an interactive prompt
//! bitsled [--db DIR] verify          check every record (exit code 1 on problems)
//! bitsled [--db DIR] stats [KEY]     how keys are stored
//! bitsled [--db DIR] demo [--users N] [--days D] [--density P]
//! bitsled [--db DIR] import FILE|-   load `key,offset[,bit]` CSV lines
//! bitsled [--db DIR] compact         rewrite the database without its garbage
//! bitsled [--db DIR] serve [--port 6380] [--requirepass PW] [--fsync always|everysec|no] ...
//!                                    serve the Redis protocol (RESP2/RESP3) over TCP
//! ```

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bitsled::command::cli_syntax::split_args;
use bitsled::command::format::format_reply;
use bitsled::command::{execute, Reply};
use bitsled::{Config, Db};
use clap::{Parser, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

/// Durable Redis-compatible bitmaps on disk.
#[derive(Parser, Debug)]
#[command(name = "bitsled", version, about)]
struct Cli {
    /// Database directory (created if missing).
    #[arg(long, global = true, default_value = "./bitsled-data")]
    db: PathBuf,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Check every stored record; exit code 1 if a problem is found.
    Verify,
    /// Pages per encoding, logical and stored bytes of KEY, or totals over all keys.
    Stats {
        /// The key to describe; all keys when omitted.
        key: Option<OsString>,
    },
    /// The acceptance scenarios end to end: check-ins, sign-ins, DAU/MAU,
    /// retention, new users, tags.
    Demo {
        /// Number of users (bits per daily bitmap).
        #[arg(long, default_value_t = 100_000_000)]
        users: u64,
        /// Number of daily check-in bitmaps.
        #[arg(long, default_value_t = 7)]
        days: u32,
        /// Probability that a user checks in on a given day (besides the
        /// loyal 5% who check in every day).
        #[arg(long, default_value_t = 0.2)]
        density: f64,
    },
    /// Load CSV lines `key,offset` or `key,offset,bit` (bit 1 when omitted)
    /// from FILE, or stdin for `-`. Keys must not contain commas.
    Import {
        /// The CSV file, or `-` for stdin.
        file: PathBuf,
    },
    /// Copy every live key into a fresh database (DIR.compact-tmp), then swap
    /// it in place of DIR (the old one goes through DIR.compact-old and is
    /// removed). Refuses if DIR.compact-tmp or DIR.compact-old exists.
    Compact,
    /// Serve the database over the Redis protocol (RESP2, RESP3 after
    /// `HELLO 3`). SIGTERM/SIGINT or the SHUTDOWN command stop it: it stops
    /// accepting, finishes the requests it has received, flushes and exits
    /// with status 0 (a second signal exits at once).
    Serve(ServeArgs),
    /// Any Redis command, e.g. `bitsled SETBIT k 7 1`.
    #[command(external_subcommand)]
    Redis(Vec<OsString>),
}

/// Options of `bitsled serve`.
#[derive(clap::Args, Debug)]
struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    bind: std::net::IpAddr,
    /// TCP port (0: any free port, printed at start).
    #[arg(long, default_value_t = 6380)]
    port: u16,
    /// Password clients must give with AUTH (or HELLO ... AUTH).
    #[arg(long)]
    requirepass: Option<OsString>,
    /// Most simultaneous clients.
    #[arg(long, default_value_t = bitsled::server::DEFAULT_MAX_CLIENTS)]
    maxclients: usize,
    /// When writes become durable: `always` (before the reply; group
    /// commit), `everysec` (within about a second), `no` (within 30 s).
    #[arg(long, default_value = "everysec")]
    fsync: bitsled::server::Fsync,
    /// Disconnect clients idle for this many seconds (0: never).
    #[arg(long, default_value_t = 0)]
    timeout: u64,
    /// `no` allows listening on a non-loopback address without a password.
    #[arg(long, default_value = "yes", value_parser = ["yes", "no"])]
    protected_mode: String,
}

/// `bitsled serve`: runs the server until a signal or SHUTDOWN.
fn serve(dir: &PathBuf, args: ServeArgs) -> Result<()> {
    use bitsled::server::{Server, ServerConfig};
    use signal_hook::consts::{SIGINT, SIGTERM};
    let config = ServerConfig::new()
        .bind(args.bind)
        .port(args.port)
        .requirepass(args.requirepass.map(OsString::into_encoded_bytes))
        .max_clients(args.maxclients)
        .fsync(args.fsync)
        .timeout(Some(Duration::from_secs(args.timeout)))
        .protected_mode(args.protected_mode == "yes");
    let db = config
        .db_config(Config::new(dir))
        .open()
        .with_context(|| format!("opening the database in {}", dir.display()))?;
    let server = Server::bind(db, config).context("starting the server")?;
    let stop = server.shutdown_handle();
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT]).context("installing signal handlers")?;
    std::thread::Builder::new().name("signals".into()).spawn(move || {
        let mut seen = 0;
        for sig in signals.forever() {
            seen += 1;
            if seen > 1 {
                eprintln!("bitsled serve: second signal {sig}, exiting without waiting");
                std::process::exit(1);
            }
            eprintln!("bitsled serve: signal {sig}, shutting down");
            stop.shutdown();
        }
    })?;
    eprintln!(
        "bitsled serve: listening on {} (fsync {}), database {}",
        server.local_addr(),
        args.fsync.name(),
        dir.display()
    );
    server.run().context("serving")?;
    eprintln!("bitsled serve: stopped, database flushed");
    Ok(())
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let code = match cli.command {
        Some(Command::Redis(args)) => {
            let db = open(&cli.db)?;
            let args: Vec<Vec<u8>> = args.into_iter().map(OsString::into_encoded_bytes).collect();
            let reply = execute(&db, &args);
            print!("{}", format_reply(&reply));
            db.flush()?;
            i32::from(matches!(reply, Reply::Error(_)))
        }
        None => {
            let db = open(&cli.db)?;
            if std::io::stdin().is_terminal() {
                repl(&db)?;
            } else {
                run_script(&db, std::io::stdin().lock(), &mut std::io::stdout().lock())?;
            }
            db.flush()?;
            0
        }
        Some(Command::Verify) => verify(&open(&cli.db)?)?,
        Some(Command::Stats { key }) => {
            stats(&open(&cli.db)?, key.map(OsString::into_encoded_bytes))?;
            0
        }
        Some(Command::Demo { users, days, density }) => {
            demo(&open(&cli.db)?, users, days, density)?;
            0
        }
        Some(Command::Import { file }) => {
            import(&open(&cli.db)?, &file)?;
            0
        }
        Some(Command::Compact) => {
            compact(&cli.db)?;
            0
        }
        Some(Command::Serve(args)) => {
            serve(&cli.db, args)?;
            0
        }
    };
    std::process::exit(code);
}

fn open(dir: &PathBuf) -> Result<Db> {
    Config::new(dir).open().with_context(|| format!("opening the database in {}", dir.display()))
}

/// What one input line asks for, following redis-cli's interactive loop.
enum Line {
    Skip,
    Quit,
    Print(&'static str),
    Run { args: Vec<Vec<u8>>, repeat: u64 },
}

/// Interprets one line as redis-cli does: `quit`/`exit` leave, a leading
/// number repeats the command, unbalanced quotes are reported.
fn interpret(line: &[u8]) -> Line {
    let Some(mut args) = split_args(line) else { return Line::Print("Invalid argument(s)\n") };
    let Some(first) = args.first() else { return Line::Skip };
    if first.eq_ignore_ascii_case(b"quit") || first.eq_ignore_ascii_case(b"exit") {
        return Line::Quit;
    }
    if args.len() > 1 {
        if let Some(n) = strtol_whole(first) {
            if n <= 0 {
                return Line::Print("Invalid redis-cli repeat command option value.\n");
            }
            args.remove(0);
            return Line::Run { args, repeat: n.unsigned_abs() };
        }
    }
    Line::Run { args, repeat: 1 }
}

/// C's `strtol(s, &end, 10)` when it consumes all of `s` (as redis-cli
/// checks for a repeat count): leading blanks, a sign, digits. An empty
/// string counts as 0, as in C; out of range is `Some(0)` (invalid).
fn strtol_whole(s: &[u8]) -> Option<i64> {
    let t = s.iter().position(|c| !c.is_ascii_whitespace()).map_or(&s[s.len()..], |i| &s[i..]);
    if t.is_empty() {
        return s.is_empty().then_some(0);
    }
    let (neg, digits) = match t[0] {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v = std::str::from_utf8(digits).ok()?.parse::<i64>().unwrap_or(0);
    Some(if neg { -v } else { v })
}

/// Runs redis-cli-syntax lines from `input`, printing replies as
/// `redis-cli --no-raw` does (including its `(N.NNs)` line after a command
/// that took 0.5 s or more).
fn run_script(db: &Db, input: impl BufRead, out: &mut impl Write) -> Result<()> {
    for line in input.split(b'\n') {
        let line = line?;
        if !run_line(db, &line, out)? {
            break;
        }
    }
    Ok(())
}

/// Runs one line; returns false when the input asks to quit.
fn run_line(db: &Db, line: &[u8], out: &mut impl Write) -> Result<bool> {
    match interpret(line) {
        Line::Skip => {}
        Line::Quit => return Ok(false),
        Line::Print(text) => out.write_all(text.as_bytes())?,
        Line::Run { args, repeat } => {
            for _ in 0..repeat {
                let t = Instant::now();
                let reply = execute(db, &args);
                out.write_all(format_reply(&reply).as_bytes())?;
                let elapsed = t.elapsed();
                if elapsed >= Duration::from_millis(500) {
                    writeln!(out, "({:.2}s)", elapsed.as_secs_f64())?;
                }
            }
        }
    }
    out.flush()?;
    Ok(true)
}

/// The prompt of the interactive loop.
const PROMPT: &str = "bitsled> ";

/// Where the interactive loop gets its lines: a line editor on a terminal,
/// a list of lines in tests.
trait LineSource {
    /// The next line without its newline; `None` when the user leaves
    /// (Ctrl-D, or Ctrl-C as in redis-cli).
    fn read_line(&mut self, prompt: &str) -> Result<Option<String>>;
    /// Remembers a line for the history (Up / Ctrl-R).
    fn remember(&mut self, line: &str);
}

/// The interactive loop: reads lines from `source`, keeps the non-blank ones
/// in its history and runs them until the input ends or asks to quit.
fn repl_loop(db: &Db, source: &mut impl LineSource, out: &mut impl Write) -> Result<()> {
    while let Some(line) = source.read_line(PROMPT)? {
        if !line.trim().is_empty() {
            source.remember(&line);
        }
        if !run_line(db, line.as_bytes(), out)? {
            break;
        }
    }
    Ok(())
}

/// Lines kept in the history.
const HISTORY_SIZE: usize = 1000;

/// A `rustyline` editor: line editing, history in memory and, when `HOME` is
/// set, in `~/.bitsled_history` (loaded at start, saved after each line;
/// failures to read or write it are ignored).
struct Readline {
    editor: rustyline::DefaultEditor,
    history: Option<PathBuf>,
}

impl Readline {
    fn new() -> Result<Readline> {
        let config = rustyline::Config::builder()
            .max_history_size(HISTORY_SIZE)?
            .history_ignore_dups(true)?
            .auto_add_history(false)
            .build();
        let mut editor = rustyline::DefaultEditor::with_config(config)?;
        let history =
            std::env::var_os("HOME").filter(|h| !h.is_empty()).map(|h| PathBuf::from(h).join(".bitsled_history"));
        if let Some(path) = &history {
            let _ = editor.load_history(path);
        }
        Ok(Readline { editor, history })
    }
}

impl LineSource for Readline {
    fn read_line(&mut self, prompt: &str) -> Result<Option<String>> {
        use rustyline::error::ReadlineError;
        match self.editor.readline(prompt) {
            Ok(line) => Ok(Some(line)),
            Err(ReadlineError::Eof | ReadlineError::Interrupted) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn remember(&mut self, line: &str) {
        let _ = self.editor.add_history_entry(line);
        if let Some(path) = &self.history {
            let _ = self.editor.save_history(path);
        }
    }
}

/// The interactive prompt, with line editing and history.
fn repl(db: &Db) -> Result<()> {
    repl_loop(db, &mut Readline::new()?, &mut std::io::stdout())
}

/// `dir` with `suffix` appended to its last component.
fn sibling(dir: &Path, suffix: &str) -> PathBuf {
    let mut s = dir.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Compacts the database in `dir` into `dir.compact-tmp` and swaps the
/// directories.
fn compact(dir: &Path) -> Result<()> {
    if !dir.is_dir() {
        bail!("no database in {}", dir.display());
    }
    // The canonical path has no trailing `/` or `.`, so the siblings are
    // really next to the directory.
    let dir = dir.canonicalize().with_context(|| format!("resolving {}", dir.display()))?;
    let tmp = sibling(&dir, ".compact-tmp");
    let old = sibling(&dir, ".compact-old");
    for p in [&tmp, &old] {
        if p.symlink_metadata().is_ok() {
            bail!("{} exists (left by an interrupted compaction?); remove it first", p.display());
        }
    }
    let t = Instant::now();
    let db = open(&dir)?;
    let report = match db.compact_into(&tmp) {
        Ok(r) => r,
        Err(e) => {
            // Only what this run created; the database itself is untouched.
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e).context("compacting");
        }
    };
    // Close the database (and its background thread) before moving it.
    drop(db);
    std::fs::rename(&dir, &old).with_context(|| format!("renaming {} to {}", dir.display(), old.display()))?;
    if let Err(e) = std::fs::rename(&tmp, &dir) {
        let undo = std::fs::rename(&old, &dir);
        return Err(e).with_context(|| {
            format!(
                "renaming {} to {} (the old database was {})",
                tmp.display(),
                dir.display(),
                if undo.is_ok() { "put back".to_string() } else { format!("left in {}", old.display()) }
            )
        });
    }
    std::fs::remove_dir_all(&old).with_context(|| format!("removing {}", old.display()))?;
    println!("compacted {} keys, {} pages in {:.1} ms", report.keys, report.pages, ms(t));
    println!("size on disk: {} bytes before, {} bytes after", report.bytes_before, report.bytes_after);
    Ok(())
}

fn verify(db: &Db) -> Result<i32> {
    let t = Instant::now();
    let report = db.verify()?;
    println!("verified {} keys, {} pages in {:.1} ms", report.keys, report.pages, ms(t));
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

fn stats(db: &Db, key: Option<Vec<u8>>) -> Result<()> {
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
    let ratio = if st.len == 0 { 0.0 } else { st.stored_bytes as f64 / st.len as f64 };
    println!("  stored bytes:   {} ({:.4} of logical)", st.stored_bytes, ratio);
}

/// Lines between progress updates of an import.
const IMPORT_GROUP: usize = 1 << 20;

fn import(db: &Db, file: &PathBuf) -> Result<()> {
    let (reader, len): (Box<dyn Read>, Option<u64>) = if file.as_os_str() == "-" {
        (Box::new(std::io::stdin()), None)
    } else {
        let f = std::fs::File::open(file).with_context(|| format!("opening {}", file.display()))?;
        let len = f.metadata().ok().map(|m| m.len());
        (Box::new(f), len)
    };
    let bar = match len {
        Some(n) => ProgressBar::new(n).with_style(style("{bar:40} {bytes}/{total_bytes} {msg} ({eta})")),
        None => ProgressBar::new_spinner().with_style(style("{spinner} {bytes} {msg}")),
    };
    let t = Instant::now();
    let mut pending = Pending::default();
    let (mut lines, mut changed) = (0u64, 0u64);
    for (i, line) in BufReader::new(reader).split(b'\n').enumerate() {
        let line = line?;
        bar.inc(line.len() as u64 + 1);
        let line = line.strip_suffix(b"\r").unwrap_or(&line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let (key, offset, bit) = parse_csv(line).with_context(|| format!("line {}", i + 1))?;
        changed += pending.push(db, key, offset, bit)?;
        lines += 1;
        if pending.offsets >= IMPORT_GROUP {
            changed += pending.apply(db)?;
            bar.set_message(format!("{lines} lines"));
        }
    }
    changed += pending.apply(db)?;
    db.flush()?;
    bar.finish_and_clear();
    println!("imported {lines} lines, {changed} bits changed, in {:.1} ms", ms(t));
    Ok(())
}

/// Offsets waiting to be applied with `Db::set_bits`, one group per key.
/// A key's group holds one bit value; a line with the other value for the
/// same key applies everything pending first, so lines take effect in order.
#[derive(Default)]
struct Pending {
    groups: Vec<(Vec<u8>, bool, Vec<u64>)>,
    index: HashMap<Vec<u8>, usize>,
    offsets: usize,
}

impl Pending {
    /// Adds one line; returns the bits changed by a flush it forced.
    fn push(&mut self, db: &Db, key: Vec<u8>, offset: u64, bit: bool) -> Result<u64> {
        let mut changed = 0;
        if let Some(&i) = self.index.get(&key) {
            if self.groups[i].1 != bit {
                changed = self.apply(db)?;
            }
        }
        let i = match self.index.get(&key) {
            Some(&i) => i,
            None => {
                self.groups.push((key.clone(), bit, Vec::new()));
                self.index.insert(key, self.groups.len() - 1);
                self.groups.len() - 1
            }
        };
        self.groups[i].2.push(offset);
        self.offsets += 1;
        Ok(changed)
    }

    fn apply(&mut self, db: &Db) -> Result<u64> {
        let mut changed = 0;
        for (key, bit, offsets) in self.groups.drain(..) {
            changed += db.set_bits(&key, &offsets, bit)?;
        }
        self.index.clear();
        self.offsets = 0;
        Ok(changed)
    }
}

fn parse_csv(line: &[u8]) -> Result<(Vec<u8>, u64, bool)> {
    let mut fields = line.splitn(3, |&c| c == b',');
    let key = fields.next().unwrap_or_default();
    let num = |f: Option<&[u8]>, what: &str| -> Result<u64> {
        let f = f.with_context(|| format!("missing {what}"))?;
        let s = std::str::from_utf8(f)?.trim();
        s.parse::<u64>().with_context(|| format!("bad {what} {s:?}"))
    };
    let offset = num(fields.next(), "offset")?;
    let bit = match fields.next() {
        None => true,
        Some(f) => match num(Some(f), "bit")? {
            0 => false,
            1 => true,
            other => bail!("bit must be 0 or 1, not {other}"),
        },
    };
    Ok((key.to_vec(), offset, bit))
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar())
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

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
    let text = format_reply(&reply);
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
        bail!("{line}: {e}");
    }
    Ok(reply)
}

fn int(r: &Reply) -> i64 {
    match r {
        Reply::Integer(n) => *n,
        _ => 0,
    }
}

fn demo(db: &Db, users: u64, days: u32, density: f64) -> Result<()> {
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
            db.pfadd(format!("page:uv:{page}").as_bytes(), chunk)?;
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
        db.bf_add_many(b"seen", chunk)?;
    }
    println!("  BF.MADD of {} items                               {:>9.3} ms", msgs.len(), ms(t));
    show(db, "BF.EXISTS seen msg:0")?;
    show(db, &format!("BF.EXISTS seen msg:{}", visitors))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// redis-cli's repeat prefix: a whole number before a command.
    #[test]
    fn repeat_prefix() {
        assert!(matches!(interpret(b"3 ping"), Line::Run { repeat: 3, .. }));
        assert!(matches!(interpret(b"0 ping"), Line::Print(_)));
        assert!(matches!(interpret(b"-1 ping"), Line::Print(_)));
        assert!(matches!(interpret(b"'' ping"), Line::Print(_)));
        assert!(matches!(interpret(b"3x ping"), Line::Run { repeat: 1, .. }));
        assert!(matches!(interpret(b"3"), Line::Run { repeat: 1, .. }));
        assert!(matches!(interpret(b"QUIT"), Line::Quit));
        assert!(matches!(interpret(b"   "), Line::Skip));
        assert!(matches!(interpret(b"get \"x"), Line::Print("Invalid argument(s)\n")));
    }

    /// Lines from a list, as a terminal would give them.
    struct Lines {
        lines: std::vec::IntoIter<&'static str>,
        history: Vec<String>,
        prompts: usize,
    }

    impl LineSource for Lines {
        fn read_line(&mut self, prompt: &str) -> Result<Option<String>> {
            assert_eq!(prompt, PROMPT);
            self.prompts += 1;
            Ok(self.lines.next().map(str::to_string))
        }

        fn remember(&mut self, line: &str) {
            self.history.push(line.to_string());
        }
    }

    fn run_repl(lines: Vec<&'static str>) -> (String, Lines) {
        let dir = tempfile::tempdir().unwrap();
        let db = Config::new(dir.path()).open().unwrap();
        let mut source = Lines { lines: lines.into_iter(), history: Vec::new(), prompts: 0 };
        let mut out = Vec::new();
        repl_loop(&db, &mut source, &mut out).unwrap();
        (String::from_utf8(out).unwrap(), source)
    }

    /// The loop runs each line, remembers the non-blank ones and stops at
    /// `quit` (later lines are not run) or at the end of input (Ctrl-D).
    #[test]
    fn repl_runs_lines_until_quit() {
        let (out, src) = run_repl(vec!["SETBIT k 7 1", "", "  ", "get k", "2 ping", "get \"x", "QUIT", "setbit k 0 1"]);
        assert_eq!(out, "(integer) 0\n\"\\x01\"\nPONG\nPONG\nInvalid argument(s)\n");
        assert_eq!(src.history, ["SETBIT k 7 1", "get k", "2 ping", "get \"x", "QUIT"]);
        assert_eq!(src.prompts, 7);

        let (out, src) = run_repl(vec!["exists k", "exit"]);
        assert_eq!(out, "(integer) 0\n");
        assert_eq!(src.prompts, 2);

        let (out, src) = run_repl(vec!["echo a"]);
        assert_eq!(out, "\"a\"\n");
        assert_eq!(src.prompts, 2, "reads again until the end of input");
    }

    #[test]
    fn csv_lines() {
        assert_eq!(parse_csv(b"k,5").unwrap(), (b"k".to_vec(), 5, true));
        assert_eq!(parse_csv(b"k, 5 ,0").unwrap(), (b"k".to_vec(), 5, false));
        assert!(parse_csv(b"k").is_err());
        assert!(parse_csv(b"k,x").is_err());
        assert!(parse_csv(b"k,1,2").is_err());
    }
}
