//! Cluster mode's commands: CLUSTER's subcommands with Redis 7's replies,
//! CLUSTERX with Apache Kvrocks's (the topology a controller pushes),
//! ASKING, READONLY and READWRITE; and the check every keyed command
//! passes before it runs (`MOVED`, `CROSSSLOT`, `CLUSTERDOWN`).

use crate::cluster::slot::{key_slot, SLOTS};
use crate::cluster::topology::{parse_slot_list, Node, Topology};
use crate::cluster::{Cluster, Owner};

use super::args::int;
use super::session::Session;
use super::spec::Spec;
use super::{CmdResult, Fail, Reply};

/// Redis's reply to cluster commands on a server not in cluster mode.
const DISABLED: &str = "ERR This instance has cluster support disabled";

/// Before the first topology push (Kvrocks's text).
const NOT_INITIALIZED: &str = "CLUSTERDOWN The cluster is not initialized";

/// The cluster state of the session's server, or Redis's error.
fn cluster(s: &Session) -> Result<&Cluster, Fail> {
    s.host.as_deref().and_then(|h| h.cluster()).ok_or_else(|| Fail::new(DISABLED))
}

/// The topology, once one was pushed.
fn initialized(c: &Cluster) -> Result<parking_lot::RwLockReadGuard<'_, Topology>, Fail> {
    let t = c.read();
    if t.initialized() {
        Ok(t)
    } else {
        Err(Fail::new(NOT_INITIALIZED))
    }
}

impl Session {
    /// Whether this session's server is in cluster mode.
    pub(super) fn in_cluster(&self) -> bool {
        self.host.as_deref().is_some_and(|h| h.cluster().is_some())
    }

    /// In cluster mode, why `spec` called with `args` may not run here,
    /// as Redis 7's `getNodeByQuery` decides: keys of more than one slot
    /// (`CROSSSLOT`), a slot nobody serves (`CLUSTERDOWN`), a slot another
    /// node serves (`MOVED`). EXEC is checked over its queued commands,
    /// as one request. Commands without keys always run.
    pub(super) fn cluster_refusal(&self, spec: &'static Spec, args: &[Vec<u8>]) -> Option<String> {
        let c = self.host.as_deref().and_then(|h| h.cluster())?;
        let mut slot = None;
        let mut check = |keys: Vec<&[u8]>| -> Result<(), String> {
            for k in keys {
                let s = key_slot(k);
                match slot {
                    Some(first) if first != s => {
                        return Err("CROSSSLOT Keys in request don't hash to the same slot".into())
                    }
                    _ => slot = Some(s),
                }
            }
            Ok(())
        };
        let checked = if spec.name == "exec" {
            let queued = self.multi.as_ref().map(|m| m.queue.as_slice()).unwrap_or_default();
            queued.iter().try_for_each(|q| match super::dispatch::resolve(q) {
                Ok(spec) => check(super::introspect::call_keys(spec, q)),
                Err(_) => Ok(()),
            })
        } else {
            check(super::introspect::call_keys(spec, args))
        };
        if let Err(text) = checked {
            return Some(text);
        }
        if let Some(slot) = slot {
            let t = c.read();
            match t.owner(slot) {
                Owner::Myself => {}
                Owner::Other(n) => return Some(format!("MOVED {slot} {}:{}", n.ip, n.port)),
                Owner::Unserved => return Some("CLUSTERDOWN Hash slot not served".into()),
            }
        }
        other_database_refusal(spec.name, args).map(str::to_owned)
    }
}

/// Redis's refusal, in cluster mode, of the commands that reach a
/// database other than 0 (a cluster serves only database 0).
fn other_database_refusal(name: &str, args: &[Vec<u8>]) -> Option<&'static str> {
    match name {
        "move" => Some("ERR MOVE is not allowed in cluster mode"),
        "swapdb" => Some("ERR SWAPDB is not allowed in cluster mode"),
        "copy" => {
            let db = args.iter().skip(3).position(|a| a.eq_ignore_ascii_case(b"db")).and_then(|i| args.get(i + 4))?;
            (super::args::parse_i64(db) != Some(0))
                .then_some("ERR Copying to another database is not allowed in cluster mode")
        }
        _ => None,
    }
}

/// `CLUSTER INFO`.
pub(crate) fn info(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::bulk(initialized(cluster(s)?)?.info_text()))
}

/// `CLUSTER MYID`: this node's id (empty before CLUSTERX SETNODEID).
pub(crate) fn myid(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::bulk(cluster(s)?.read().myid().unwrap_or_default()))
}

/// `CLUSTER NODES`.
pub(crate) fn nodes(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    Ok(Reply::bulk(initialized(cluster(s)?)?.nodes_text(now_ms)))
}

