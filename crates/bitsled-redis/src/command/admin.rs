//! Server commands: CLIENT (ID, GETNAME, SETNAME, SETINFO, INFO, LIST,
//! KILL), INFO, CONFIG, SLOWLOG, ROLE, SAVE, BGSAVE,
//! LASTSAVE, SHUTDOWN. They describe or change
//! the server behind the session, through its [`Host`]; outside a server
//! (the CLI) INFO describes the database alone and the others answer an
//! error.

use std::sync::Arc;

use bitsled::glob::glob_match;

use super::host::{Bgsave, ClientAddr, Host, SaveFailed, Setting};
use super::session::{Close, Session};
use super::{args, CmdResult, Fail, Reply};

/// The server behind `s`, or the error for a command that needs one.
pub(super) fn server(s: &Session) -> Result<&Arc<dyn Host>, Fail> {
    s.host.as_ref().ok_or_else(|| Fail::new("ERR this command needs a connection to `bitsled serve`"))
}

fn help(lines: &[&str]) -> CmdResult {
    Ok(Reply::Array(lines.iter().map(|l| Reply::Status((*l).into())).collect()))
}

/// `CLIENT ID`.
pub(crate) fn client_id(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Integer(i64::try_from(server(s)?.client_id()).unwrap_or(i64::MAX)))
}

/// `CLIENT GETNAME`.
pub(crate) fn client_getname(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    server(s)?;
    Ok(Reply::Bulk(s.name.clone()))
}

/// `CLIENT SETNAME name`.
pub(crate) fn client_setname(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    server(s)?;
    s.set_name(a[2].clone())?;
    Ok(Reply::ok())
}

/// `CLIENT SETINFO attr value` (what client libraries send on connect):
/// accepted and ignored.
pub(crate) fn client_setinfo(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    server(s)?;
    Ok(Reply::ok())
}

/// `CLIENT INFO`: this client's line.
pub(crate) fn client_info(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    let line = server(s)?.client_info(s.multi.as_ref().map(|m| m.queue.len()), s.last_cmd);
    Ok(Reply::bulk(line))
}

/// `CLIENT LIST`: every client's line, by id.
pub(crate) fn client_list(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    let host = server(s)?;
    if a.len() > 2 {
        return Err(Fail::new(super::args::ERR_SYNTAX));
    }
    Ok(Reply::bulk(host.client_list(s.multi.as_ref().map(|m| m.queue.len()), s.last_cmd)))
}

/// `CLIENT KILL addr` (Redis's old form: `OK`, or an error if no client
/// has that address; it may name the caller) or `CLIENT KILL filter value
/// ...` with filters ID, TYPE, ADDR, LADDR, USER and SKIPME (the number of
/// clients closed; the caller only with `SKIPME no`). A client closed is
/// cut off at once; the caller gets its reply first.
pub(crate) fn client_kill(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    let host = server(s)?;
    let old_form = a.len() == 3;
    let (mut id, mut addr, mut laddr, mut skipme) = (None, None, None, !old_form);
    // The TYPE asked for: `normal` or `pubsub` (a client subscribed to
    // anything), or one no client here has (a replica or master).
    let mut kind: Option<Option<bool>> = None;
    if old_form {
        addr = Some(a[2].as_slice());
    } else {
        for pair in a[2..].chunks(2) {
            let [opt, value] = pair else { return Err(Fail::new(args::ERR_SYNTAX)) };
            if args::is(opt, "id") {
                let n = args::parse_i64(value).filter(|&n| n >= 1);
                id = Some(n.ok_or_else(|| Fail::new("ERR client-id should be greater than 0"))?.unsigned_abs());
            } else if args::is(opt, "type") {
                let known = ["normal", "master", "slave", "replica", "pubsub"];
                if !known.iter().any(|t| args::is(value, t)) {
                    let mut text = b"ERR Unknown client type '".to_vec();
                    text.extend_from_slice(super::c_str(value, usize::MAX));
                    text.push(b'\'');
                    return Err(Fail(text));
                }
                kind = Some(if args::is(value, "normal") {
                    Some(false)
                } else if args::is(value, "pubsub") {
                    Some(true)
                } else {
                    None
                });
            } else if args::is(opt, "addr") {
                addr = Some(value.as_slice());
            } else if args::is(opt, "laddr") {
                laddr = Some(value.as_slice());
            } else if args::is(opt, "user") {
                // The one user is `default`.
                if value.as_slice() != b"default" {
                    let mut text = b"ERR No such user '".to_vec();
                    text.extend_from_slice(super::c_str(value, usize::MAX));
                    text.push(b'\'');
                    return Err(Fail(text));
                }
            } else if args::is(opt, "skipme") && (args::is(value, "yes") || args::is(value, "no")) {
                skipme = args::is(value, "yes");
            } else {
                return Err(Fail::new(args::ERR_SYNTAX));
            }
        }
    }
    let me = host.client_id();
    let matching = host.kill_clients(&|c: &ClientAddr| {
        addr.is_none_or(|x| c.addr.to_string().as_bytes() == x)
            && laddr.is_none_or(|x| c.laddr.to_string().as_bytes() == x)
            && id.is_none_or(|x| c.id == x)
            && kind.is_none_or(|k| k == Some(c.pubsub))
            && !(skipme && c.id == me)
    });
    if matching.contains(&me) {
        s.close = Some(Close::AfterReply);
    }
    match (old_form, matching.len()) {
        (true, 0) => Err(Fail::new("ERR No such client")),
        (true, _) => Ok(Reply::ok()),
        (false, n) => Ok(Reply::Integer(i64::try_from(n).unwrap_or(i64::MAX))),
    }
}

