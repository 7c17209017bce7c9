//! INFO, CONFIG GET and CLIENT INFO/LIST texts, in Redis's formats.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use super::{ClientInfo, Fsync, Shared};
use crate::command::{Fail, Reply, REDIS_VERSION};
use bitsled::glob::glob_match;
use bitsled::Db;

/// INFO sections in the default order (Redis 7's).
const DEFAULT_SECTIONS: &[&str] = &[
    "server",
    "clients",
    "memory",
    "persistence",
    "stats",
    "replication",
    "cpu",
    "modules",
    "errorstats",
    "cluster",
    "keyspace",
];

/// The INFO text for the requested sections (none: the default ones;
/// `all`/`everything`: also commandstats). Unknown sections are left out,
/// and so are the server's sections when there is no server (the CLI).
pub(crate) fn info(db: &Db, shared: Option<&Shared>, args: &[Vec<u8>]) -> Result<String, Fail> {
    let mut wanted: Vec<&str> = Vec::new();
    if args.is_empty() {
        wanted.extend(DEFAULT_SECTIONS);
    }
    for a in args {
        let a = String::from_utf8_lossy(a).to_ascii_lowercase();
        match a.as_str() {
            "default" => wanted.extend(DEFAULT_SECTIONS),
            "all" | "everything" => {
                wanted.extend(DEFAULT_SECTIONS);
                wanted.push("commandstats");
            }
            other => {
                if let Some(s) = DEFAULT_SECTIONS.iter().chain(&["commandstats"]).find(|s| **s == other) {
                    wanted.push(s);
                }
            }
        }
    }
    let mut out = String::new();
    let mut done: Vec<&str> = Vec::new();
    for s in wanted {
        if done.contains(&s) {
            continue;
        }
        done.push(s);
        let Some(text) = section(db, shared, s)? else { continue };
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        out.push_str(&text);
    }
    Ok(out)
}

/// The text of section `name`; `None` for a server section without a
/// server.
fn section(db: &Db, shared: Option<&Shared>, name: &str) -> Result<Option<String>, Fail> {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = match name {
        "memory" => {
            let rss = rss_bytes().unwrap_or(0);
            let m = db.memory_stats();
            let used = m.page_cache_bytes + m.metadata_cache_bytes;
            write!(
                out,
                "# Memory\r\nused_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\n\
                 used_memory_rss_human:{}\r\nused_memory_dataset:{used}\r\nbitsled_page_cache:{}\r\n\
                 bitsled_dirty_pages:{}\r\nbitsled_metadata_cache:{}\r\nmaxmemory:{}\r\nmaxmemory_human:{}\r\n\
                 maxmemory_policy:noeviction\r\nmem_allocator:libc\r\n",
                human(used),
                human(rss),
                m.page_cache_bytes,
                m.dirty_page_bytes,
                m.metadata_cache_bytes,
                m.budget_bytes,
                human(m.budget_bytes),
            )
        }
        "keyspace" => {
            out.push_str("# Keyspace\r\n");
            let now_secs = db.now_ms() / 1000;
            for i in 0..db.databases() {
                let c = db.select(i)?.counts()?;
                if c.keys == 0 {
                    continue;
                }
                // The mean remaining time to live of the keys with one, ms.
                let avg_ttl = c
                    .expire_secs
                    .checked_div(c.expires)
                    .map_or(0, |at| at.saturating_sub(now_secs).saturating_mul(1000));
                let _ = write!(out, "db{i}:keys={},expires={},avg_ttl={avg_ttl}\r\n", c.keys, c.expires);
            }
            Ok(())
        }
        "replication" => write!(
            out,
            "# Replication\r\nrole:master\r\nconnected_slaves:0\r\nmaster_failover_state:no-failover\r\n\
             master_replid:{}\r\nmaster_replid2:{}\r\nmaster_repl_offset:0\r\nsecond_repl_offset:-1\r\n\
             repl_backlog_active:0\r\nrepl_backlog_size:1048576\r\nrepl_backlog_first_byte_offset:0\r\n\
             repl_backlog_histlen:0\r\n",
            "0".repeat(40),
            "0".repeat(40),
        ),
        "cpu" => {
            let (user, sys) = cpu_seconds().unwrap_or((0.0, 0.0));
            write!(
                out,
                "# CPU\r\nused_cpu_sys:{sys:.6}\r\nused_cpu_user:{user:.6}\r\nused_cpu_sys_children:0.000000\r\n\
                 used_cpu_user_children:0.000000\r\n"
            )
        }
        "modules" => write!(out, "# Modules\r\n"),
        "cluster" => write!(out, "# Cluster\r\ncluster_enabled:0\r\n"),
        _ => {
            let Some(shared) = shared else { return Ok(None) };
            server_section(shared, name, &mut out);
            Ok(())
        }
    };
    Ok(Some(out))
}

