//! Cluster mode's commands: CLUSTER's subcommands with Redis 7's replies,
//! CLUSTERX with Apache Kvrocks's (the topology a controller pushes),
//! ASKING, READONLY and READWRITE; and the check every keyed command
//! passes before it runs (`MOVED`, `CROSSSLOT`, `CLUSTERDOWN`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cluster::migration::{covers, Migration, MigrationState, Outgoing};
use crate::cluster::slot::{key_slot, SLOTS};
use crate::cluster::topology::{parse_slot_list, Node, SlotRange, Topology};
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
fn cluster(s: &Session) -> Result<&Arc<Cluster>, Fail> {
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
    ///
    /// `resolve` names the spec of a queued command (dispatch's own, so this
    /// module needs no command table).
    pub(super) fn cluster_refusal(
        &self,
        spec: &'static Spec,
        args: &[Vec<u8>],
        resolve: &dyn Fn(&[Vec<u8>]) -> Option<&'static Spec>,
    ) -> Option<String> {
        let c = self.host.as_deref().and_then(|h| h.cluster())?;
        let mut write = spec.is_write();
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
            queued.iter().try_for_each(|q| match resolve(q) {
                Some(spec) => {
                    write |= spec.is_write();
                    check(super::introspect::call_keys(spec, q))
                }
                None => Ok(()),
            })
        } else {
            check(super::introspect::call_keys(spec, args))
        };
        if let Err(text) = checked {
            return Some(text);
        }
        if let Some(refused) = slot.and_then(|slot| route(c, slot, write, self.importing.as_deref())) {
            return Some(refused);
        }
        other_database_refusal(spec.name, args).map(str::to_owned)
    }

    /// The refusal of a command for a slot this node is migrating, checked
    /// again while the command holds the transaction lock shared: a
    /// migration starts by taking it exclusively, so a write that passed
    /// the first check before the migration began has finished before the
    /// keys are read, and one that has not is refused here (`TRYAGAIN`);
    /// a command for a slot copied meanwhile goes to its new node
    /// (`MOVED`). FLUSHALL and FLUSHDB wait while a migration runs (the
    /// target would keep the keys already copied).
    pub(super) fn migration_refusal(&self, spec: &'static Spec, args: &[Vec<u8>]) -> Option<String> {
        let c = self.host.as_deref().and_then(|h| h.cluster())?;
        let m = c.migration.lock();
        if m.job.is_none() && m.migrated.is_empty() {
            return None;
        }
        if spec.flags.contains(super::spec::Flags::EMPTIES_DB) && m.running().is_some() {
            return Some(TRYAGAIN.to_string());
        }
        let slot = key_slot(super::introspect::call_keys(spec, args).first().copied()?);
        migration_redirect(&m, slot, spec.is_write())
    }
}

/// `MOVED slot ip:port` of node `n`.
fn moved(slot: u16, n: &Node) -> String {
    format!("MOVED {slot} {}:{}", n.ip, n.port)
}

/// Where a migration here sends a command for `slot` of this node: to the
/// node it was copied to (`MOVED`), or back for a write while it is being
/// copied (`TRYAGAIN`); `None` to run here.
fn migration_redirect(m: &Outgoing, slot: u16, write: bool) -> Option<String> {
    if let Some(n) = m.moved_to(slot) {
        return Some(moved(slot, n));
    }
    (write && m.frozen(slot)).then(|| TRYAGAIN.to_string())
}

/// Kvrocks's refusal of a write to a slot being migrated.
const TRYAGAIN: &str = "TRYAGAIN Can't write to slot being migrated which is in write forbidden phase";

