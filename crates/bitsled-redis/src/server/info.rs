//! The server's INFO sections, its CONFIG GET parameters and the CLIENT
//! INFO/LIST lines, in Redis's formats. The command layer chooses the
//! sections and adds those of the database (`command::info`).

use std::fmt::Write as _;
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;

use super::{ClientInfo, Fsync, Shared};
use crate::command::{CommandStat, REDIS_VERSION};

/// The text of INFO section `name` if it is one only a server has
/// (server, clients, persistence, stats, errorstats, commandstats).
pub(super) fn section(shared: &Shared, name: &str) -> Option<String> {
    let mut text = String::new();
    let out = &mut text;
    let st = &shared.stats;
    // Writes are refused while the disk is short of space (Redis says
    // `aof_last_write_status:err` while a failing AOF refuses them).
    let short = shared.db.disk_shortage();
    let up = shared.started.elapsed().as_secs();
    // Writing to a String cannot fail.
    let _ = match name {
        "server" => write!(
            out,
            "# Server\r\nredis_version:{REDIS_VERSION}\r\nbitsled_version:{}\r\nredis_mode:standalone\r\nos:{} {}\r\n\
             arch_bits:{}\r\nprocess_id:{}\r\nrun_id:{}\r\ntcp_port:{}\r\nuptime_in_seconds:{up}\r\n\
             uptime_in_days:{}\r\nexecutable:{}\r\nconfig_file:\r\n",
            env!("CARGO_PKG_VERSION"),
            std::env::consts::OS,
            std::env::consts::ARCH,
            usize::BITS,
            std::process::id(),
            run_id(),
            shared.local_addr.port(),
            up / 86_400,
            std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default(),
        ),
        "clients" => write!(
            out,
            "# Clients\r\nconnected_clients:{}\r\nmaxclients:{}\r\nblocked_clients:0\r\ntracking_clients:{}\r\n\
             bitsled_parked_clients:{}\r\nbitsled_client_threads:{}\r\n",
            shared.clients.lock().len(),
            shared.settings.max_clients(),
            shared.tracking.counts()[0],
            shared.parking.count(),
            shared.pool.threads(),
        ),
        "persistence" => write!(
            out,
            "# Persistence\r\nloading:0\r\naof_enabled:0\r\nfsync_policy:{}\r\nserver_flushes:{}\r\n\
             server_flush_failures:{}\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\n\
             rdb_last_bgsave_status:{}\r\nrdb_changes_since_last_save:{}\r\naof_last_write_status:{}\r\n\
             disk_reserve_bytes:{}\r\ndisk_short_of_space:{}\r\ndisk_short_since:{}\r\n",
            Fsync::from(shared.db.durability()).name(),
            st.flushes.load(Ordering::Relaxed),
            st.flush_failures.load(Ordering::Relaxed),
            u8::from(shared.saves.running()),
            shared.saves.last_save_secs(),
            if shared.saves.last_ok() { "ok" } else { "err" },
            shared.saves.changes_since(shared.db.changes()),
            if short.is_some() { "err" } else { "ok" },
            shared.db.disk_reserve(),
            u8::from(short.is_some()),
            short.map_or(0, |s| s.since_ms / 1000),
        ),
        "stats" => {
            let pubsub = shared.pubsub.counts();
            let tracking = shared.tracking.counts();
            write!(
            out,
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\ntotal_net_input_bytes:{}\r\n\
             total_net_output_bytes:{}\r\nrejected_connections:{}\r\ntotal_error_replies:{}\r\nauth_failures:{auth}\r\n\
             acl_access_denied_auth:{auth}\r\nexpired_keys:{}\r\npubsub_channels:{}\r\npubsub_patterns:{}\r\n\
             pubsubshard_channels:{}\r\ntracking_total_keys:{}\r\ntracking_total_items:{}\r\n\
             tracking_total_prefixes:{}\r\n",
            st.connections_received.load(Ordering::Relaxed),
            st.commands_processed.load(Ordering::Relaxed),
            st.net_input_bytes.load(Ordering::Relaxed),
            st.net_output_bytes.load(Ordering::Relaxed),
            st.rejected_connections.load(Ordering::Relaxed),
            st.errors.lock().values().sum::<u64>(),
            shared.db.expired_keys(),
            pubsub[0],
            pubsub[1],
            pubsub[2],
            tracking[1],
            tracking[2],
            tracking[3],
            auth = st.auth_failures.load(Ordering::Relaxed),
            )
        }
        "errorstats" => {
            out.push_str("# Errorstats\r\n");
            let mut all: Vec<(String, u64)> = st.errors.lock().iter().map(|(k, v)| (k.clone(), *v)).collect();
            all.sort();
            for (code, n) in all {
                let _ = write!(out, "errorstat_{code}:count={n}\r\n");
            }
            Ok(())
        }
        "commandstats" => {
            out.push_str("# Commandstats\r\n");
            let mut all: Vec<(&str, CommandStat)> = st.commands.lock().iter().map(|(k, v)| (*k, *v)).collect();
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
        _ => return None,
    };
    Some(text)
}

/// CONFIG GET: every parameter the server reports, with its value (the
/// command layer picks those matching the patterns).
pub(super) fn config(shared: &Shared) -> Vec<(&'static str, String)> {
    let cfg = &shared.config;
    vec![
        ("appendfsync", Fsync::from(shared.db.durability()).name().to_string()),
        ("appendonly", "no".into()),
        ("bind", cfg.bind.to_string()),
        ("databases", shared.db.databases().to_string()),
        ("maxclients", shared.settings.max_clients().to_string()),
        ("maxmemory", shared.settings.maxmemory().to_string()),
        ("maxmemory-policy", shared.settings.policy().into()),
        ("notify-keyspace-events", crate::command::format_keyspace_events(shared.settings.keyspace_events())),
        ("port", shared.local_addr.port().to_string()),
        ("proto-max-bulk-len", super::resp::MAX_BULK_LEN.to_string()),
        ("protected-mode", if cfg.protected_mode { "yes" } else { "no" }.into()),
        ("save", String::new()),
        ("slowlog-log-slower-than", shared.slowlog.slower_than_usec().to_string()),
        ("slowlog-max-len", shared.slowlog.max_len().to_string()),
        ("tcp-backlog", cfg.tcp_backlog.to_string()),
        ("timeout", shared.settings.timeout().map_or(0, |t| t.as_secs()).to_string()),
        ("tracking-table-max-keys", shared.tracking.max_keys().to_string()),
    ]
}

/// One CLIENT LIST line (with its newline). `multi` is the number of
/// queued commands when the client is in a transaction and `cmd` the
/// command it runs (both known only for the calling client; another's
/// `cmd` is the last it published).
pub(super) fn client_line(c: &ClientInfo, multi: Option<usize>, cmd: Option<&str>) -> String {
    let name = c.name.lock().clone().unwrap_or_default();
    let idle = c.last_active.lock().elapsed().as_secs();
    let b = &c.buffers;
    let get = |a: &std::sync::atomic::AtomicUsize| a.load(Ordering::Relaxed);
    format!(
        "id={} addr={} laddr={} fd={} name={} age={} idle={idle} flags={} db={} sub={} psub={} ssub={} multi={} \
         qbuf={} qbuf-free={} argv-mem={} multi-mem={} rbs={} rbp={} obl={} oll=0 omem={} tot-mem={} events=r \
         cmd={} user=default redir=-1 resp={}\n",
        c.id,
        c.addr,
        c.laddr,
        c.stream.as_raw_fd(),
        String::from_utf8_lossy(&name),
        c.created.elapsed().as_secs(),
        match (multi.is_some(), c.subscribed()) {
            (true, true) => "xP",
            (true, false) => "x",
            (false, true) => "P",
            (false, false) => "N",
        },
        c.db.load(Ordering::Relaxed),
        get(&c.subs[0]),
        get(&c.subs[1]),
        get(&c.subs[2]),
        multi.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX)),
        get(&b.qbuf),
        get(&b.qbuf_free),
        get(&b.argv_mem),
        get(&b.multi_mem),
        get(&b.rbs),
        get(&b.obl),
        get(&b.obl),
        get(&b.obl),
        get(&b.tot_mem),
        cmd.unwrap_or(*c.last_cmd.lock()),
        c.resp.load(Ordering::Relaxed),
    )
}

/// Redis's `run_id`: 40 hexadecimal characters, new for each process
/// (Sentinel tells instances apart by it).
fn run_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(crate::replication::new_replid)
}