/// `CLIENT HELP`.
pub(crate) fn client_help(_s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    help(&[
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GETNAME",
        "    Return the name of the current connection.",
        "ID",
        "    Return the ID of the current connection.",
        "INFO",
        "    Return information about the current client connection.",
        "KILL <ip:port>",
        "    Kill connection made from <ip:port>.",
        "KILL <option> <value> [<option> <value> [...]]",
        "    Kill connections. Options are:",
        "    * ADDR <ip:port>",
        "      Kill connections made from the specified address",
        "    * LADDR <ip:port>",
        "      Kill connections made to specified local address",
        "    * ID <client-id>",
        "      Kill connections by client id.",
        "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
        "      Kill connections by type.",
        "    * USER <username>",
        "      Kill connections authenticated by <username>.",
        "    * SKIPME (YES|NO)",
        "      Skip killing current connection (default: yes).",
        "LIST",
        "    Return information about client connections.",
        "SETNAME <name>",
        "    Assign the name <name> to the current connection.",
        "HELP",
        "    Print this help.",
    ])
}

/// `INFO [section...]`.
pub(crate) fn info(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::bulk(super::info::info(&s.db, s.host.as_deref(), &a[1..])?))
}

/// `CONFIG GET pattern...`: the known parameters matching any pattern.
pub(crate) fn config_get(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    let patterns: Vec<Vec<u8>> = a[2..].iter().map(|p| p.to_ascii_lowercase()).collect();
    let params = server(s)?.config().into_iter();
    let matching = params.filter(|(name, _)| patterns.iter().any(|p| glob_match(p, name.as_bytes())));
    Ok(Reply::Map(matching.map(|(name, value)| (Reply::bulk(name), Reply::bulk(value))).collect()))
}

/// What a `CONFIG SET` value must be.
enum Kind {
    /// An integer in `min..=max`.
    Int(i64, i64),
    /// A memory size (`256mb`, `1gb`, bytes).
    Memory,
    /// One of these names (any case; stored in lower case).
    OneOf(&'static [&'static str]),
    /// Event class letters (`notify-keyspace-events`).
    Events,
    /// Cannot change while the server runs: Redis's immutable settings.
    Immutable,
    /// Redis can change it, bitsled cannot; the text says why.
    Fixed(&'static str),
}

