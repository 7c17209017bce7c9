//! `bitsled cluster`: makes running `bitsled serve --cluster-enabled yes`
//! nodes one cluster by pushing a topology to each (CLUSTERX SETNODEID
//! and SETNODES, as a Kvrocks controller does), moves slots between them,
//! and shows the cluster (a summary, or a node's CLUSTER NODES).

use std::hash::{BuildHasher, Hasher};

use anyhow::{bail, Context, Result};

/// What `bitsled cluster` does.
#[derive(clap::Subcommand, Debug)]
pub(crate) enum ClusterCommand {
    /// Make the nodes at HOST:PORT... (each a `bitsled serve
    /// --cluster-enabled yes`) one cluster of masters: the 16384 slots are
    /// split evenly in the order given, each node keeps its id (or gets a
    /// new one), and the topology goes to every node with a version above
    /// any it holds. One node gives a single-node cluster owning every
    /// slot. A password, if the nodes need one, comes from REDISCLI_AUTH.
    Create {
        /// The nodes, as the addresses clients reach them at.
        #[arg(required = true)]
        nodes: Vec<String>,
    },
    /// Add the node at NODE (a `bitsled serve --cluster-enabled yes`) to
    /// the cluster that the node at --cluster belongs to, as a master with
    /// no slots yet (give it some with `cluster migrate`): the topology,
    /// at the next version, goes to every node.
    Add {
        /// A node of the cluster, HOST:PORT.
        #[arg(long)]
        cluster: String,
        /// The new node, HOST:PORT.
        node: String,
    },
    /// Move SLOTS from the node that owns them to another node of the
    /// cluster while clients go on: writes to the slots get TRYAGAIN
    /// (cluster clients retry) while their keys are copied, then every
    /// node is given the new owner (CLUSTERX SETSLOT at the next version)
    /// and the source deletes its copies.
    Migrate {
        /// The node that owns the slots, HOST:PORT.
        #[arg(long)]
        from: String,
        /// The node to give them to, HOST:PORT.
        #[arg(long)]
        to: String,
        /// The slots: `N` or `A-B`, one or more.
        #[arg(required = true)]
        slots: Vec<String>,
    },
    /// Spread the slots evenly over the masters of the cluster that the
    /// node at --cluster belongs to (as `cluster create` splits them, in
    /// the order CLUSTER NODES lists the masters), moving each run of slots
    /// whose owner changes with `cluster migrate`.
    Rebalance {
        /// A node of the cluster, HOST:PORT.
        #[arg(long)]
        cluster: String,
    },
    /// Summarize the cluster the node at --cluster belongs to: its state
    /// and topology version, then each master (address, id, slots and
    /// keys, asked of that node) and the totals. Exit code 1 if a master
    /// cannot be reached or some slot has no owner.
    Info {
        /// A node of the cluster, HOST:PORT.
        #[arg(long)]
        cluster: String,
    },
    /// Print a node's view of the cluster (CLUSTER NODES).
    Nodes {
        /// The node, HOST:PORT.
        node: String,
    },
}

/// Runs `command`.
pub(crate) fn cluster(command: &ClusterCommand) -> Result<()> {
    match command {
        ClusterCommand::Create { nodes } => create(nodes),
        ClusterCommand::Add { cluster, node } => add(cluster, node),
        ClusterCommand::Migrate { from, to, slots } => migrate(from, to, &slots.join(" ")),
        ClusterCommand::Rebalance { cluster } => rebalance(cluster),
        ClusterCommand::Info { cluster } => info(cluster),
        ClusterCommand::Nodes { node } => {
            let (host, port) = split_addr(node)?;
            let text: String = redis::cmd("CLUSTER").arg("NODES").query(&mut connect(&host, port)?)?;
            print!("{text}");
            Ok(())
        }
    }
}

/// `HOST:PORT` as its parts.
fn split_addr(addr: &str) -> Result<(String, u16)> {
    let (host, port) = addr.rsplit_once(':').with_context(|| format!("{addr:?}: not HOST:PORT"))?;
    let port = port.parse().with_context(|| format!("{addr:?}: bad port"))?;
    Ok((host.trim_start_matches('[').trim_end_matches(']').to_owned(), port))
}