/// A node as CLUSTER SLOTS lists it: ip, port, id and (Redis 7) a map of
/// other endpoints, empty here.
fn slots_node(n: &Node) -> Reply {
    Reply::Array(vec![
        Reply::bulk(n.ip.as_str()),
        Reply::Integer(i64::from(n.port)),
        Reply::bulk(n.id.as_str()),
        Reply::Map(Vec::new()),
    ])
}

/// `CLUSTER SLOTS`: each run of slots with its master, then the master's
/// replicas.
pub(crate) fn slots(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    let t = initialized(cluster(s)?)?;
    let nodes = t.nodes();
    let runs = t.runs().into_iter().map(|(start, end, owner)| {
        let mut entry =
            vec![Reply::Integer(i64::from(start)), Reply::Integer(i64::from(end)), slots_node(&nodes[owner])];
        entry.extend(t.replicas_of(owner).into_iter().map(slots_node));
        Reply::Array(entry)
    });
    Ok(Reply::Array(runs.collect()))
}

/// A node as CLUSTER SHARDS lists it (Redis 7's fields and order).
fn shards_node(n: &Node) -> Reply {
    let role = if n.master.is_some() { "replica" } else { "master" };
    Reply::Map(vec![
        (Reply::bulk("id"), Reply::bulk(n.id.as_str())),
        (Reply::bulk("port"), Reply::Integer(i64::from(n.port))),
        (Reply::bulk("ip"), Reply::bulk(n.ip.as_str())),
        (Reply::bulk("endpoint"), Reply::bulk(n.ip.as_str())),
        (Reply::bulk("role"), Reply::bulk(role)),
        (Reply::bulk("replication-offset"), Reply::Integer(0)),
        (Reply::bulk("health"), Reply::bulk("online")),
    ])
}

/// `CLUSTER SHARDS`: one entry per master, its slots as start/end pairs
/// and its nodes (the master first).
pub(crate) fn shards(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    let t = initialized(cluster(s)?)?;
    let mut out = Vec::new();
    for (i, n) in t.nodes().iter().enumerate().filter(|(_, n)| n.master.is_none()) {
        let slots =
            t.slots_of(i).into_iter().flat_map(|(a, b)| [Reply::Integer(i64::from(a)), Reply::Integer(i64::from(b))]);
        let members = std::iter::once(n).chain(t.replicas_of(i)).map(shards_node);
        out.push(Reply::Map(vec![
            (Reply::bulk("slots"), Reply::Array(slots.collect())),
            (Reply::bulk("nodes"), Reply::Array(members.collect())),
        ]));
    }
    Ok(Reply::Array(out))
}

/// `CLUSTER KEYSLOT key`.
pub(crate) fn keyslot(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    cluster(s)?;
    Ok(Reply::Integer(i64::from(key_slot(&a[2]))))
}

/// A slot argument of COUNTKEYSINSLOT, or Redis's error.
fn slot_arg(arg: &[u8]) -> Result<u16, Fail> {
    let n = int(arg)?;
    u16::try_from(n).ok().filter(|&n| n < SLOTS).ok_or_else(|| Fail::new("ERR Invalid slot"))
}

/// Up to `limit` keys of this node's database in `slot`. Cost: a scan of
/// every key (no slot index yet; DESIGN.md, "Cluster").
fn keys_in_slot(s: &Session, slot: u16, limit: usize) -> Result<Vec<Vec<u8>>, Fail> {
    let mut out = Vec::new();
    let mut cursor = 0;
    loop {
        let (keys, next) = s.db.scan(cursor, 1024).map_err(|e| Fail(super::error_text(&e).into_bytes()))?;
        out.extend(keys.into_iter().filter(|k| key_slot(k) == slot));
        if next == 0 || out.len() >= limit {
            out.truncate(limit);
            return Ok(out);
        }
        cursor = next;
    }
}

/// `CLUSTER COUNTKEYSINSLOT slot`.
pub(crate) fn countkeysinslot(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    cluster(s)?;
    let slot = slot_arg(&a[2])?;
    let n = keys_in_slot(s, slot, usize::MAX)?.len();
    Ok(Reply::Integer(i64::try_from(n).unwrap_or(i64::MAX)))
}

/// `CLUSTER GETKEYSINSLOT slot count`.
pub(crate) fn getkeysinslot(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    cluster(s)?;
    const INVALID: &str = "ERR Invalid slot or number of keys";
    // As Redis: both arguments are integers before either is checked.
    let (slot, count) = (int(&a[2])?, int(&a[3])?);
    let slot = u16::try_from(slot).ok().filter(|&n| n < SLOTS).ok_or_else(|| Fail::new(INVALID))?;
    let count = usize::try_from(count).map_err(|_| Fail::new(INVALID))?;
    Ok(Reply::Array(keys_in_slot(s, slot, count)?.into_iter().map(|k| Reply::Bulk(Some(k))).collect()))
}

