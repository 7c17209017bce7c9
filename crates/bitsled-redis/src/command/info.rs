//! INFO: the choice of sections, and the sections that describe the
//! database and the process (memory, keyspace, replication, cpu, modules,
//! cluster). The server's own sections (server, clients, persistence,
//! stats, errorstats, commandstats) come from the session's [`Host`];
//! without one (the CLI) they are left out.

use std::fmt::Write as _;

use super::host::Host;
use super::{CmdResult, Fail, Reply};
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
/// `all`/`everything`: also commandstats; `allocator` only when named, as
/// its figures walk the heap under the allocator's locks: milliseconds on
/// a large heap). Unknown sections are left out,
/// and so are the server's sections when there is no server (the CLI).
pub(crate) fn info(db: &Db, host: Option<&dyn Host>, args: &[Vec<u8>]) -> Result<String, Fail> {
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
                if let Some(s) = DEFAULT_SECTIONS.iter().chain(&["commandstats", "allocator"]).find(|s| **s == other) {
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
        let Some(text) = section(db, host, s)? else { continue };
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        out.push_str(&text);
    }
    Ok(out)
}

/// The memory the server accounts for (INFO `used_memory`, and what
/// `maxmemory` limits): the database's cached pages and metadata, and the
/// clients' buffers. sled's own memory is not in it (see `used_memory_rss`).
pub(crate) fn used_memory(m: &bitsled::MemoryStats, clients_bytes: u64) -> u64 {
    m.page_cache_bytes + m.metadata_cache_bytes + clients_bytes
}

/// Redis's `allocator_*` fields from glibc's figures: bytes allocated,
/// bytes the heap holds from the system, and the free bytes between (what
/// the allocator keeps, not the process uses). Empty where unknown.
fn allocator_fields() -> String {
    let Some(h) = bitsled::heap_stats() else { return String::new() };
    let free = h.held.saturating_sub(h.allocated);
    let ratio = if h.allocated == 0 { 1.0 } else { h.held as f64 / h.allocated as f64 };
    format!(
        "allocator_allocated:{}\r\nallocator_active:{}\r\nallocator_frag_bytes:{free}\r\nallocator_frag_ratio:{ratio:.2}\r\n\
         bitsled_heap_trims:{}\r\nbitsled_heap_trim_ms:{}\r\n",
        h.allocated,
        h.held,
        h.trims,
        h.trim_micros / 1000
    )
}