/// Where a command for `slot` runs, as this node sees it: here (`None`),
/// or the error that sends it elsewhere. A slot of this node that is being
/// migrated takes reads but refuses writes (`TRYAGAIN`), and once copied
/// sends everything to its new node (`MOVED`); a slot of another node that
/// this node has imported is served here, and one it is importing only on
/// the connection importing it (`importing`: that connection's slots).
fn route(c: &Cluster, slot: u16, write: bool, importing: Option<&[SlotRange]>) -> Option<String> {
    let t = c.read();
    match t.owner(slot) {
        Owner::Myself => migration_redirect(&c.migration.lock(), slot, write),
        Owner::Other(n) => {
            let i = c.imports.lock();
            let own_import = importing.is_some_and(|own| covers(own, slot)) && covers(&i.importing, slot);
            if covers(&i.imported, slot) || own_import {
                None
            } else {
                Some(moved(slot, n))
            }
        }
        Owner::Unserved => Some("CLUSTERDOWN Hash slot not served".into()),
    }
}

/// Slots whose owner a push may not change now: those a migration here
/// is copying out, and those being imported here.
fn busy_slots(c: &Cluster) -> Vec<SlotRange> {
    let mut busy: Vec<SlotRange> = c.migration.lock().running().map(|m| m.slots.clone()).unwrap_or_default();
    busy.extend(c.imports.lock().importing.iter().copied());
    busy
}

/// Applies a push (`change`) unless it changes the owner of a busy slot
/// (see [`busy_slots`]); then settles what the push decided.
fn push(s: &Session, c: &Cluster, change: impl FnOnce(&mut Topology) -> Result<bool, String>) -> CmdResult {
    let busy = busy_slots(c);
    let owners_before: Vec<Option<String>> = {
        let t = c.read();
        busy.iter().flat_map(|&(a, b)| a..=b).map(|slot| t.owner_id(slot).map(str::to_owned)).collect()
    };
    c.update(|next| {
        let changed = change(next)?;
        let after = busy.iter().flat_map(|&(a, b)| a..=b).map(|slot| next.owner_id(slot));
        if after.zip(&owners_before).any(|(now, before)| now != before.as_deref()) {
            return Err("Can't change the owner of slots being migrated".into());
        }
        Ok(changed)
    })
    .map_err(|e| Fail(format!("ERR {e}").into_bytes()))?;
    settle(s, c);
    Ok(Reply::ok())
}

/// After a topology push: slots copied from here that now belong to
/// another node lose their copies here, and imported slots that now
/// belong to this node are simply its own.
fn settle(s: &Session, c: &Cluster) {
    let (gone, mine) = {
        let t = c.read();
        let mut m = c.migration.lock();
        let settled =
            |slots: &[SlotRange]| slots.iter().all(|&(a, b)| (a..=b).all(|x| matches!(t.owner(x), Owner::Other(_))));
        let (gone, kept): (Vec<_>, Vec<_>) =
            std::mem::take(&mut m.migrated).into_iter().partition(|(slots, _)| settled(slots));
        m.migrated = kept;
        let mine: Vec<SlotRange> =
            t.runs().into_iter().filter(|&(a, _, _)| t.owner(a) == Owner::Myself).map(|(a, b, _)| (a, b)).collect();
        (gone, mine)
    };
    // (No push may give this node slots it is still importing.)
    c.imports.lock().forget(&mine);
    if let Err(e) = c.save_moves() {
        eprintln!("bitsled serve: could not record the settled moves: {e}");
    }
    for (slots, _) in gone {
        if let Err(e) = crate::cluster::migration::drop_keys(&s.db, &slots) {
            eprintln!("bitsled serve: could not delete the keys of migrated slots: {e}");
        }
    }
}