/// A section only a server has.
fn server_section(shared: &Shared, name: &str, out: &mut String) {
    let st = &shared.stats;
    let cfg = &shared.config;
    let up = shared.started.elapsed().as_secs();
    // Writing to a String cannot fail.
    let _ = match name {
        "server" => write!(
            out,
            "# Server\r\nredis_version:{REDIS_VERSION}\r\nbitsled_version:{}\r\nredis_mode:standalone\r\nos:{} {}\r\n\
             arch_bits:{}\r\nprocess_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{up}\r\nuptime_in_days:{}\r\n\
             executable:{}\r\nconfig_file:\r\n",
            env!("CARGO_PKG_VERSION"),
            std::env::consts::OS,
            std::env::consts::ARCH,
            usize::BITS,
            std::process::id(),
            shared.local_addr.port(),
            up / 86_400,
            std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default(),
        ),
        "clients" => write!(
            out,
            "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:0\r\n",
            shared.clients.lock().len(),
            cfg.max_clients
        ),
        "persistence" => write!(
            out,
            "# Persistence\r\nloading:0\r\naof_enabled:0\r\nfsync_policy:{}\r\nserver_flushes:{}\r\n\
             server_flush_failures:{}\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\n\
             rdb_last_bgsave_status:{}\r\n",
            Fsync::from(shared.db.durability()).name(),
            st.flushes.load(Ordering::Relaxed),
            st.flush_failures.load(Ordering::Relaxed),
            u8::from(shared.saves.running()),
            shared.saves.last_save_secs(),
            if shared.saves.last_ok() { "ok" } else { "err" },
        ),
        "stats" => write!(
            out,
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\ntotal_net_input_bytes:{}\r\n\
             total_net_output_bytes:{}\r\nrejected_connections:{}\r\ntotal_error_replies:{}\r\nauth_failures:{}\r\n",
            st.connections_received.load(Ordering::Relaxed),
            st.commands_processed.load(Ordering::Relaxed),
            st.net_input_bytes.load(Ordering::Relaxed),
            st.net_output_bytes.load(Ordering::Relaxed),
            st.rejected_connections.load(Ordering::Relaxed),
            st.errors.lock().values().sum::<u64>(),
            st.auth_failures.load(Ordering::Relaxed),
        ),
        "errorstats" => {
            out.push_str("# Errorstats\r\n");
            let mut all: Vec<(String, u64)> = st.errors.lock().iter().map(|(k, v)| (k.clone(), *v)).collect();
            all.sort();
            for (code, n) in all {
                let _ = write!(out, "errorstat_{code}:count={n}\r\n");
            }
            Ok(())
        }
        _ => {
            out.push_str("# Commandstats\r\n");
            let mut all: Vec<(&str, crate::command::CommandStat)> =
                st.commands.lock().iter().map(|(k, v)| (*k, *v)).collect();
            all.sort_by(|a, b| a.0.cmp(b.0));
            for (name, c) in all {
                let per = if c.calls == 0 { 0.0 } else { c.usec as f64 / c.calls as f64 };
                let name = name.replace('|', "_");
                let _ = write!(
                    out,
                    "cmdstat_{name}:calls={},usec={},usec_per_call={per:.2},rejected_calls=0,failed_calls={}\r\n",
                    c.calls, c.usec, c.failed
                );
            }
            Ok(())
        }
    };
}

/// User and system CPU seconds of this process, from `/proc/self/stat`
/// (Linux; clock ticks of 1/100 s).
fn cpu_seconds() -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    // utime and stime are fields 14 and 15 of the line: 11 and 12 here.
    Some((ticks(11)? as f64 / 100.0, ticks(12)? as f64 / 100.0))
}

/// Resident memory of this process, from `/proc/self/status` (Linux).
fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= (1u64 << 30) as f64 {
        format!("{:.2}G", b / (1u64 << 30) as f64)
    } else if b >= (1u64 << 20) as f64 {
        format!("{:.2}M", b / (1u64 << 20) as f64)
    } else {
        format!("{:.2}K", b / 1024.0)
    }
}

/// CONFIG GET: the known parameters matching any of the glob patterns, as
/// a flat list of names and values.
pub(crate) fn config_get(shared: &Shared, patterns: &[Vec<u8>]) -> Vec<(Reply, Reply)> {
    let cfg = &shared.config;
    let params: Vec<(&str, String)> = vec![
        ("appendfsync", Fsync::from(shared.db.durability()).name().to_string()),
        ("appendonly", "no".into()),
        ("bind", cfg.bind.to_string()),
        ("databases", shared.db.databases().to_string()),
        ("maxclients", cfg.max_clients.to_string()),
        ("maxmemory", shared.db.memory_stats().budget_bytes.to_string()),
        ("maxmemory-policy", "noeviction".into()),
        ("port", shared.local_addr.port().to_string()),
        ("proto-max-bulk-len", super::resp::MAX_BULK_LEN.to_string()),
        ("protected-mode", if cfg.protected_mode { "yes" } else { "no" }.into()),
        ("save", String::new()),
        ("slowlog-log-slower-than", shared.slowlog.slower_than_usec().to_string()),
        ("slowlog-max-len", shared.slowlog.max_len().to_string()),
        ("timeout", cfg.timeout.map_or(0, |t| t.as_secs()).to_string()),
    ];
    let mut flat = Vec::new();
    for (name, value) in params {
        if patterns.iter().any(|p| glob_match(&p.to_ascii_lowercase(), name.as_bytes())) {
            flat.push((Reply::bulk(name), Reply::bulk(value)));
        }
    }
    flat
}

/// One CLIENT LIST line (with its newline). `multi` is the number of
/// queued commands when the client is in a transaction (known only for
/// the calling client).
pub(crate) fn client_line(c: &ClientInfo, multi: Option<usize>) -> String {
    let name = c.name.lock().clone().unwrap_or_default();
    let idle = c.last_active.lock().elapsed().as_secs();
    format!(
        "id={} addr={} laddr={} name={} age={} idle={idle} flags={} db={} multi={} user=default resp={} cmd={}\n",
        c.id,
        c.addr,
        c.laddr,
        String::from_utf8_lossy(&name),
        c.created.elapsed().as_secs(),
        if multi.is_some() { "x" } else { "N" },
        c.db.load(Ordering::Relaxed),
        multi.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX)),
        c.resp.load(Ordering::Relaxed),
        c.last_cmd.lock(),
    )
}
