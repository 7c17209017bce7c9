//! `bitsled serve`: the Redis-protocol server, with signal handling.

use bitsled_redis::server::parse_memory;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use bitsled::Config;

/// Options of `bitsled serve`. Each may also come from `--config FILE`;
/// one given on the command line wins over the file.
#[derive(clap::Args, Debug, Default)]
pub(crate) struct ServeArgs {
    /// A configuration file in redis.conf syntax (one `directive value`
    /// per line, `#` comments): bind, port, tcp-backlog, requirepass,
    /// maxclients, appendfsync, timeout, protected-mode, maxmemory, databases,
    /// slowlog-log-slower-than, slowlog-max-len, disk-reserve, cluster-enabled; `save`, `appendonly`,
    /// `daemonize no` and `loglevel` are accepted and ignored.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1].
    #[arg(long)]
    bind: Option<std::net::IpAddr>,
    /// TCP port (0: any free port, printed at start) [default: 6380].
    #[arg(long)]
    port: Option<u16>,
    /// Connections the kernel queues for the server to accept, as Redis's
    /// `tcp-backlog` (capped by `net.core.somaxconn`) [default: 511].
    #[arg(long)]
    tcp_backlog: Option<u32>,
    /// Password clients must give with AUTH (or HELLO ... AUTH).
    #[arg(long)]
    requirepass: Option<OsString>,
    /// Most simultaneous clients [default: 10000].
    #[arg(long)]
    maxclients: Option<usize>,
    /// When writes become durable: `always` (before the reply; group
    /// commit), `everysec` (within about a second), `no` (within 30 s)
    /// [default: everysec].
    #[arg(long)]
    fsync: Option<bitsled_redis::server::Fsync>,
    /// Disconnect clients idle for this many seconds (0: never) [default: 0].
    #[arg(long)]
    timeout: Option<u64>,
    /// `no` allows listening on a non-loopback address without a password
    /// [default: yes].
    #[arg(long, value_parser = ["yes", "no"])]
    protected_mode: Option<String>,
    /// Memory budget, as redis.conf writes sizes (`256mb`, `2gb`, bytes):
    /// three quarters for the page and metadata caches, an eighth for
    /// changes waiting to be written, an eighth for the store's cache
    /// [default: 640mb].
    #[arg(long, value_parser = parse_memory)]
    maxmemory: Option<u64>,
    /// Free disk space to keep: with less free than this plus the next
    /// write-back (three times its changes, for the store's log growth),
    /// changes stay in memory and writes are refused
    /// (`-MISCONF`) until space is freed; reads go on [default: 64mb].
    #[arg(long, value_parser = parse_memory)]
    disk_reserve: Option<u64>,
    /// Number of databases (SELECT 0 .. N-1) [default: 16].
    #[arg(long)]
    databases: Option<u16>,
    /// Log commands that take at least this many microseconds in SLOWLOG
    /// (-1: none, 0: all) [default: 10000].
    #[arg(long, allow_negative_numbers = true)]
    slowlog_log_slower_than: Option<i64>,
    /// Most entries SLOWLOG keeps [default: 128].
    #[arg(long, value_parser = clap::value_parser!(i64).range(0..))]
    slowlog_max_len: Option<i64>,
    /// Keyspace events to publish, as Redis's `notify-keyspace-events`
    /// letters (`KEA`: every event on both channels; `Ex`: expirations as
    /// keyevents) [default: none].
    #[arg(long)]
    notify_keyspace_events: Option<String>,
    /// `yes`: the server restarts itself (the same process, before it opens
    /// anything) with glibc's `glibc.malloc.hugetlb=1` tunable, so malloc
    /// asks for transparent huge pages for its heaps: with 10^7 keys the
    /// metadata's random accesses miss the TLB far less (DESIGN.md,
    /// section 5). No effect where `GLIBC_TUNABLES` already names it, the
    /// kernel's THP mode is `never`, or the C library is not glibc
    /// [default: yes].
    #[arg(long, value_parser = ["yes", "no"])]
    malloc_huge_pages: Option<String>,
    /// How many heaps (arenas) glibc's malloc may keep: the server restarts
    /// itself the same way with `glibc.malloc.arena_max=N`. glibc's own
    /// default, 8 per core, leaves freed memory spread over many 64 MiB
    /// heaps, so RSS stays far above what is in use (DESIGN.md, section
    /// 5). With the bound, malloc also keeps up to 32 MiB free at the top
    /// of each heap (`glibc.malloc.trim_threshold`), so memory freed after
    /// a write-back is reused, not returned and faulted in again (at the
    /// cost of up to 32 MiB kept per heap), and gives requests of 128 KiB
    /// and more mappings of their own (`glibc.malloc.mmap_threshold`,
    /// glibc's starting value, fixed). 0 keeps glibc's defaults. Each has
    /// no effect where `GLIBC_TUNABLES` already names that tunable or the
    /// matching `MALLOC_*` variable is set [default: the number of cores,
    /// at least 2].
    #[arg(long, value_name = "N")]
    malloc_arenas: Option<usize>,
    /// `yes`: serve as a node of a cluster, as Redis's `cluster-enabled`:
    /// key slots, `MOVED` redirections, CLUSTER SLOTS/SHARDS/NODES; the
    /// topology is pushed with CLUSTERX (`bitsled cluster create`) and kept
    /// in the database directory. Only database 0 is served
    /// [default: no].
    #[arg(long, value_parser = ["yes", "no"])]
    cluster_enabled: Option<String>,
    /// `"HOST PORT"`: start as a replica of that bitsled master, as Redis's
    /// `replicaof`: the store follows the master's (loaded whole at the
    /// first sync, then the master's changes as they are written back)
    /// and refuses writes. `REPLICAOF NO ONE` makes it a master
    /// [default: a master].
    #[arg(long, value_name = "HOST PORT")]
    replicaof: Option<String>,
    /// The password a replica gives its master (Redis's `masterauth`).
    #[arg(long)]
    masterauth: Option<OsString>,
    /// Bytes of changes a master keeps for replicas that reconnect
    /// (Redis's `repl-backlog-size`) [default: 64mb].
    #[arg(long, value_parser = parse_memory)]
    repl_backlog_size: Option<u64>,
}