/// `CLUSTER IMPORT slots 0|1|2`, sent by a migration's source on the
/// connection its keys arrive on: 0 starts an import (any keys this node
/// holds in the slots are dropped first: they are older than the
/// source's), 1 ends it (the slots are served here until a push gives
/// them to this node), 2 abandons it (the keys that arrived are dropped).
pub(crate) fn import(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    let c = Arc::clone(cluster(s)?);
    let list = std::str::from_utf8(&a[2]).map_err(|_| Fail::new("ERR Invalid slot id"))?;
    let slots = parse_slot_list(list).map_err(|e| Fail(format!("ERR {e}").into_bytes()))?;
    let failed = |e: String| Fail(format!("ERR {e}").into_bytes());
    let each = |f: &dyn Fn(u16) -> bool| slots.iter().any(|&(x, y)| (x..=y).any(f));
    match &a[3][..] {
        b"0" => {
            if s.importing.is_some() {
                return Err(Fail::new("ERR This connection is importing already"));
            }
            {
                let t = c.read();
                if each(&|slot| t.owner(slot) == Owner::Myself) {
                    return Err(Fail::new("ERR Can't import slots this node owns"));
                }
            }
            let importing = c.imports.lock().importing.clone();
            if each(&|slot| covers(&importing, slot)) {
                return Err(Fail::new("ERR Slots are being imported already"));
            }
            c.begin_import(&s.db, &slots).map_err(failed)?;
            s.importing = Some(slots);
        }
        b"1" | b"2" => {
            if s.importing.as_deref() != Some(slots.as_slice()) {
                return Err(Fail::new("ERR No import of these slots on this connection"));
            }
            c.end_import(&s.db, &slots, a[3][0] == b'1').map_err(failed)?;
            s.importing = None;
        }
        _ => return Err(Fail::new("ERR Invalid import state")),
    }
    Ok(Reply::ok())
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
    let c = cluster(s)?;
    let mut text = initialized(c)?.info_text();
    let out = c.migration.lock();
    // Slots copied out whose owner no push has changed yet, by target.
    for (slots, n) in &out.migrated {
        text.push_str(&format!("migrated_to_{}:{}\r\n", n.id, crate::cluster::topology::slot_list_text(slots)));
    }
    if let Some(m) = out.job.as_ref() {
        text.push_str(&format!(
            "migrating_slot(s):{}\r\ndestination_node:{}\r\nmigrating_state:{}\r\nmigrated_keys:{}\r\n",
            crate::cluster::topology::slot_list_text(&m.slots),
            m.target.id,
            m.state_name(),
            m.keys
        ));
    }
    drop(out);
    let i = c.imports.lock();
    if !i.importing.is_empty() || !i.imported.is_empty() {
        let state = if i.importing.is_empty() { "success" } else { "start" };
        let all: Vec<SlotRange> = i.importing.iter().chain(&i.imported).copied().collect();
        text.push_str(&format!(
            "importing_slot(s):{}\r\nimport_state:{state}\r\n",
            crate::cluster::topology::slot_list_text(&all)
        ));
    }
    Ok(Reply::bulk(text))
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

/// Up to `limit` keys of this node's database in `slot`. Cost: the slot's
/// keys in a store that orders keys by slot, else a scan of every key
/// (DESIGN.md, "Cluster mode").
fn keys_in_slot(s: &Session, slot: u16, limit: usize) -> Result<Vec<Vec<u8>>, Fail> {
    let mut out = Vec::new();
    crate::cluster::migration::for_keys_in(&s.db, &[(slot, slot)], |keys| {
        out.extend(keys);
        Ok(out.len() < limit)
    })
    .map_err(|e| Fail(format!("ERR {e}").into_bytes()))?;
    out.truncate(limit);
    Ok(out)
}

/// `CLUSTER COUNTKEYSINSLOT slot`.
pub(crate) fn countkeysinslot(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    cluster(s)?;
    let slot = slot_arg(&a[2])?;
    // Counted a batch at a time; the names are not kept.
    let mut n = 0usize;
    crate::cluster::migration::for_keys_in(&s.db, &[(slot, slot)], |keys| {
        n += keys.len();
        Ok(true)
    })
    .map_err(|e| Fail(format!("ERR {e}").into_bytes()))?;
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
    let c = Arc::clone(cluster(s).map_err(|_| Fail::new("ERR Cluster mode is not enabled"))?);
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
            push(s, &c, |t| t.set_nodes(&nodes, version, force, &|ip, port| me.is(ip, port)))
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
            push(s, &c, |t| t.set_slots(&slots, &id, version).map(|()| true))
        }
        (b"migrate", 4..=6) => migrate(s, &c, a),
        _ => Err(Fail::new(CLUSTERX_USAGE)),
    }
}