/// The text of section `name`; `None` for a server section without a
/// server.
fn section(db: &Db, host: Option<&dyn Host>, name: &str) -> Result<Option<String>, Fail> {
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = match name {
        "memory" => {
            let rss = bitsled::resident_bytes().unwrap_or(0);
            let m = db.memory_stats();
            let server = host.map(Host::memory).unwrap_or_default();
            let used = used_memory(&m, server.clients_bytes);
            write!(
                out,
                "# Memory\r\nused_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\n\
                 used_memory_rss_human:{}\r\nused_memory_dataset:{used}\r\nbitsled_page_cache:{}\r\n\
                 bitsled_dirty_pages:{}\r\nbitsled_metadata_cache:{}\r\nbitsled_clients:{}\r\n\
                 bitsled_budget:{}\r\nmaxmemory:{}\r\nmaxmemory_human:{}\r\n\
                 maxmemory_policy:{}\r\nmem_allocator:libc\r\n",
                human(used),
                human(rss),
                m.page_cache_bytes,
                m.dirty_page_bytes,
                m.metadata_cache_bytes,
                server.clients_bytes,
                m.budget_bytes,
                server.maxmemory,
                human(server.maxmemory),
                server.policy,
            )
        }
        "allocator" => {
            out.push_str("# Allocator\r\n");
            out.push_str(&allocator_fields());
            Ok(())
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
        "replication" if host.is_some() => {
            out.push_str(&host.map(|h| h.replication().info()).unwrap_or_default());
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
        "cluster" => {
            let enabled = u8::from(host.is_some_and(|h| h.cluster().is_some()));
            write!(out, "# Cluster\r\ncluster_enabled:{enabled}\r\n")
        }
        _ => return Ok(host.and_then(|h| h.info_section(name))),
    };
    Ok(Some(out))
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

/// `bytes` as Redis's `*_human` fields write it (K, M, G).
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

/// `MEMORY STATS`: Redis 7.0's fields, in its order, from what bitsled
/// accounts (INFO memory): `total.allocated` is `used_memory` (caches and
/// clients), `dataset.bytes` the page cache, `overhead.total` the metadata
/// cache and the clients, each `db.N`'s `overhead.hashtable.main` its share
/// of the metadata cache by key count. bitsled keeps no peak
/// (`peak.allocated` is the current figure) and has no allocator
/// statistics (the allocator fields are 0, the RSS fields the process's).
/// Ratios are bulk strings, as Redis's doubles read in RESP2.
pub(crate) fn memory_stats(s: &mut super::Session, _a: &[Vec<u8>]) -> CmdResult {
    let db = &s.db;
    let m = db.memory_stats();
    let server = s.host.as_deref().map(Host::memory).unwrap_or_default();
    let used = used_memory(&m, server.clients_bytes);
    let rss = bitsled::resident_bytes().unwrap_or(0);
    let mut dbs = Vec::new();
    let mut keys = 0u64;
    for i in 0..db.databases() {
        let c = db.select(i)?.counts()?;
        if c.keys > 0 {
            keys += c.keys;
            dbs.push((i, c.keys));
        }
    }
    let int = |n: u64| Reply::Integer(i64::try_from(n).unwrap_or(i64::MAX));
    let ratio = |a: u64, b: u64| Reply::bulk(if b == 0 { "0".to_string() } else { format!("{}", a as f64 / b as f64) });
    let percent =
        |a: u64, b: u64| Reply::bulk(if b == 0 { "0".to_string() } else { format!("{}", a as f64 * 100.0 / b as f64) });
    let overhead = m.metadata_cache_bytes + server.clients_bytes;
    let mut out: Vec<(Reply, Reply)> = vec![
        (Reply::bulk("peak.allocated"), int(used)),
        (Reply::bulk("total.allocated"), int(used)),
        (Reply::bulk("startup.allocated"), int(0)),
        (Reply::bulk("replication.backlog"), int(0)),
        (Reply::bulk("clients.slaves"), int(0)),
        (Reply::bulk("clients.normal"), int(server.clients_bytes)),
        (Reply::bulk("cluster.links"), int(0)),
        (Reply::bulk("aof.buffer"), int(0)),
        (Reply::bulk("lua.caches"), int(0)),
        (Reply::bulk("functions.caches"), int(0)),
    ];
    for (i, n) in dbs {
        let share = m.metadata_cache_bytes.saturating_mul(n) / keys.max(1);
        out.push((
            Reply::bulk(format!("db.{i}")),
            Reply::Map(vec![
                (Reply::bulk("overhead.hashtable.main"), int(share)),
                (Reply::bulk("overhead.hashtable.expires"), int(0)),
                (Reply::bulk("overhead.hashtable.slot-to-keys"), int(0)),
            ]),
        ));
    }
    out.extend([
        (Reply::bulk("overhead.total"), int(overhead)),
        (Reply::bulk("keys.count"), int(keys)),
        (Reply::bulk("keys.bytes-per-key"), int(used.checked_div(keys).unwrap_or(0))),
        (Reply::bulk("dataset.bytes"), int(m.page_cache_bytes)),
        (Reply::bulk("dataset.percentage"), percent(m.page_cache_bytes, used)),
        (Reply::bulk("peak.percentage"), percent(used, used)),
        (Reply::bulk("allocator.allocated"), int(0)),
        (Reply::bulk("allocator.active"), int(0)),
        (Reply::bulk("allocator.resident"), int(0)),
        (Reply::bulk("allocator-fragmentation.ratio"), ratio(0, 0)),
        (Reply::bulk("allocator-fragmentation.bytes"), int(0)),
        (Reply::bulk("allocator-rss.ratio"), ratio(0, 0)),
        (Reply::bulk("allocator-rss.bytes"), int(0)),
        (Reply::bulk("rss-overhead.ratio"), ratio(rss, used)),
        (
            Reply::bulk("rss-overhead.bytes"),
            Reply::Integer(i64::try_from(rss).unwrap_or(0) - i64::try_from(used).unwrap_or(0)),
        ),
        (Reply::bulk("fragmentation"), ratio(rss, used)),
        (
            Reply::bulk("fragmentation.bytes"),
            Reply::Integer(i64::try_from(rss).unwrap_or(0) - i64::try_from(used).unwrap_or(0)),
        ),
    ]);
    Ok(Reply::Map(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invariant: the allocator's figures (which walk the heap under its
    /// locks) come only with `INFO allocator`, never with the default
    /// sections or `all`; where glibc says, the section names them.
    #[test]
    fn the_allocator_section_comes_only_when_named() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path()).unwrap();
        for args in [vec![], vec![b"all".to_vec()], vec![b"memory".to_vec()]] {
            let text = info(&db, None, &args).unwrap();
            assert!(!text.contains("allocator_allocated"), "{args:?}: {text}");
        }
        let text = info(&db, None, &[b"allocator".to_vec()]).unwrap();
        assert!(text.starts_with("# Allocator\r\n"), "{text}");
        if bitsled::heap_stats().is_some() {
            for field in ["allocator_allocated:", "allocator_active:", "allocator_frag_bytes:", "bitsled_heap_trims:"] {
                assert!(text.contains(field), "{field} missing: {text}");
            }
        }
    }
}