/// `"HOST PORT"` (or `HOST:PORT`) of `--replicaof`.
fn parse_master(text: &str) -> Result<(String, u16)> {
    let (host, port) = text
        .trim()
        .rsplit_once([' ', ':'])
        .ok_or_else(|| anyhow::anyhow!("--replicaof {text:?}: give the master as \"HOST PORT\""))?;
    let port = port.trim().parse().map_err(|e| anyhow::anyhow!("--replicaof {text:?}: port: {e}"))?;
    Ok((host.trim().to_string(), port))
}

impl ServeArgs {
    /// Fills the options not given on the command line from the
    /// configuration file, if there is one.
    fn merge_config_file(mut self) -> Result<ServeArgs> {
        let Some(path) = self.config.clone() else { return Ok(self) };
        let text = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let file = parse_config(&text).with_context(|| format!("in {}", path.display()))?;
        self.bind = self.bind.or(file.bind);
        self.port = self.port.or(file.port);
        self.tcp_backlog = self.tcp_backlog.or(file.tcp_backlog);
        self.requirepass = self.requirepass.or(file.requirepass);
        self.maxclients = self.maxclients.or(file.maxclients);
        self.fsync = self.fsync.or(file.fsync);
        self.timeout = self.timeout.or(file.timeout);
        self.protected_mode = self.protected_mode.or(file.protected_mode);
        self.maxmemory = self.maxmemory.or(file.maxmemory);
        self.disk_reserve = self.disk_reserve.or(file.disk_reserve);
        self.databases = self.databases.or(file.databases);
        self.slowlog_log_slower_than = self.slowlog_log_slower_than.or(file.slowlog_log_slower_than);
        self.slowlog_max_len = self.slowlog_max_len.or(file.slowlog_max_len);
        self.notify_keyspace_events = self.notify_keyspace_events.or(file.notify_keyspace_events);
        self.cluster_enabled = self.cluster_enabled.or(file.cluster_enabled);
        self.replicaof = self.replicaof.or(file.replicaof);
        self.masterauth = self.masterauth.or(file.masterauth);
        self.repl_backlog_size = self.repl_backlog_size.or(file.repl_backlog_size);
        Ok(self)
    }
}

