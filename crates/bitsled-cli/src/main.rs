//! `bitsled`: run Redis bitmap commands against an on-disk bitsled database.
//!
//! ```text
//! bitsled [--db DIR] [-n N] CMD ARGS... run one command (in database N), print the reply as
//!                                    redis-cli --no-raw
//! bitsled [--db DIR] < script        run redis-cli-syntax lines from stdin
//! bitsled [--db DIR]                 on a terminal: an interactive prompt
//! bitsled [--db DIR] verify          check every record (exit code 1 on problems)
//! bitsled [--db DIR] stats [KEY]     how keys are stored
//! bitsled [--db DIR] demo [--users N] [--days D] [--density P]
//! bitsled [--db DIR] [-n N] import FILE|-
//!                                    load `key,offset[,bit]` CSV lines (into database N)
//! bitsled [--db DIR] [-n N] import --roaring [--bits64] FILE|- KEY
//!                                    replace KEY with a serialized Roaring bitmap
//! bitsled [--db DIR] [-n N] import --raw FILE|- KEY
//!                                    replace KEY with FILE's bytes, streamed
//! bitsled [--db DIR] export --roaring [--bits64] KEY FILE|-
//!                                    write KEY's set bits as a serialized Roaring bitmap
//! bitsled [--db DIR] [-n N] export --raw KEY FILE|-
//!                                    write KEY's bytes (as GET gives them), streamed
//! bitsled [--db DIR] compact         rewrite the database without its garbage
//! bitsled [--db DIR] migrate [--from redis://HOST:PORT] [--resume] ...
//!                                    copy a running Redis's string keys in
//! bitsled [--db DIR] serve [--port 6380] [--requirepass PW] [--fsync always|everysec|no] ...
//!                                    serve the Redis protocol (RESP2/RESP3) over TCP
//! bitsled cluster create HOST:PORT...  make `serve --cluster-enabled yes` nodes one cluster
//! ```

mod cluster;
mod compact;
mod demo;
mod export;
mod import;
mod migrate;
mod repl;
mod script;
mod serve;
mod stats;
mod verify;

use std::cell::{Cell, RefCell};
use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use bitsled::{Config, Db};
use bitsled_redis::command::format::format_reply;
use bitsled_redis::command::{execute, Reply};
use clap::{ArgGroup, Parser, Subcommand};
use indicatif::ProgressStyle;

use serve::ServeArgs;