/// Every parameter `CONFIG GET` lists, and what `CONFIG SET` does with it.
const PARAMETERS: &[(&str, Kind)] = &[
    ("appendfsync", Kind::OneOf(&["everysec", "always", "no"])),
    ("appendonly", Kind::Fixed("bitsled has no append-only file: its store is written continuously (see appendfsync)")),
    ("bind", Kind::Fixed("the listening address is set when the server starts")),
    ("databases", Kind::Immutable),
    ("maxclients", Kind::Int(1, u32::MAX as i64)),
    ("maxmemory", Kind::Memory),
    ("maxmemory-policy", Kind::OneOf(super::values::POLICIES)),
    ("notify-keyspace-events", Kind::Events),
    ("port", Kind::Fixed("the listening port is set when the server starts")),
    ("proto-max-bulk-len", Kind::Fixed("the request size limit is fixed at 512mb")),
    ("protected-mode", Kind::Fixed("protected mode is checked when the server binds its address")),
    ("save", Kind::Fixed("bitsled takes no snapshots: its store is written continuously (see appendfsync)")),
    ("slowlog-log-slower-than", Kind::Int(-1, i64::MAX)),
    ("slowlog-max-len", Kind::Int(0, i64::MAX)),
    ("tcp-backlog", Kind::Immutable),
    ("timeout", Kind::Int(0, i32::MAX as i64)),
    ("tracking-table-max-keys", Kind::Int(0, i64::MAX)),
];

/// `CONFIG SET parameter value [parameter value ...]`. All pairs are
/// checked before any is applied, so a bad value changes nothing. Errors
/// come in Redis's order: an odd argument count; then, left to right, the
/// first parameter that is unknown, cannot change, or is given twice; then
/// the first value out of its kind or range.
pub(crate) fn config_set(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    let host = server(s)?;
    if a.len() % 2 == 1 {
        return Err(Fail::new("ERR syntax error"));
    }
    let pairs: Vec<(&[u8], &[u8])> = a[2..].chunks_exact(2).map(|p| (p[0].as_slice(), p[1].as_slice())).collect();
    let failed = |name: &str, why: &str| {
        Fail(format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {why}").into_bytes())
    };
    let mut known: Vec<usize> = Vec::with_capacity(pairs.len());
    for (name, _) in &pairs {
        let Some(k) = PARAMETERS.iter().position(|(n, _)| name.eq_ignore_ascii_case(n.as_bytes())) else {
            let mut text = b"ERR Unknown option or number of arguments for CONFIG SET - '".to_vec();
            text.extend_from_slice(name);
            text.push(b'\'');
            return Err(Fail(text));
        };
        let (canonical, kind) = &PARAMETERS[k];
        match kind {
            Kind::Immutable => return Err(failed(canonical, "can't set immutable config")),
            Kind::Fixed(why) => return Err(failed(canonical, why)),
            _ => {}
        }
        if known.contains(&k) {
            return Err(failed(canonical, "duplicate parameter"));
        }
        known.push(k);
    }
    let mut values = Vec::with_capacity(pairs.len());
    for (&k, (_, value)) in known.iter().zip(&pairs) {
        let (name, kind) = &PARAMETERS[k];
        let setting = match kind {
            Kind::Int(least, most) => {
                let v = args::parse_i64(value)
                    .ok_or_else(|| failed(name, "argument couldn't be parsed into an integer"))?;
                if v < *least || v > *most {
                    return Err(failed(name, &format!("argument must be between {least} and {most} inclusive")));
                }
                Setting::Int(v)
            }
            Kind::Memory => {
                let text = std::str::from_utf8(value).ok().filter(|t| !t.starts_with('-'));
                let bytes = text
                    .and_then(|t| super::values::parse_memory(t).ok())
                    .ok_or_else(|| failed(name, "argument must be a memory value"))?;
                Setting::Bytes(bytes)
            }
            Kind::OneOf(names) => {
                let Some(&n) = names.iter().find(|n| value.eq_ignore_ascii_case(n.as_bytes())) else {
                    return Err(failed(
                        name,
                        &format!("argument(s) must be one of the following: {}", names.join(", ")),
                    ));
                };
                Setting::Name(n)
            }
            Kind::Events => Setting::Events(
                super::notify::parse_flags(value)
                    .ok_or_else(|| failed(name, "Invalid event class character. Use 'Ag$lshzxeKEtmdn'."))?,
            ),
            Kind::Immutable | Kind::Fixed(_) => continue,
        };
        values.push((*name, setting));
    }
    for (name, setting) in values {
        host.set_config(name, setting).map_err(|why| failed(name, &why))?;
    }
    Ok(Reply::ok())
}

/// `SLOWLOG GET [count]`: the newest `count` entries (10 by default, all
/// for -1).
pub(crate) fn slowlog_get(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    let host = server(s)?;
    if a.len() > 3 {
        let mut text = b"ERR unknown subcommand or wrong number of arguments for '".to_vec();
        text.extend_from_slice(super::c_str(&a[1], 128));
        text.extend_from_slice(b"'. Try SLOWLOG HELP.");
        return Err(Fail(text));
    }
    let count = match a.get(2) {
        None => Some(10),
        Some(c) => match args::parse_i64(c) {
            Some(-1) => None,
            Some(n) if n >= 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            _ => return Err(Fail::new("ERR count should be greater than or equal to -1")),
        },
    };
    Ok(host.slowlog_get(count))
}

/// `SLOWLOG LEN`.
pub(crate) fn slowlog_len(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Integer(i64::try_from(server(s)?.slowlog_len()).unwrap_or(i64::MAX)))
}