/// The options a configuration file in redis.conf syntax sets.
fn parse_config(text: &[u8]) -> Result<ServeArgs> {
    use anyhow::bail;
    let mut out = ServeArgs::default();
    for (i, line) in text.split(|&b| b == b'\n').enumerate() {
        let n = i + 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let trimmed = line.trim_ascii_start();
        if trimmed.is_empty() || trimmed.starts_with(b"#") {
            continue;
        }
        let Some(args) = bitsled_redis::command::cli_syntax::split_args(trimmed) else {
            bail!("line {n}: unbalanced quotes");
        };
        let words: Vec<String> = args.iter().map(|a| String::from_utf8_lossy(a).into_owned()).collect();
        let (name, values) = match words.split_first() {
            Some((name, values)) => (name.to_ascii_lowercase(), values),
            None => continue,
        };
        let one = || -> Result<&String> {
            match values {
                [v] => Ok(v),
                _ => bail!("line {n}: {name} takes one value"),
            }
        };
        let bad = |e: &dyn std::fmt::Display| anyhow::anyhow!("line {n}: {name}: {e}");
        match name.as_str() {
            // Redis accepts several addresses; the first is the one served.
            "bind" => {
                let first = values.first().ok_or_else(|| bad(&"needs an address"))?;
                out.bind = Some(first.parse().map_err(|e| bad(&e))?);
            }
            "port" => out.port = Some(one()?.parse().map_err(|e| bad(&e))?),
            "tcp-backlog" => out.tcp_backlog = Some(one()?.parse().map_err(|e| bad(&e))?),
            "requirepass" => out.requirepass = Some(OsString::from(one()?)),
            "masterauth" => out.masterauth = Some(OsString::from(one()?)),
            "replicaof" | "slaveof" => out.replicaof = Some(values.join(" ")),
            "repl-backlog-size" => out.repl_backlog_size = Some(parse_memory(one()?).map_err(|e| bad(&e))?),
            "maxclients" => out.maxclients = Some(one()?.parse().map_err(|e| bad(&e))?),
            "appendfsync" => out.fsync = Some(one()?.parse().map_err(|e: String| bad(&e))?),
            "timeout" => out.timeout = Some(one()?.parse().map_err(|e| bad(&e))?),
            "protected-mode" => match one()?.as_str() {
                v @ ("yes" | "no") => out.protected_mode = Some(v.to_string()),
                v => bail!("line {n}: protected-mode is yes or no, not {v:?}"),
            },
            "maxmemory" => out.maxmemory = Some(parse_memory(one()?).map_err(|e| bad(&e))?),
            "disk-reserve" => out.disk_reserve = Some(parse_memory(one()?).map_err(|e| bad(&e))?),
            "databases" => out.databases = Some(one()?.parse().map_err(|e| bad(&e))?),
            "slowlog-log-slower-than" => out.slowlog_log_slower_than = Some(one()?.parse().map_err(|e| bad(&e))?),
            "slowlog-max-len" => {
                let len: i64 = one()?.parse().map_err(|e| bad(&e))?;
                if len < 0 {
                    bail!("line {n}: slowlog-max-len is at least 0, not {len}");
                }
                out.slowlog_max_len = Some(len);
            }
            "notify-keyspace-events" => out.notify_keyspace_events = Some(values.join("")),
            "cluster-enabled" => match one()?.to_ascii_lowercase().as_str() {
                v @ ("yes" | "no") => out.cluster_enabled = Some(v.to_string()),
                v => bail!("line {n}: cluster-enabled is yes or no, not {v:?}"),
            },
            // Snapshots and the AOF have no counterpart (every write goes to
            // the store); the server does not daemonize or keep a log file.
            "save" | "appendonly" | "loglevel" => {}
            "daemonize" if one()?.eq_ignore_ascii_case("no") => {}
            other => bail!("line {n}: unsupported directive {other:?}"),
        }
    }
    Ok(out)
}

/// glibc's tunable that makes malloc advise transparent huge pages for its
/// heaps; read once, when the process starts.
const HUGE_PAGES_TUNABLE: &str = "glibc.malloc.hugetlb";

/// glibc's tunable that bounds how many heaps (arenas) malloc keeps.
const ARENA_MAX_TUNABLE: &str = "glibc.malloc.arena_max";