/// Durable Redis-compatible bitmaps on disk.
#[derive(Parser, Debug)]
#[command(name = "bitsled", version, about)]
struct Cli {
    /// Database directory (created if missing).
    #[arg(long, global = true, default_value = "./bitsled-data")]
    db: PathBuf,
    /// Database number commands run in (as redis-cli's -n).
    #[arg(short = 'n', global = true, default_value_t = 0)]
    select: u32,
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
    /// from FILE, or stdin for `-`, into the database `-n` selects. Keys
    /// must not contain commas. With `--roaring FILE KEY`: replace KEY with
    /// the Roaring bitmap in FILE; with `--raw FILE KEY`: replace KEY with
    /// FILE's bytes.
    #[command(group(ArgGroup::new("whole").args(["roaring", "raw"])))]
    Import {
        /// The CSV file (with --roaring, the bitmap file; with --raw, the
        /// value's bytes), or `-` for stdin.
        file: PathBuf,
        /// With --roaring or --raw: the key to replace.
        #[arg(requires = "whole")]
        key: Option<OsString>,
        /// Read FILE as a serialized Roaring bitmap (the portable format of
        /// roaring-rs, CRoaring, Java and Go) and replace KEY with the string
        /// whose set bits are its values (value v is bit offset v, as
        /// SETBIT numbers bits); an empty bitmap deletes KEY.
        #[arg(long, requires = "key")]
        roaring: bool,
        /// With --roaring: FILE is a 64-bit RoaringTreemap (roaring-rs's
        /// serialization) instead of a 32-bit RoaringBitmap.
        #[arg(long, requires = "roaring")]
        bits64: bool,
        /// Replace KEY with the string of FILE's bytes (as SET would; e.g. a
        /// file `export --raw` wrote), read a page at a time:
        /// a value larger than memory loads in bounded memory. KEY switches
        /// to the new value once FILE is read whole.
        #[arg(long, requires = "key")]
        raw: bool,
    },
    /// Write KEY to FILE (stdout for `-`): its set bits as a serialized
    /// Roaring bitmap (`--roaring`; a missing key gives an empty bitmap), or
    /// its bytes (`--raw`).
    #[command(group(ArgGroup::new("format").args(["roaring", "raw"]).required(true)))]
    Export {
        /// Write a Roaring bitmap, in the portable format of roaring-rs,
        /// CRoaring, Java and Go.
        #[arg(long)]
        roaring: bool,
        /// With --roaring: write a 64-bit RoaringTreemap (roaring-rs's
        /// serialization), which holds offsets of 2^32 and above, instead of
        /// a 32-bit RoaringBitmap.
        #[arg(long, requires = "roaring")]
        bits64: bool,
        /// Write the key's bytes as GET gives them (absent pages as zero
        /// bytes), a page at a time: a value larger than memory leaves in
        /// bounded memory. A FILE is written beside itself and renamed into
        /// place at the end; a missing key is an error that leaves it alone.
        #[arg(long)]
        raw: bool,
        /// The key to export.
        key: OsString,
        /// The file to write (replaced), or `-` for stdout.
        file: PathBuf,
    },
    /// Copy every live key into a fresh database (DIR.compact-tmp), then swap
    /// it in place of DIR (the old one goes through DIR.compact-old and is
    /// removed). Refuses if DIR.compact-tmp or DIR.compact-old exists.
    Compact,
    /// Copy the string keys (bitmaps, HyperLogLogs, counters) of a running
    /// Redis, with their TTLs, into this database (source database N into
    /// database N), then compare every key's BITCOUNT and length with the
    /// source. Resumable: progress is kept in DIR/migrate.state.
    Migrate(migrate::MigrateArgs),
    /// Serve the database over the Redis protocol (RESP2, RESP3 after
    /// `HELLO 3`). SIGTERM/SIGINT or the SHUTDOWN command stop it: it stops
    /// accepting, finishes the requests it has received, flushes and exits
    /// with status 0 (a second signal exits at once).
    Serve(Box<ServeArgs>),
    /// Make running `serve --cluster-enabled yes` nodes one cluster (the
    /// topology pushed with CLUSTERX), or show a node's view of it.
    #[command(subcommand)]
    Cluster(cluster::ClusterCommand),
    /// Any Redis command, e.g. `bitsled SETBIT k 7 1`.
    #[command(external_subcommand)]
    Redis(Vec<OsString>),
}

fn main() {
    // Before any thread exists, so no other thread sees the hook change.
    install_panic_hook();
    let code = run(Cli::parse()).unwrap_or_else(|e| {
        print_error(&e);
        1
    });
    std::process::exit(code);
}

/// Prints `e` and its causes to stderr, in anyhow's layout but never with
/// a backtrace: an error here is a condition to act on (a damaged store, a
/// missing file), not a bug to debug.
fn print_error(e: &anyhow::Error) {
    let mut text = format!("Error: {e}");
    let mut last = e.to_string();
    let mut causes = 0;
    for cause in e.chain().skip(1) {
        // Some errors repeat their source's message as their own.
        let shown = cause.to_string();
        if shown == last {
            continue;
        }
        if causes == 0 {
            text.push_str("\n\nCaused by:");
        }
        causes += 1;
        text.push_str(&format!("\n    {shown}"));
        last = shown;
    }
    eprintln!("{text}");
}