/// A connection to the node at `host:port`, authenticated with
/// REDISCLI_AUTH if it is set.
fn connect(host: &str, port: u16) -> Result<redis::Connection> {
    use redis::IntoConnectionInfo;
    let mut info = redis::ConnectionAddr::Tcp(host.to_owned(), port).into_connection_info()?;
    if let Ok(pw) = std::env::var("REDISCLI_AUTH") {
        let settings = info.redis_settings().clone().set_password(pw);
        info = info.set_redis_settings(settings);
    }
    let client = redis::Client::open(info).with_context(|| format!("{host}:{port}"))?;
    client.get_connection().with_context(|| format!("connecting to {host}:{port}"))
}

/// A new 40-hex-digit node id.
fn new_node_id() -> String {
    let mut out = String::new();
    while out.len() < 40 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos());
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out.truncate(40);
    out
}

/// The slots of node `i` of `n`: an even split of the 16384, in order,
/// as `redis-cli --cluster create` splits them (each share ends at the
/// nearest slot to a multiple of 16384 / n; the last ends at 16383).
fn slot_share(i: usize, n: usize) -> (usize, usize) {
    let per = 16384.0 / n as f64;
    let end = |j: usize| if j + 1 == n { 16383 } else { ((j as f64 + 1.0) * per - 1.0).round() as usize };
    let start = if i == 0 { 0 } else { end(i - 1) + 1 };
    (start, end(i))
}

fn create(addrs: &[String]) -> Result<()> {
    if addrs.len() > 16384 {
        bail!("{} nodes: at most 16384 (one slot each)", addrs.len());
    }
    let mut nodes = Vec::new();
    let mut version = 0i64;
    for addr in addrs {
        let (host, port) = split_addr(addr)?;
        let mut con = connect(&host, port)?;
        let v: String = redis::cmd("CLUSTERX")
            .arg("VERSION")
            .query(&mut con)
            .with_context(|| format!("{addr}: is it a `bitsled serve --cluster-enabled yes`?"))?;
        let v: i64 = v.parse().with_context(|| format!("{addr}: CLUSTERX VERSION {v:?}"))?;
        version =
            version.max(v.checked_add(1).with_context(|| format!("{addr}: topology version {v} is the last"))?).max(1);
        let id: String = redis::cmd("CLUSTERX").arg("MYID").query(&mut con)?;
        let id = if id.len() == 40 { id } else { new_node_id() };
        nodes.push((addr, host, port, id, con));
    }
    let n = nodes.len();
    let text: Vec<String> = nodes
        .iter()
        .enumerate()
        .map(|(i, (_, host, port, id, _))| {
            let (start, end) = slot_share(i, n);
            let slots = if start == end { start.to_string() } else { format!("{start}-{end}") };
            format!("{id} {host} {port} master - {slots}")
        })
        .collect();
    let text = text.join("\n");
    for (addr, _, _, id, con) in &mut nodes {
        redis::cmd("CLUSTERX")
            .arg("SETNODEID")
            .arg(&*id)
            .query::<()>(con)
            .with_context(|| format!("{addr}: SETNODEID"))?;
        redis::cmd("CLUSTERX")
            .arg("SETNODES")
            .arg(&text)
            .arg(version)
            .query::<()>(con)
            .with_context(|| format!("{addr}: SETNODES"))?;
    }
    for (i, (addr, _, _, id, _)) in nodes.iter().enumerate() {
        let (start, end) = slot_share(i, n);
        println!("{addr} {id} slots {start}-{end}");
    }
    println!("cluster of {n} node(s) at topology version {version}");
    Ok(())
}

/// A CLUSTER NODES text as the SETNODES text that gives the same
/// topology, with each node's address.
fn setnodes_text(nodes: &str) -> Result<(String, Vec<(String, u16)>)> {
    let mut lines = Vec::new();
    let mut addrs = Vec::new();
    for line in nodes.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split(' ').collect();
        let (Some(id), Some(addr), Some(flags), Some(master)) = (f.first(), f.get(1), f.get(2), f.get(3)) else {
            bail!("a CLUSTER NODES line that does not parse: {line:?}");
        };
        let (host, port) = split_addr(addr.split('@').next().unwrap_or(addr))?;
        if flags.split(',').any(|x| x == "slave") {
            lines.push(format!("{id} {host} {port} slave {master}"));
        } else {
            let slots: Vec<&str> = f.iter().skip(8).copied().filter(|x| !x.starts_with('[')).collect();
            lines.push(format!("{id} {host} {port} master - {}", slots.join(" ")).trim_end().to_owned());
        }
        addrs.push((host, port));
    }
    Ok((lines.join("\n"), addrs))
}

