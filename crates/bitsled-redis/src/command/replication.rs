//! Replication commands: REPLICAOF (and SLAVEOF), ROLE, WAIT, and what a
//! replica sends its master (REPLCONF, PSYNC; SYNC is refused). The state
//! and the streams are in `crate::replication`.

use std::time::Duration;

use super::admin::server;
use super::args::{int, is, ERR_INT, ERR_SYNTAX};
use super::{CmdResult, Fail, Reply, Session};
use crate::replication::Role;

/// Why a Redis replica's PSYNC or SYNC is refused.
const NOT_BITSLED: &str = "ERR bitsled replicates to bitsled replicas only (a replica announces itself with \
                           REPLCONF capa bitsled)";

/// `REPLICAOF host port`, `REPLICAOF NO ONE` (and `SLAVEOF`).
pub(crate) fn replicaof(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    let host = server(s)?;
    if host.cluster().is_some() {
        return Err(Fail::new("ERR REPLICAOF not allowed in cluster mode."));
    }
    let repl = host.replication();
    if is(&a[1], "no") && is(&a[2], "one") {
        repl.promote().map_err(|e| Fail(e.into_bytes()))?;
        return Ok(Reply::ok());
    }
    let port = int(&a[2]).ok().and_then(|p| u16::try_from(p).ok()).ok_or_else(|| Fail::new(ERR_INT))?;
    let name = String::from_utf8_lossy(&a[1]).into_owned();
    let status = repl.replicaof(&name, port).map_err(|e| Fail(e.into_bytes()))?;
    Ok(Reply::Status(status.into()))
}

/// `ROLE`.
pub(crate) fn role(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    let int64 = |n: u64| Reply::Integer(i64::try_from(n).unwrap_or(i64::MAX));
    Ok(match server(s)?.replication().role() {
        Role::Master(offset, replicas) => Reply::Array(vec![
            Reply::bulk("master"),
            int64(offset),
            Reply::Array(
                replicas
                    .into_iter()
                    .map(|(ip, port, ack)| {
                        Reply::Array(vec![Reply::bulk(ip), Reply::bulk(port.to_string()), Reply::bulk(ack.to_string())])
                    })
                    .collect(),
            ),
        ]),
        Role::Replica(master, port, state, offset) => Reply::Array(vec![
            Reply::bulk("slave"),
            Reply::bulk(master),
            Reply::Integer(i64::from(port)),
            Reply::bulk(state),
            int64(offset),
        ]),
    })
}

/// `WAIT numreplicas timeout`: how many replicas hold every write made
/// before it (waiting up to `timeout` ms for `numreplicas`; 0: forever).
pub(crate) fn wait(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    let n = int(&a[1])?;
    let timeout = int(&a[2])?;
    if timeout < 0 {
        return Err(Fail::new("ERR timeout is negative"));
    }
    let repl = std::sync::Arc::clone(server(s)?.replication());
    // Inside EXEC there is no waiting (as in Redis): EXEC holds every
    // other client off meanwhile.
    let timeout = if s.executing {
        Some(Duration::ZERO)
    } else if timeout == 0 {
        None
    } else {
        Some(Duration::from_millis(timeout.unsigned_abs()))
    };
    let n = usize::try_from(n.max(0)).unwrap_or(usize::MAX);
    // The writes made so far go into the feed, and are durable here.
    if !repl.is_replica() && s.db.feed().is_some() {
        s.db.flush().map_err(|e| Fail(super::error_text(&e).into_bytes()))?;
    }
    let count = repl.wait(n, timeout).map_err(|e| Fail(e.into_bytes()))?;
    Ok(Reply::Integer(i64::try_from(count).unwrap_or(i64::MAX)))
}

/// `REPLCONF option value [option value ...]`: `listening-port`,
/// `ip-address` and `capa` from a replica before PSYNC; `ACK offset` (no
/// reply); `GETACK` (answered by nothing: a bitsled replica acknowledges
/// on its own).
pub(crate) fn replconf(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    if a.len() % 2 == 0 {
        return Err(Fail::new(ERR_SYNTAX));
    }
    let host = std::sync::Arc::clone(server(s)?);
    for pair in a[1..].chunks(2) {
        let (option, value) = (&pair[0], &pair[1]);
        if is(option, "ack") {
            let offset = int(value).ok().and_then(|o| u64::try_from(o).ok()).ok_or_else(|| Fail::new(ERR_INT))?;
            host.replication().ack(host.client_id(), offset);
            return Ok(Reply::Several(Vec::new()));
        } else if is(option, "getack") {
            return Ok(Reply::Several(Vec::new()));
        } else if is(option, "listening-port") {
            s.replconf.0 = Some(int(value).ok().and_then(|p| u16::try_from(p).ok()).ok_or_else(|| Fail::new(ERR_INT))?);
        } else if is(option, "capa") {
            if is(value, "bitsled") {
                s.replconf.1 = true;
            }
        } else if !(is(option, "ip-address") || is(option, "rdb-only") || is(option, "rdb-filter-only")) {
            return Err(Fail(
                format!("ERR Unrecognized REPLCONF option: {}", String::from_utf8_lossy(option)).into_bytes(),
            ));
        }
    }
    Ok(Reply::ok())
}

/// `PSYNC replid offset`: from a bitsled replica, the connection becomes
/// the master's stream to it (the reply is the stream's first line).
pub(crate) fn psync(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    if !s.replconf.1 {
        return Err(Fail::new(NOT_BITSLED));
    }
    let host = std::sync::Arc::clone(server(s)?);
    let offset = int(&a[2]).ok().and_then(|o| u64::try_from(o).ok());
    let (stream, addr) = host.socket().map_err(|e| Fail(format!("ERR {e}").into_bytes()))?;
    let port = s.replconf.0.unwrap_or(0);
    host.replication().psync(host.client_id(), stream, addr, port, &a[1], offset).map_err(|e| Fail(e.into_bytes()))?;
    Ok(Reply::Several(Vec::new()))
}

/// `SYNC`: the old full-sync command of Redis replicas; refused.
pub(crate) fn sync(_s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    Err(Fail::new(NOT_BITSLED))
}