/// `SLOWLOG RESET`.
pub(crate) fn slowlog_reset(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    server(s)?.slowlog_reset();
    Ok(Reply::ok())
}

/// `SLOWLOG HELP`.
pub(crate) fn slowlog_help(_s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    help(&[
        "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET [<count>]",
        "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
        "    Entries are made of:",
        "    id, timestamp, time in microseconds, arguments array, client IP and port,",
        "    client name",
        "LEN",
        "    Return the length of the slowlog.",
        "RESET",
        "    Reset the slowlog.",
        "HELP",
        "    Prints this help.",
    ])
}

/// `SAVE`: makes everything written so far durable before replying.
pub(crate) fn save(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    match server(s)?.save() {
        Ok(()) => Ok(Reply::ok()),
        Err(SaveFailed::Busy) => Err(Fail::new("ERR Background save already in progress")),
        Err(SaveFailed::Flush(e)) => Err(Fail(format!("ERR flush failed: {e}").into_bytes())),
    }
}

/// `BGSAVE [SCHEDULE]`: the same on a thread of its own.
pub(crate) fn bgsave(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    let host = server(s)?;
    let schedule = match &a[1..] {
        [] => false,
        [opt] if args::is(opt, "schedule") => true,
        _ => return Err(Fail::new(args::ERR_SYNTAX)),
    };
    match host.bgsave(schedule) {
        Ok(Bgsave::Started) => Ok(Reply::Status("Background saving started".into())),
        Ok(Bgsave::Scheduled) => Ok(Reply::Status("Background saving scheduled".into())),
        Ok(Bgsave::Busy) => Err(Fail::new("ERR Background save already in progress")),
        Err(e) => Err(Fail(format!("ERR Can't start a background save: {e}").into_bytes())),
    }
}

/// `LASTSAVE`: the Unix time of the last successful SAVE or BGSAVE (the
/// server's start before any).
pub(crate) fn lastsave(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Integer(i64::try_from(server(s)?.last_save_secs()).unwrap_or(i64::MAX)))
}

/// `CONFIG RESETSTAT`.
pub(crate) fn config_resetstat(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    server(s)?.reset_stats();
    // Counters this session has not yet handed to the server.
    s.stats.clear();
    s.errors.clear();
    Ok(Reply::ok())
}

/// `CONFIG REWRITE`.
pub(crate) fn config_rewrite(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    server(s)?;
    Err(Fail::new("ERR The server is running without a config file"))
}

/// `CONFIG HELP`.
pub(crate) fn config_help(_s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    help(&[
        "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET <pattern>",
        "    Return parameters matching the glob-like <pattern> and their values.",
        "SET <directive> <value>",
        "    Set the configuration <directive> to <value>.",
        "RESETSTAT",
        "    Reset statistics reported by the INFO command.",
        "REWRITE",
        "    Rewrite the configuration file.",
        "HELP",
        "    Print this help.",
    ])
}

/// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]`: makes everything
/// acknowledged durable (whatever the option: there is no separate
/// snapshot to skip), stops the server and closes the connection without a
/// reply, as Redis does.
pub(crate) fn shutdown(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    let host = server(s)?;
    for opt in &a[1..] {
        let opt = opt.to_ascii_lowercase();
        if opt == b"abort" {
            return Err(Fail::new("ERR No shutdown in progress."));
        }
        if !matches!(opt.as_slice(), b"nosave" | b"save" | b"now" | b"force") {
            return Err(Fail::new(super::args::ERR_SYNTAX));
        }
    }
    if host.shutdown().is_err() {
        return Err(Fail::new("ERR Errors trying to SHUTDOWN. Check logs."));
    }
    s.close = Some(Close::Silently);
    Ok(Reply::ok())
}