/// `CLUSTER HELP`.
pub(crate) fn help(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    cluster(s)?;
    let lines = [
        "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "COUNTKEYSINSLOT <slot>",
        "    Return the number of keys in <slot>.",
        "GETKEYSINSLOT <slot> <count>",
        "    Return key names stored by current node in a slot.",
        "INFO",
        "    Return information about the cluster.",
        "KEYSLOT <key>",
        "    Return the hash slot for <key>.",
        "MYID",
        "    Return the node id.",
        "NODES",
        "    Return cluster configuration seen by node. Output format:",
        "    <id> <ip:port@bus-port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
        "SHARDS",
        "    Return information about slot range mappings and the nodes associated with them.",
        "SLOTS",
        "    Return information about slots range mappings. Each range is made of:",
        "    start, end, master and replicas IP addresses, ports and ids",
        "HELP",
        "    Print this help.",
        "The topology is pushed by CLUSTERX SETNODEID, SETNODES and SETSLOT (as Apache Kvrocks takes it).",
    ];
    Ok(Reply::Array(lines.into_iter().map(|l| Reply::Status(l.to_string())).collect()))
}

/// `ASKING`, `READONLY`, `READWRITE`: accepted in cluster mode (this node
/// migrates no slots and has no replicas that serve reads, so they change
/// nothing).
pub(crate) fn accepted(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    cluster(s)?;
    Ok(Reply::ok())
}

/// Kvrocks's reply to a CLUSTERX call of the wrong shape.
const CLUSTERX_USAGE: &str = "ERR CLUSTERX command, CLUSTERX VERSION|MYID|SETNODEID|SETNODES|SETSLOT|MIGRATE";

/// `CLUSTERX VERSION | MYID | SETNODEID id | SETNODES text version [FORCE]
/// | SETSLOT slots NODE id version`: the topology a controller pushes
/// (Kvrocks's syntax, checks and replies). A change is saved in the
/// database directory before the reply.
pub(crate) fn clusterx(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    let c = cluster(s).map_err(|_| Fail::new("ERR Cluster mode is not enabled"))?;
    let sub = a[1].to_ascii_lowercase();
    let text = |arg: &[u8]| String::from_utf8(arg.to_vec()).map_err(|_| Fail::new(CLUSTERX_USAGE));
    let changed = |r: Result<(), String>| r.map(|()| Reply::ok()).map_err(|e| Fail(format!("ERR {e}").into_bytes()));
    match (sub.as_slice(), a.len()) {
        (b"version", 2) => Ok(Reply::bulk(c.read().version().to_string())),
        (b"myid", 2) => Ok(Reply::bulk(c.read().myid().unwrap_or_default())),
        (b"setnodeid", 3) => {
            let id = text(&a[2])?;
            if id.len() != crate::cluster::topology::NODE_ID_LEN {
                return Err(Fail::new(CLUSTERX_USAGE));
            }
            changed(c.update(|t| t.set_node_id(&id).map(|()| true)))
        }
        (b"setnodes", 4 | 5) => {
            let version: i64 = std::str::from_utf8(&a[3])
                .ok()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| Fail::new("ERR Invalid version"))?;
            let force = match a.get(4) {
                None => false,
                Some(f) if f.eq_ignore_ascii_case(b"force") => true,
                Some(_) => return Err(Fail::new("ERR Invalid setnodes options")),
            };
            let nodes = text(&a[2])?;
            let me = c.address();
            changed(c.update(|t| t.set_nodes(&nodes, version, force, &|ip, port| me.is(ip, port))))
        }
        (b"setslot", 6) => {
            let slots = parse_slot_list(&text(&a[2])?).map_err(|e| Fail(format!("ERR {e}").into_bytes()))?;
            if !a[3].eq_ignore_ascii_case(b"node") {
                return Err(Fail::new("ERR Invalid setslot options"));
            }
            let id = text(&a[4])?;
            if id.len() != crate::cluster::topology::NODE_ID_LEN {
                return Err(Fail::new("ERR Invalid node id"));
            }
            let version = int(&a[5])?;
            if version < 0 {
                return Err(Fail::new("ERR Invalid version"));
            }
            changed(c.update(|t| t.set_slots(&slots, &id, version).map(|()| true)))
        }
        (b"migrate", _) => Err(Fail::new("ERR CLUSTERX MIGRATE: slot migration is not supported yet")),
        _ => Err(Fail::new(CLUSTERX_USAGE)),
    }
}
