//! `bitsled cluster`: makes running `bitsled serve --cluster-enabled yes`
//! nodes one cluster by pushing a topology to each (CLUSTERX SETNODEID
//! and SETNODES, as a Kvrocks controller does), and shows a node's view.

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
    fn addresses_split_at_the_last_colon() {
        assert_eq!(split_addr("127.0.0.1:7000").unwrap(), ("127.0.0.1".into(), 7000));
        assert_eq!(split_addr("[::1]:7000").unwrap(), ("::1".into(), 7000));
        assert!(split_addr("localhost").is_err());
        assert!(split_addr("h:99999").is_err());
    }
}