/// glibc's tunables for how much free memory a heap keeps at its top and
/// from what size a request gets its own mapping; either one set turns off
/// glibc's adjustment of both, so they are set together.
const TRIM_THRESHOLD_TUNABLE: &str = "glibc.malloc.trim_threshold";
const MMAP_THRESHOLD_TUNABLE: &str = "glibc.malloc.mmap_threshold";

/// The trim threshold with bounded arenas: 32 MiB. A write-back's batch
/// (a few MB to tens of MB) is allocated, copied by sled and freed about
/// once a second; under glibc's defaults the heap gave that memory back and
/// the next batch faulted it in again (a load of 10^6 Bloom filters took
/// 273-925k minor faults against 84k with a 32 MiB threshold, and its wall
/// time went from 1.10x to 0.97x the build before smaller write-backs).
const HEAP_KEEP_BYTES: usize = 32 << 20;

/// The mapping threshold with bounded arenas: 128 KiB, glibc's own
/// starting value, kept fixed (naming the trim threshold ends glibc's
/// adjustment of both). Requests this large get mappings of their own and
/// leave no holes in the heaps: with the mapping threshold at 32 MiB too,
/// the resident set after loading 10^7 sign-in keys was 590-630 MiB
/// against 493-519 MiB with this one (BENCHMARKS.md, "Heap thresholds
/// again").
const HEAP_MAP_FROM_BYTES: usize = 128 << 10;

/// The malloc arenas `--malloc-arenas` defaults to: one per core, at
/// least 2.
fn default_malloc_arenas() -> usize {
    std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get).max(2)
}

/// `current` (a `GLIBC_TUNABLES` value) with the settings the server wants
/// added: huge pages if `huge_pages`, at most `arenas` heaps if not 0 and
/// then the trim and mapping thresholds ([`HEAP_KEEP_BYTES`],
/// [`HEAP_MAP_FROM_BYTES`]). A tunable `current` names
/// already is left as the operator set it, and so is the arena bound where
/// `MALLOC_ARENA_MAX` is set (`arena_env`) and the thresholds where either
/// of them is named or set through its `MALLOC_*` variable
/// (`threshold_env`). `None`: nothing to add.
fn malloc_tunables(
    current: &str,
    huge_pages: bool,
    arenas: usize,
    (arena_env, threshold_env): (bool, bool),
) -> Option<String> {
    let mut add = Vec::new();
    if huge_pages && !current.contains(HUGE_PAGES_TUNABLE) {
        add.push(format!("{HUGE_PAGES_TUNABLE}=1"));
    }
    if arenas > 0 && !arena_env && !current.contains(ARENA_MAX_TUNABLE) {
        add.push(format!("{ARENA_MAX_TUNABLE}={arenas}"));
    }
    let thresholds_named = [TRIM_THRESHOLD_TUNABLE, MMAP_THRESHOLD_TUNABLE].iter().any(|t| current.contains(t));
    if arenas > 0 && !threshold_env && !thresholds_named {
        add.push(format!("{TRIM_THRESHOLD_TUNABLE}={HEAP_KEEP_BYTES}"));
        add.push(format!("{MMAP_THRESHOLD_TUNABLE}={HEAP_MAP_FROM_BYTES}"));
    }
    if add.is_empty() {
        return None;
    }
    if !current.is_empty() {
        add.insert(0, current.to_owned());
    }
    Some(add.join(":"))
}

/// Restarts the server (`exec` of the same binary with the same arguments:
/// the same process id, no thread or file opened yet) with the malloc
/// tunables [`malloc_tunables`] adds to `GLIBC_TUNABLES`, if it adds any
/// (after the restart it adds none, so this runs once). Returns only if it
/// did not restart; a failed restart is reported and the server goes on as
/// it is.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn restart_with_malloc_tunables(huge_pages: bool, arenas: usize) {
    use std::os::unix::process::CommandExt;
    let current = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
    let set = |name: &str| std::env::var_os(name).is_some();
    let env = (set("MALLOC_ARENA_MAX"), set("MALLOC_TRIM_THRESHOLD_") || set("MALLOC_MMAP_THRESHOLD_"));
    let Some(tunables) = malloc_tunables(&current, huge_pages, arenas, env) else { return };
    let Ok(exe) = std::env::current_exe() else { return };
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_else(|| exe.clone().into_os_string());
    let err = std::process::Command::new(&exe).arg0(arg0).args(args).env("GLIBC_TUNABLES", tunables).exec();
    eprintln!("note: could not restart with malloc's tunables ({err}); going on without them");
}