/// Runs the command `cli` asks for; the process's exit status.
fn run(cli: Cli) -> Result<i32> {
    Ok(match cli.command {
        Some(Command::Redis(args)) => {
            let db = open(&cli.db)?.select(cli.select)?;
            let args: Vec<Vec<u8>> = args.into_iter().map(OsString::into_encoded_bytes).collect();
            let reply = execute(&db, &args);
            std::io::Write::write_all(&mut std::io::stdout().lock(), &format_reply(&reply))?;
            db.flush()?;
            i32::from(matches!(reply, Reply::Error(_)))
        }
        None => {
            let db = open(&cli.db)?.select(cli.select)?;
            if std::io::stdin().is_terminal() {
                repl::repl(&db)?;
            } else {
                script::run_script(&db, std::io::stdin().lock(), &mut std::io::stdout().lock())?;
            }
            db.flush()?;
            0
        }
        Some(Command::Verify) => verify::verify(&open(&cli.db)?)?,
        Some(Command::Stats { key }) => {
            stats::stats(&open(&cli.db)?.select(cli.select)?, key.map(OsString::into_encoded_bytes))?;
            0
        }
        Some(Command::Demo { users, days, density }) => {
            demo::demo(&open(&cli.db)?, users, days, density)?;
            0
        }
        Some(Command::Import { file, key: Some(key), roaring: true, bits64, .. }) => {
            let db = open(&cli.db)?.select(cli.select)?;
            import::import_roaring(&db, &file, &key.into_encoded_bytes(), roaring_format(bits64))?;
            0
        }
        Some(Command::Import { file, key: Some(key), raw: true, .. }) => {
            import::import_raw(&open(&cli.db)?.select(cli.select)?, &file, &key.into_encoded_bytes())?;
            0
        }
        Some(Command::Import { file, .. }) => {
            import::import(&open(&cli.db)?.select(cli.select)?, &file)?;
            0
        }
        Some(Command::Export { raw: true, key, file, .. }) => {
            export::export_raw(&open(&cli.db)?.select(cli.select)?, &key.into_encoded_bytes(), &file)?;
            0
        }
        Some(Command::Export { bits64, key, file, .. }) => {
            let db = open(&cli.db)?.select(cli.select)?;
            export::export_roaring(&db, &key.into_encoded_bytes(), &file, roaring_format(bits64))?;
            0
        }
        Some(Command::Compact) => {
            compact::compact(&cli.db)?;
            0
        }
        Some(Command::Migrate(args)) => migrate::migrate(&open(&cli.db)?, &cli.db, &args)?,
        Some(Command::Serve(args)) => {
            serve::serve(&cli.db, *args)?;
            0
        }
        Some(Command::Cluster(command)) => {
            cluster::cluster(&command)?;
            0
        }
    })
}

/// The Roaring serialization `--bits64` asks for.
fn roaring_format(bits64: bool) -> bitsled::RoaringFormat {
    if bits64 {
        bitsled::RoaringFormat::Bits64
    } else {
        bitsled::RoaringFormat::Bits32
    }
}

fn open(dir: &std::path::Path) -> Result<Db> {
    opening(|| Config::new(dir).open()).with_context(|| format!("opening the database in {}", dir.display()))
}

thread_local! {
    /// Set while this thread opens a database.
    static OPENING: Cell<bool> = const { Cell::new(false) };
    /// The last panic message the hook held back while [`OPENING`] was set.
    static HELD_BACK: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Makes the panic hook hold back the messages of panics of a thread that
/// is opening a database, and prints every other as before.
///
/// sled 0.34 panics on some damaged files; the library catches that panic
/// and returns an error that says what happened and what to do, which
/// `main` prints. The default hook's message and backtrace note would only
/// add noise before it.
fn install_panic_hook() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if OPENING.with(Cell::get) {
            HELD_BACK.with(|h| *h.borrow_mut() = Some(info.to_string()));
        } else {
            default(info);
        }
    }));
}

/// Runs `f`, an open of a database, with the panic hook holding back panic
/// messages of this thread. A panic that escapes `f` (so not caught and
/// reported by the library) still has its message printed.
fn opening<T>(f: impl FnOnce() -> T) -> T {
    struct Opening;
    impl Drop for Opening {
        fn drop(&mut self) {
            OPENING.with(|o| o.set(false));
            let held = HELD_BACK.with(|h| h.borrow_mut().take());
            if let (true, Some(message)) = (std::thread::panicking(), held) {
                eprintln!("{message}");
            }
        }
    }
    OPENING.with(|o| o.set(true));
    let _opening = Opening;
    f()
}

fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar())
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}