/// `CLUSTERX MIGRATE slots target-id [ASYNC | SYNC [timeout-secs]]`:
/// copies the slots' keys to the target (Kvrocks's checks and texts).
/// ASYNC (the default) replies at once; SYNC waits for the outcome (a
/// nil reply if `timeout` seconds pass first; 0 or none: no limit). The
/// topology does not change: a push (`CLUSTERX SETSLOT`) gives the slots
/// to the target, and this node then deletes its copies.
fn migrate(s: &mut Session, c: &Arc<Cluster>, a: &[Vec<u8>]) -> CmdResult {
    let err = |t: &str| Err(Fail(format!("ERR {t}").into_bytes()));
    let list = std::str::from_utf8(&a[2]).map_err(|_| Fail::new("ERR Invalid slot id"))?;
    let slots = parse_slot_list(list).map_err(|e| Fail(format!("ERR {e}").into_bytes()))?;
    let sync = match a.get(4).map(|m| m.to_ascii_lowercase()) {
        None => false,
        Some(m) if m == b"async" => {
            if a.len() > 5 {
                return err("Async migration does not support timeout");
            }
            false
        }
        Some(m) if m == b"sync" => true,
        Some(_) => return err("Invalid sync flag"),
    };
    let timeout = match a.get(5) {
        None => None,
        Some(t) => {
            let t =
                super::args::parse_i64(t).ok_or_else(|| Fail::new("ERR timeout is not an integer or out of range"))?;
            let t = u64::try_from(t).map_err(|_| Fail::new("ERR timeout is negative"))?;
            (t > 0).then(|| Duration::from_secs(t))
        }
    };
    let target = {
        let t = c.read();
        let Some(target) = t.nodes().iter().find(|n| n.id.as_bytes() == a[3].as_slice()).cloned() else {
            return err("Can't find the destination node id");
        };
        if t.myself().is_some_and(|me| me.master.is_some()) {
            return err("Slave can't migrate slot");
        }
        if target.master.is_some() {
            return err("Can't migrate slot to a slave");
        }
        if t.myid() == Some(target.id.as_str()) {
            return err("Can't migrate slot to myself");
        }
        if !slots.iter().all(|&(x, y)| (x..=y).all(|slot| t.owner(slot) == Owner::Myself)) {
            return err("Can't migrate slot which doesn't belong to me");
        }
        target
    };
    {
        let mut m = c.migration.lock();
        if m.running().is_some() {
            return err("There is already a migrating job");
        }
        if slots.iter().any(|&(x, y)| (x..=y).any(|v| m.moved_to(v).is_some())) {
            return err("Can't migrate slot which has been migrated");
        }
        m.job =
            Some(Migration { slots: slots.clone(), target: target.clone(), state: MigrationState::Running, keys: 0 });
    }
    let host = s.host.clone().ok_or_else(|| Fail::new(DISABLED))?;
    // Every write that passed its check before the migration began ends
    // before the keys are read (see `Session::migration_refusal`).
    drop(host.transaction_lock().write());
    let password = host.requirepass().map(<[u8]>::to_vec);
    let (c2, db) = (Arc::clone(c), s.db.clone());
    let started = std::thread::Builder::new()
        .name("bitsled-migrate".into())
        .spawn(move || super::slot_migration::run(&c2, &db, &slots, &target, password.as_deref()));
    if let Err(e) = started {
        let why = format!("cannot start the migration: {e}");
        if let Some(job) = c.migration.lock().job.as_mut() {
            job.state = MigrationState::Failed(why.clone());
        }
        return err(&why);
    }
    if !sync {
        return Ok(Reply::ok());
    }
    let started = Instant::now();
    loop {
        let state = c.migration.lock().job.as_ref().map(|m| m.state.clone());
        match state {
            Some(MigrationState::Running) => {}
            Some(MigrationState::Failed(why)) => return err(&why),
            _ => return Ok(Reply::ok()),
        }
        if timeout.is_some_and(|t| started.elapsed() >= t) {
            return Ok(Reply::Bulk(None));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