fn add(cluster: &str, node: &str) -> Result<()> {
    let (host, port) = split_addr(cluster)?;
    let mut con = connect(&host, port)?;
    let nodes: String =
        redis::cmd("CLUSTER").arg("NODES").query(&mut con).with_context(|| format!("{cluster}: CLUSTER NODES"))?;
    let v: String = redis::cmd("CLUSTERX").arg("VERSION").query(&mut con)?;
    let version =
        v.parse::<i64>().ok().and_then(|v| v.checked_add(1)).with_context(|| format!("{cluster}: version {v:?}"))?;
    let (text, mut addrs) = setnodes_text(&nodes)?;
    let (new_host, new_port) = split_addr(node)?;
    if addrs.contains(&(new_host.clone(), new_port)) {
        bail!("{node} is in the cluster already");
    }
    let mut new = connect(&new_host, new_port)?;
    let id: String = redis::cmd("CLUSTERX")
        .arg("MYID")
        .query(&mut new)
        .with_context(|| format!("{node}: is it a `bitsled serve --cluster-enabled yes`?"))?;
    if id.len() == 40 && nodes.lines().any(|l| l.starts_with(&id)) {
        bail!("{node} is node {id}, in the cluster already");
    }
    let keys: i64 = redis::cmd("DBSIZE").query(&mut new)?;
    if keys > 0 {
        bail!("{node} holds {keys} keys: a node joins empty (its keys would be unreachable)");
    }
    let id = if id.len() == 40 { id } else { new_node_id() };
    redis::cmd("CLUSTERX")
        .arg("SETNODEID")
        .arg(&id)
        .query::<()>(&mut new)
        .with_context(|| format!("{node}: SETNODEID"))?;
    let text = format!("{text}\n{id} {new_host} {new_port} master -");
    addrs.push((new_host, new_port));
    let setnodes = |h: &str, p: u16| -> Result<()> {
        redis::cmd("CLUSTERX").arg("SETNODES").arg(&text).arg(version).query::<()>(&mut connect(h, p)?)?;
        Ok(())
    };
    push_all(&addrs, setnodes, &format!("CLUSTERX SETNODES <the topology> {version}"))?;
    println!("{node} {id} added (no slots yet), topology version {version} on {} node(s)", addrs.len());
    Ok(())
}

/// Runs `push` on every node of `addrs`, going on past failures; if any
/// failed, the error names each such node and what it still needs
/// (`what`), so the operator can finish the push.
fn push_all(addrs: &[(String, u16)], push: impl Fn(&str, u16) -> Result<()>, what: &str) -> Result<()> {
    let failed: Vec<String> =
        addrs.iter().filter_map(|(h, p)| push(h, *p).err().map(|e| format!("  {h}:{p} needs {what}: {e:#}"))).collect();
    if !failed.is_empty() {
        bail!(
            "the new topology reached {} of {} nodes:\n{}",
            addrs.len() - failed.len(),
            addrs.len(),
            failed.join("\n")
        );
    }
    Ok(())
}

/// The masters of a CLUSTER NODES text, in its order: each one's
/// address and the owner (an index into the list) of every slot.
fn masters_and_owners(nodes: &str) -> Result<(Vec<String>, Vec<Option<usize>>)> {
    let mut masters = Vec::new();
    let mut owners = vec![None; 16384];
    for line in nodes.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split(' ').collect();
        let (Some(addr), Some(flags)) = (f.get(1), f.get(2)) else {
            bail!("a CLUSTER NODES line that does not parse: {line:?}")
        };
        if flags.split(',').any(|x| x == "slave") {
            continue;
        }
        let index = masters.len();
        masters.push(addr.split('@').next().unwrap_or(addr).to_owned());
        for range in f.iter().skip(8).filter(|x| !x.starts_with('[')) {
            let (a, b) = range.split_once('-').unwrap_or((range, range));
            let (a, b): (usize, usize) = (a.parse()?, b.parse()?);
            for owner in owners.get_mut(a..=b).with_context(|| format!("slot range {range}"))? {
                *owner = Some(index);
            }
        }
    }
    Ok((masters, owners))
}