/// Without glibc on Linux there are no such tunables.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn restart_with_malloc_tunables(_huge_pages: bool, _arenas: usize) {}

/// `bitsled serve`: runs the server until a signal or SHUTDOWN.
pub(crate) fn serve(dir: &PathBuf, args: ServeArgs) -> Result<()> {
    use bitsled_redis::server::{Server, ServerConfig};
    use signal_hook::consts::{SIGINT, SIGTERM};
    restart_with_malloc_tunables(
        args.malloc_huge_pages.as_deref() != Some("no"),
        args.malloc_arenas.unwrap_or_else(default_malloc_arenas),
    );
    let args = args.merge_config_file()?;
    let fsync = args.fsync.unwrap_or(bitsled_redis::server::Fsync::EverySec);
    let slower_than = args.slowlog_log_slower_than.unwrap_or(bitsled_redis::server::DEFAULT_SLOWLOG_SLOWER_THAN_USEC);
    if slower_than < -1 {
        anyhow::bail!("slowlog-log-slower-than {slower_than}: at least -1 (-1 logs nothing)");
    }
    // Each client holds a descriptor: raise the open-file limit to fit
    // them, or serve fewer (as Redis does at start).
    let files =
        bitsled_redis::server::fit_open_files(args.maxclients.unwrap_or(bitsled_redis::server::DEFAULT_MAX_CLIENTS))
            .map_err(|why| anyhow::anyhow!("maxclients: {why}"))?;
    if let Some(warning) = &files.warning {
        eprintln!("bitsled serve: {warning}");
    }
    let max_clients = files.max_clients;
    let config =
        ServerConfig::new()
            .bind(args.bind.unwrap_or(std::net::IpAddr::from([127, 0, 0, 1])))
            .port(args.port.unwrap_or(6380))
            .tcp_backlog(args.tcp_backlog.unwrap_or(bitsled_redis::server::DEFAULT_TCP_BACKLOG))
            .requirepass(args.requirepass.map(OsString::into_encoded_bytes))
            .max_clients(max_clients)
            .fsync(fsync)
            .maxmemory(args.maxmemory.unwrap_or(0))
            .timeout(Some(Duration::from_secs(args.timeout.unwrap_or(0))))
            .protected_mode(args.protected_mode.as_deref() != Some("no"))
            .slowlog(
                slower_than,
                args.slowlog_max_len.map_or(bitsled_redis::server::DEFAULT_SLOWLOG_MAX_LEN, i64::unsigned_abs),
            )
            .cluster_enabled(args.cluster_enabled.as_deref() == Some("yes"))
            .replicaof(args.replicaof.as_deref().map(parse_master).transpose()?)
            .masterauth(args.masterauth.map(OsString::into_encoded_bytes))
            .repl_backlog_bytes(args.repl_backlog_size.map_or(bitsled_redis::replication::DEFAULT_BACKLOG_BYTES, |b| {
                usize::try_from(b).unwrap_or(usize::MAX)
            }))
            .notify_keyspace_events(args.notify_keyspace_events.as_deref().unwrap_or(""))
            .map_err(|why| anyhow::anyhow!("notify-keyspace-events: {why}"))?;
    if let Some(bytes) = args.maxmemory.filter(|&b| b < bitsled_redis::server::LEAST_BUDGET_BYTES) {
        anyhow::bail!("--maxmemory {bytes}: at least 16mb");
    }
    let db_config = config
        .db_config(Config::new(dir))
        .databases(args.databases.unwrap_or(16))
        .disk_reserve_bytes(args.disk_reserve.unwrap_or(bitsled::DEFAULT_DISK_RESERVE_BYTES));
    let db =
        crate::opening(|| db_config.open()).with_context(|| format!("opening the database in {}", dir.display()))?;
    let server = Server::bind(db, config).context("starting the server")?;
    let stop = server.shutdown_handle();
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT]).context("installing signal handlers")?;
    std::thread::Builder::new().name("signals".into()).spawn(move || {
        let mut seen = 0;
        for sig in signals.forever() {
            seen += 1;
            if seen > 1 {
                // Also what ends a final flush waiting for disk space.
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
        fsync.name(),
        dir.display()
    );
    server.run().context("serving")?;
    eprintln!("bitsled serve: stopped, database flushed");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The restart adds only what the operator has not set, and nothing
    /// once all are set (so the restarted server does not restart again);
    /// the two thresholds come with the arena bound and go together.
    #[test]
    fn malloc_tunables_add_what_is_missing_once() {
        let keep = "glibc.malloc.trim_threshold=33554432:glibc.malloc.mmap_threshold=131072";
        let all = format!("glibc.malloc.hugetlb=1:glibc.malloc.arena_max=2:{keep}");
        let none = (false, false);
        assert_eq!(malloc_tunables("", true, 2, none), Some(all.clone()));
        assert_eq!(malloc_tunables(&all, true, 2, none), None);
        assert_eq!(malloc_tunables("", false, 4, none), Some(format!("glibc.malloc.arena_max=4:{keep}")));
        assert_eq!(malloc_tunables("", true, 0, none).as_deref(), Some("glibc.malloc.hugetlb=1"));
        assert_eq!(malloc_tunables("", true, 2, (true, false)), Some(format!("glibc.malloc.hugetlb=1:{keep}")));
        assert_eq!(malloc_tunables("", true, 2, (true, true)).as_deref(), Some("glibc.malloc.hugetlb=1"));
        assert_eq!(malloc_tunables("", false, 0, none), None);
        assert_eq!(
            malloc_tunables("glibc.malloc.arena_max=8", true, 2, none),
            Some(format!("glibc.malloc.arena_max=8:glibc.malloc.hugetlb=1:{keep}"))
        );
        // One threshold named: the other is left to glibc's fixed default
        // too (naming one turns off its adjustment of both).
        assert_eq!(
            malloc_tunables("glibc.malloc.trim_threshold=1048576", false, 2, none).as_deref(),
            Some("glibc.malloc.trim_threshold=1048576:glibc.malloc.arena_max=2")
        );
    }

    #[test]
    fn config_files_set_options_and_refuse_unknown_directives() {
        let conf = b"# a comment\nport 7000\nbind 127.0.0.1 ::1\nmaxmemory 256mb\nappendfsync always\n\
                     requirepass \"s3cret pw\"\nsave \"\"\ndatabases 4\nprotected-mode no\n\
                     slowlog-log-slower-than -1\nslowlog-max-len 1024\ntcp-backlog 2048\n";
        let a = parse_config(conf).unwrap();
        assert_eq!(a.port, Some(7000));
        assert_eq!(a.bind, Some(std::net::IpAddr::from([127, 0, 0, 1])));
        assert_eq!(a.maxmemory, Some(256 << 20));
        assert_eq!(a.fsync, Some(bitsled_redis::server::Fsync::Always));
        assert_eq!(a.requirepass, Some(OsString::from("s3cret pw")));
        assert_eq!((a.databases, a.protected_mode.as_deref()), (Some(4), Some("no")));
        assert_eq!((a.slowlog_log_slower_than, a.slowlog_max_len), (Some(-1), Some(1024)));
        assert_eq!(a.tcp_backlog, Some(2048));
        let err = parse_config(b"port 1\ncluster-config-file nodes.conf\n").unwrap_err();
        assert!(format!("{err:#}").contains("line 2: unsupported directive \"cluster-config-file\""), "{err:#}");
        assert_eq!(parse_config(b"cluster-enabled yes\n").unwrap().cluster_enabled.as_deref(), Some("yes"));
        assert!(parse_config(b"cluster-enabled maybe\n").is_err());
        assert!(parse_config(b"port x\n").is_err());
        assert!(parse_config(b"slowlog-max-len -1\n").is_err());
        assert!(parse_config(b"slowlog-max-len 9223372036854775808\n").is_err());
        assert!(parse_config(b"port 1 2\n").is_err());
        assert!(parse_config(b"tcp-backlog -1\n").is_err());
    }

    /// Invariant: `--maxmemory` reaches the database as its budgets.
    #[test]
    fn a_budget_splits_into_caches() {
        let server = bitsled_redis::server::ServerConfig::new().maxmemory(256 << 20);
        let c = server.db_config(Config::new("x"));
        let s = format!("{c:?}");
        assert!(s.contains("cache_bytes: 201326592") && s.contains("dirty_bytes: 33554432"), "{s}");
    }
}