/// The moves that take `owners` to an even split over `n` masters: runs
/// of consecutive slots with one current owner and one new owner, as
/// (from, to, start, end). Slots without an owner are left alone.
fn rebalance_moves(owners: &[Option<usize>], n: usize) -> Vec<(usize, usize, usize, usize)> {
    let mut moves: Vec<(usize, usize, usize, usize)> = Vec::new();
    for i in 0..n {
        let (start, end) = slot_share(i, n);
        for (slot, owner) in owners.iter().enumerate().take(end + 1).skip(start) {
            let Some(from) = owner.filter(|&o| o != i) else { continue };
            match moves.last_mut() {
                Some((f, t, _, e)) if *f == from && *t == i && *e + 1 == slot => *e = slot,
                _ => moves.push((from, i, slot, slot)),
            }
        }
    }
    moves
}

fn rebalance(cluster: &str) -> Result<()> {
    let (host, port) = split_addr(cluster)?;
    let nodes: String = redis::cmd("CLUSTER").arg("NODES").query(&mut connect(&host, port)?)?;
    let (masters, owners) = masters_and_owners(&nodes)?;
    let moves = rebalance_moves(&owners, masters.len());
    if moves.is_empty() {
        println!("the slots are spread evenly over {} master(s) already", masters.len());
        return Ok(());
    }
    for (from, to, start, end) in &moves {
        migrate(&masters[*from], &masters[*to], &format!("{start}-{end}"))?;
    }
    println!("{} move(s): the slots are spread evenly over {} master(s)", moves.len(), masters.len());
    Ok(())
}

/// One master of a CLUSTER NODES text: (address, id, slot ranges as the
/// text gives them, slots).
fn masters_of(nodes: &str) -> Vec<(String, String, Vec<String>, usize)> {
    let mut out = Vec::new();
    for line in nodes.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split(' ').collect();
        let (Some(id), Some(addr), Some(flags)) = (f.first(), f.get(1), f.get(2)) else { continue };
        if flags.split(',').any(|x| x == "slave") {
            continue;
        }
        let ranges: Vec<String> = f.iter().skip(8).filter(|x| !x.starts_with('[')).map(|x| (*x).to_owned()).collect();
        let slots = ranges
            .iter()
            .map(|r| {
                let (a, b) = r.split_once('-').unwrap_or((r, r));
                match (a.parse::<usize>(), b.parse::<usize>()) {
                    (Ok(a), Ok(b)) if a <= b => b - a + 1,
                    _ => 0,
                }
            })
            .sum();
        out.push((addr.split('@').next().unwrap_or(addr).to_owned(), (*id).to_owned(), ranges, slots));
    }
    out
}

/// `bitsled cluster info --cluster NODE`: the cluster's state as NODE
/// sees it, and each master's slots and keys as that master counts them.
fn info(cluster: &str) -> Result<()> {
    let (host, port) = split_addr(cluster)?;
    let mut con = connect(&host, port)?;
    let text: String = redis::cmd("CLUSTER").arg("INFO").query(&mut con).with_context(|| cluster.to_owned())?;
    let nodes: String = redis::cmd("CLUSTER").arg("NODES").query(&mut con)?;
    let masters = masters_of(&nodes);
    let field = |f: &str| info_field(&text, f).unwrap_or("?").trim().to_owned();
    let assigned: usize = masters.iter().map(|m| m.3).sum();
    println!(
        "cluster of {} master(s) seen from {cluster}: state {}, topology version {}, {assigned} of 16384 slots assigned",
        masters.len(),
        field("cluster_state"),
        field("cluster_current_epoch"),
    );
    let (mut keys, mut failed) = (0u64, Vec::new());
    for (addr, id, ranges, slots) in &masters {
        let counted = split_addr(addr).and_then(|(h, p)| {
            let mut c = connect(&h, p)?;
            let n: u64 = redis::cmd("DBSIZE").query(&mut c)?;
            Ok(n)
        });
        let ranges = if ranges.is_empty() { "none".to_owned() } else { ranges.join(" ") };
        match counted {
            Ok(n) => {
                keys += n;
                println!("{addr} {id} {slots} slots ({ranges}), {n} keys");
            }
            Err(e) => {
                println!("{addr} {id} {slots} slots ({ranges}), unreachable: {e:#}");
                failed.push(addr.clone());
            }
        }
    }
    println!("{keys} keys in all");
    if !failed.is_empty() {
        bail!("{} master(s) unreachable: {}", failed.len(), failed.join(", "));
    }
    if assigned < 16384 {
        bail!("{} slots have no owner", 16384 - assigned);
    }
    Ok(())
}

/// The slots of a slot list (`N` and `A-B`, separated by spaces).
fn slot_set(list: &str) -> Result<std::collections::BTreeSet<u16>> {
    let mut out = std::collections::BTreeSet::new();
    for range in list.split_whitespace() {
        let (a, b) = range.split_once('-').unwrap_or((range, range));
        let (a, b): (u16, u16) = (a.parse()?, b.parse()?);
        if a > b || b > 16383 {
            bail!("slot range {range}");
        }
        out.extend(a..=b);
    }
    Ok(out)
}

/// The `field:value` line `field` of a CLUSTER INFO text.
fn info_field<'a>(info: &'a str, field: &str) -> Option<&'a str> {
    info.lines().find_map(|l| l.strip_prefix(field).and_then(|r| r.strip_prefix(':')))
}

fn migrate(from: &str, to: &str, slots: &str) -> Result<()> {
    let (src_host, src_port) = split_addr(from)?;
    let (dst_host, dst_port) = split_addr(to)?;
    let mut src = connect(&src_host, src_port)?;
    let mut dst = connect(&dst_host, dst_port)?;
    let target: String =
        redis::cmd("CLUSTERX").arg("MYID").query(&mut dst).with_context(|| format!("{to}: CLUSTERX MYID"))?;
    if target.len() != 40 {
        bail!("{to} has no node id: is it part of the cluster (bitsled cluster create)?");
    }
    // A copy already done (the push failed last time, or the source
    // restarted since): straight to the push, once the target confirms
    // it holds the slots' keys.
    let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut src)?;
    let wanted = slot_set(slots).with_context(|| format!("slots {slots:?}"))?;
    let done = info
        .lines()
        .filter_map(|l| l.strip_prefix(&format!("migrated_to_{target}:")))
        .any(|list| slot_set(list).is_ok_and(|s| s == wanted));
    if done {
        let theirs: String = redis::cmd("CLUSTER").arg("INFO").query(&mut dst)?;
        let held = info_field(&theirs, "importing_slot(s)").map(slot_set).and_then(Result::ok).unwrap_or_default();
        if info_field(&theirs, "import_state").map(str::trim) != Some("success") || !wanted.is_subset(&held) {
            bail!(
                "{from} says slots {slots} were copied to {to}, but {to} does not hold them as imported; \
                 the keys are still on {from}: see DESIGN.md, \"Cluster mode\""
            );
        }
    } else {
        redis::cmd("CLUSTERX")
            .arg("MIGRATE")
            .arg(slots)
            .arg(&target)
            .arg("ASYNC")
            .query::<()>(&mut src)
            .with_context(|| format!("{from}: CLUSTERX MIGRATE {slots}"))?;
    }
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {elapsed} migrating slots {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    // (A source restarted since the copy remembers where the slots went,
    // not the job: nothing to wait for then.)
    let keys = loop {
        if done {
            break "all".to_owned();
        }
        let info: String = redis::cmd("CLUSTER").arg("INFO").query(&mut src)?;
        let keys = info_field(&info, "migrated_keys").unwrap_or("0").to_owned();
        match info_field(&info, "migrating_state") {
            Some("start") => bar.set_message(format!("{slots}: {keys} keys copied")),
            Some("success") => break keys,
            state => {
                bar.abandon();
                bail!(
                    "migrating slots {slots} from {from} failed (state {}; the source's log says why); the slots stay on {from}",
                    state.unwrap_or("unknown")
                );
            }
        }
        bar.tick();
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    bar.finish_and_clear();
    // Every node learns the new owner, the target first.
    let v: String = redis::cmd("CLUSTERX").arg("VERSION").query(&mut src)?;
    let version =
        v.parse::<i64>().ok().and_then(|v| v.checked_add(1)).with_context(|| format!("{from}: version {v:?}"))?;
    let nodes: String = redis::cmd("CLUSTER").arg("NODES").query(&mut src)?;
    let mut addrs: Vec<(String, u16)> = vec![(dst_host.clone(), dst_port)];
    for line in nodes.lines() {
        let Some(addr) = line.split(' ').nth(1).and_then(|a| a.split('@').next()) else { continue };
        let (host, port) = split_addr(addr)?;
        let is_target = line.starts_with(&target);
        if !is_target && !addrs.contains(&(host.clone(), port)) {
            addrs.push((host, port));
        }
    }
    let setslot = |h: &str, p: u16| -> Result<()> {
        let mut con = connect(h, p)?;
        redis::cmd("CLUSTERX").arg("SETSLOT").arg(slots).arg("NODE").arg(&target).arg(version).query::<()>(&mut con)?;
        Ok(())
    };
    push_all(&addrs, setslot, &format!("CLUSTERX SETSLOT \"{slots}\" NODE {target} {version}"))?;
    println!(
        "slots {slots} moved from {from} to {to} ({keys} keys), topology version {version} on {} node(s)",
        addrs.len()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_cover_every_slot_once() {
        assert_eq!(
            (0..3).map(|i| slot_share(i, 3)).collect::<Vec<_>>(),
            vec![(0, 5460), (5461, 10922), (10923, 16383)],
            "redis-cli's split of three"
        );
        for n in [1, 2, 3, 7, 16384] {
            let mut next = 0;
            for i in 0..n {
                let (start, end) = slot_share(i, n);
                assert_eq!(start, next, "contiguous");
                assert!(end >= start);
                next = end + 1;
            }
            assert_eq!(next, 16384, "{n} nodes cover all slots");
        }
    }

    #[test]
    fn ids_are_40_hex_digits_and_differ() {
        let (a, b) = (new_node_id(), new_node_id());
        assert_eq!(a.len(), 40);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn nodes_texts_turn_into_setnodes_texts() {
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        let nodes = format!(
            "{a} 127.0.0.1:7001@17001 myself,master - 0 1 3 connected 0-100 200\n{b} 10.0.0.2:7002@17002 slave {a} 1 1 3 connected\n"
        );
        let (text, addrs) = setnodes_text(&nodes).unwrap();
        assert_eq!(text, format!("{a} 127.0.0.1 7001 master - 0-100 200\n{b} 10.0.0.2 7002 slave {a}"));
        assert_eq!(addrs, vec![("127.0.0.1".to_string(), 7001), ("10.0.0.2".to_string(), 7002)]);
    }

    #[test]
    fn rebalancing_one_owner_over_three_moves_two_runs() {
        let owners = vec![Some(0); 16384];
        assert_eq!(rebalance_moves(&owners, 3), vec![(0, 1, 5461, 10922), (0, 2, 10923, 16383)]);
        let even: Vec<Option<usize>> = (0..16384).map(|s| Some(usize::from(s > 8191))).collect();
        assert_eq!(rebalance_moves(&even, 2), vec![], "already even");
        let text = format!("{} 127.0.0.1:7001@17001 myself,master - 0 1 3 connected 0-16383\n", "a".repeat(40));
        let (masters, owners) = masters_and_owners(&text).unwrap();
        assert_eq!((masters, owners.iter().all(|&o| o == Some(0))), (vec!["127.0.0.1:7001".to_string()], true));
    }

    /// Masters of a CLUSTER NODES text: replicas and migration notes in
    /// brackets are left out, slot counts add up the ranges.
    #[test]
    fn masters_count_their_slots() {
        let nodes = "a 127.0.0.1:7001@17001 myself,master - 0 0 3 connected 0-5460 [5461->-b]\n\
                     b 127.0.0.1:7002@17002 master - 0 0 3 connected 5461-10922 16000\n\
                     c 127.0.0.1:7003@17003 slave a 0 0 3 connected\n\
                     d 127.0.0.1:7004@17004 master - 0 0 3 connected\n";
        let m = masters_of(nodes);
        let got: Vec<(&str, &str, usize)> = m.iter().map(|(addr, id, _, n)| (addr.as_str(), id.as_str(), *n)).collect();
        assert_eq!(got, vec![("127.0.0.1:7001", "a", 5461), ("127.0.0.1:7002", "b", 5463), ("127.0.0.1:7004", "d", 0)]);
        assert_eq!(m[1].2, vec!["5461-10922".to_owned(), "16000".to_owned()]);
    }

    #[test]
    fn slot_lists_compare_as_sets() {
        assert_eq!(slot_set("5-5 7").unwrap(), slot_set("7 5").unwrap());
        assert_eq!(slot_set(" 0-2  9 ").unwrap().len(), 4);
        assert!(slot_set("3-1").is_err() && slot_set("16384").is_err() && slot_set("x").is_err());
    }

    #[test]
    fn addresses_split_at_the_last_colon() {
        assert_eq!(split_addr("127.0.0.1:7000").unwrap(), ("127.0.0.1".into(), 7000));
        assert_eq!(split_addr("[::1]:7000").unwrap(), ("::1".into(), 7000));
        assert!(split_addr("localhost").is_err());
        assert!(split_addr("h:99999").is_err());
    }
}
