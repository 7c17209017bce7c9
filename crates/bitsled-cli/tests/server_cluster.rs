//! Cluster mode (`serve --cluster-enabled yes`, `bitsled cluster create`):
//!
//! - three nodes answer redis-py's `RedisCluster`, ioredis v5's
//!   `Redis.Cluster` and node-redis v4's `createCluster` (which read CLUSTER
//!   SLOTS and follow MOVED) with the answers one plain node gives to the
//!   seed workload, and each node holds only its slots' keys; the `redis`
//!   crate's cluster client and `redis-cli -c` follow MOVED;
//! - a one-node bitsled cluster and a one-node Redis 7 cluster give the
//!   same bytes for key slots, CROSSSLOT, COUNTKEYSINSLOT/GETKEYSINSLOT,
//!   their argument errors, SELECT, READONLY/READWRITE/ASKING and a
//!   transaction across slots; three bitsled nodes and a three-node Redis
//!   cluster give each node the same replies (MOVED, CROSSSLOT, CLUSTER
//!   SLOTS), ports read as places;
//! - MOVED names the owner, a stale topology is refused, and the topology
//!   survives a restart;
//! - kill -9 of one node fails only its slots, and its keys are back when
//!   it restarts;
//! - one node grows to three (`cluster add` twice, `cluster rebalance`)
//!   under redis-py's cluster client, which gives the same answers before
//!   and after;
//! - `bitsled cluster add` and `cluster migrate` move half the slots to a
//!   new node while a client writes: every acknowledged write is there
//!   afterwards, on the slot's owner only; a migration to a dead node
//!   fails and leaves the slots where they were; kill -9 of the target or
//!   the source in the middle of a copy leaves every key on the source
//!   only, after restarts; a source restarted after a copy keeps
//!   redirecting until the push; Bloom filters and large strings move with
//!   their slot.
//!
//! The Redis and Python parts need `redis-server` and `python3` with the
//! `redis` package; without them those tests print a notice and pass,
//! unless `BITSLED_REQUIRE_REDIS=1` is set. The ioredis part needs `node`,
//! `npm` and the npm registry (a notice and a pass without them).

use std::process::Command;
use std::time::Duration;

use bitsled_testkit::redis_server;
use bitsled_testkit::wire::{words, Client};
#[path = "common/node.rs"]
mod node;
#[path = "common/python.rs"]
mod python;
#[path = "common/server.rs"]
mod server;

use python::python_with_redis;
use server::Served;

/// `bitsled cluster ARGS...`; its stdout, asserting it succeeded.
fn cli(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_bitsled")).arg("cluster").args(args).output().unwrap();
    assert!(out.status.success(), "bitsled cluster {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `bitsled cluster create` of the nodes at `ports`; its stdout.
fn create(ports: &[u16]) -> String {
    let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let out = Command::new(env!("CARGO_BIN_EXE_bitsled")).args(["cluster", "create"]).args(&addrs).output().unwrap();
    assert!(out.status.success(), "cluster create failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Two cluster nodes started with `args` (cluster mode on), the first
/// owning every slot, the second added with none (`cluster add`).
fn pair(dirs: &[tempfile::TempDir], args: &[&str]) -> Vec<Served> {
    let args: Vec<&str> = ["--cluster-enabled", "yes"].into_iter().chain(args.iter().copied()).collect();
    let nodes: Vec<Served> = dirs.iter().map(|d| Served::start(d.path(), &args)).collect();
    let (a, b) = (nodes[0].port, nodes[1].port);
    create(&[a]);
    let said = cli(&["add", "--cluster", &format!("127.0.0.1:{a}"), &format!("127.0.0.1:{b}")]);
    assert!(said.contains("added (no slots yet)"), "{said}");
    nodes
}

/// Raw reply bytes of `line` (words split at spaces) on `port`.
fn call(port: u16, line: &str) -> Vec<u8> {
    Client::connect(port).call(&words(line))
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn cluster_node(dir: &std::path::Path) -> Served {
    Served::start(dir, &["--cluster-enabled", "yes"])
}

const SEED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/cluster_seed.py");

fn run_seed(python: &str, port: u16, mode: &str) -> String {
    let out = Command::new(python).arg(SEED).arg("127.0.0.1").arg(port.to_string()).arg(mode).output().unwrap();
    assert!(out.status.success(), "cluster_seed.py {mode} failed:\n{}\n{}", text(&out.stdout), text(&out.stderr));
    text(&out.stdout)
}

fn dbsize(port: u16) -> u64 {
    let reply = text(&call(port, "DBSIZE"));
    reply.trim().trim_start_matches(':').parse().unwrap()
}

/// Invariant: a cluster client over three nodes gets the answers one
/// plain node gives, and the keys are split between the nodes (each
/// holds some, together exactly the workload's).
#[test]
fn three_nodes_answer_a_cluster_client_as_one_node_does() {
    let Some(python) = python_with_redis() else { return };
    let dirs: Vec<_> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    let nodes: Vec<Served> = dirs[..3].iter().map(|d| cluster_node(d.path())).collect();
    let single = Served::start(dirs[3].path(), &[]);
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    let said = create(&ports);
    assert!(said.contains("cluster of 3 node(s)"), "{said}");

    let on_cluster = run_seed(python, ports[0], "cluster");
    let on_single = run_seed(python, single.port, "single");
    assert_eq!(on_cluster, on_single, "the cluster answers as one node");
    let keys: u64 = on_single.lines().find_map(|l| l.strip_prefix("keys ")).unwrap().parse().unwrap();
    let sizes: Vec<u64> = ports.iter().map(|&p| dbsize(p)).collect();
    assert!(sizes.iter().all(|&n| n > 0), "every node holds keys: {sizes:?}");
    assert_eq!(sizes.iter().sum::<u64>(), keys, "each key on exactly one node: {sizes:?}");
    assert_eq!(dbsize(single.port), keys);
}

/// The replies a one-node cluster gives, bitsled and Redis 7 alike.
#[test]
fn a_one_node_cluster_answers_as_redis_does() {
    let Some(redis) = redis_server::start_with(&["--cluster-enabled", "yes"]) else { return };
    assert_eq!(text(&call(redis.port, "CLUSTER ADDSLOTSRANGE 0 16383")), "+OK\r\n");
    // One node: its state turns ok at once, or within a second.
    for _ in 0..100 {
        if text(&call(redis.port, "CLUSTER INFO")).contains("cluster_state:ok") {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let dir = tempfile::tempdir().unwrap();
    let node = cluster_node(dir.path());
    assert_eq!(text(&call(node.port, "SET x 1")), "-CLUSTERDOWN Hash slot not served\r\n", "before a topology");
    create(&[node.port]);

    let script = [
        "CLUSTER KEYSLOT foo",
        "CLUSTER KEYSLOT {user1000}.following",
        "CLUSTER KEYSLOT 123456789",
        "CLUSTER KEYSLOT {}foo",
        "CLUSTER KEYSLOT foo{}{bar}",
        "CLUSTER KEYSLOT foo{{bar}}zap",
        "CLUSTER KEYSLOT",
        "SETBIT {u}:a 7 1",
        "SETBIT {u}:b 9 1",
        "SET foo bar",
        "BITOP AND {u}:c {u}:a {u}:b",
        "BITOP AND dest {u}:a {u}:b",
        "MGET {u}:a foo",
        "MGET {u}:a {u}:b",
        "CLUSTER COUNTKEYSINSLOT 12182",
        "CLUSTER GETKEYSINSLOT 12182 10",
        "CLUSTER COUNTKEYSINSLOT 16384",
        "CLUSTER COUNTKEYSINSLOT -1",
        "CLUSTER COUNTKEYSINSLOT abc",
        "CLUSTER GETKEYSINSLOT -1 1",
        "CLUSTER GETKEYSINSLOT 1 -1",
        "CLUSTER GETKEYSINSLOT 1 x",
        "SELECT 1",
        "SELECT 0",
        "READONLY",
        "READWRITE",
        "ASKING",
        "CLUSTER NOSUCH",
        "CLUSTER GETKEYSINSLOT 99999 abc",
        "MOVE foo 1",
        "SWAPDB 0 1",
        "COPY {u}:a {u}:z DB 1",
        "COPY {u}:a {u}:z DB 0",
        "COPY {u}:a {u}:y",
        "COPY {u}:a foo",
        "DBSIZE",
    ];
    let (mut b, mut r) = (Client::connect(node.port), Client::connect(redis.port));
    for line in script {
        assert_eq!(text(&b.call(&words(line))), text(&r.call(&words(line))), "{line}");
    }
    // A transaction across slots: each command is queued, EXEC is refused
    // and the transaction discarded.
    for line in ["MULTI", "SET {u}:a 1", "SET foo 2", "EXEC", "GET foo"] {
        assert_eq!(text(&b.call(&words(line))), text(&r.call(&words(line))), "{line}");
    }
    let info = text(&call(node.port, "CLUSTER INFO"));
    assert!(info.contains("cluster_state:ok\r\ncluster_slots_assigned:16384\r\n"), "{info}");
    assert!(text(&call(node.port, "INFO cluster")).contains("cluster_enabled:1"));
    // CLUSTER SLOTS: one run, the node's address, id and (Redis 7) an empty
    // map, shaped as Redis's.
    let (slots_b, slots_r) = (text(&call(node.port, "CLUSTER SLOTS")), text(&call(redis.port, "CLUSTER SLOTS")));
    // A lone Redis node does not know its own address (no peer told it):
    // the address is left out of the comparison.
    let shape = |s: &str, port: u16| {
        let lines: Vec<String> = s.lines().map(|l| l.replace(&port.to_string(), "PORT")).collect();
        let at = lines.iter().position(|l| l == "*4").unwrap();
        let id = |l: &String| l.len() == 40 && l.bytes().all(|c| c.is_ascii_hexdigit());
        lines
            .iter()
            .enumerate()
            .filter(|&(i, l)| i != at + 1 && i != at + 2 && !id(l))
            .map(|(_, l)| l.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(shape(&slots_b, node.port), shape(&slots_r, redis.port), "{slots_b}\n{slots_r}");
}

/// Invariant: three bitsled nodes made one cluster by `bitsled cluster
/// create`, and three Redis 7 servers made one by `redis-cli --cluster
/// create` (the two CLIs split the slots alike), give every node the same
/// replies, each node's port read as its place in the list: key slots,
/// MOVED for keys of the other nodes' slots, CROSSSLOT, multi-key
/// commands within one slot, COUNTKEYSINSLOT on owners and others, and
/// CLUSTER SLOTS (node ids left out).
#[test]
fn three_nodes_answer_as_a_three_node_redis_cluster() {
    let mut redis = Vec::new();
    for _ in 0..3 {
        let Some(s) = redis_server::start_with(&["--cluster-enabled", "yes"]) else { return };
        redis.push(s);
    }
    let rports: Vec<u16> = redis.iter().map(|s| s.port).collect();
    let addrs: Vec<String> = rports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let out =
        Command::new("redis-cli").args(["--cluster", "create"]).args(&addrs).arg("--cluster-yes").output().unwrap();
    assert!(out.status.success(), "redis-cli --cluster create: {}", text(&out.stdout));
    for &p in &rports {
        let mut ok = false;
        for _ in 0..250 {
            ok = text(&call(p, "CLUSTER INFO")).contains("cluster_state:ok");
            if ok {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(ok, "the Redis cluster came up on {p}");
    }
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let nodes: Vec<Served> = dirs.iter().map(|d| cluster_node(d.path())).collect();
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    create(&ports);
    let normal = |reply: &[u8], ports: &[u16]| {
        let mut t = text(reply);
        // MOVED's `127.0.0.1:PORT\r\n`.
        for (i, p) in ports.iter().enumerate() {
            t = t.replace(&format!(":{p}\r\n"), &format!(":P{i}\r\n"));
        }
        t
    };
    let mut script: Vec<String> = Vec::new();
    for i in 0..24 {
        script.push(format!("SETBIT user:{i} {i} 1"));
        script.push(format!("GETBIT user:{i} {i}"));
    }
    script.extend(
        [
            "CLUSTER KEYSLOT user:7",
            "SETBIT {r17}:mon 3 1",
            "SETBIT {r17}:tue 3 1",
            "BITOP AND {r17}:both {r17}:mon {r17}:tue",
            "BITCOUNT {r17}:both",
            "MGET {r17}:mon {r17}:tue",
            "MGET user:1 user:2",
            "EXISTS user:3 user:4",
            "BITOP OR dest user:1 user:2",
            "DEL user:5",
            "CLUSTER COUNTKEYSINSLOT 9842",
            "CLUSTER GETKEYSINSLOT 9842 10",
            "CLUSTER COUNTKEYSINSLOT 5474",
        ]
        .map(str::to_owned),
    );
    for line in &script {
        for n in 0..3 {
            let b = normal(&call(ports[n], line), &ports);
            let r = normal(&call(rports[n], line), &rports);
            assert_eq!(b, r, "{line} on node {n}");
        }
    }
    // CLUSTER SLOTS: the same runs, each node's address and port in the
    // same place (ids and Redis 7's empty metadata maps aside).
    let shape = |s: &[u8], ports: &[u16]| {
        let t = text(s);
        let mut lines: Vec<String> = t.lines().map(str::to_owned).collect();
        for l in &mut lines {
            for (i, p) in ports.iter().enumerate() {
                if *l == format!(":{p}") {
                    *l = format!(":P{i}");
                }
            }
        }
        let id = |l: &String| l.len() == 40 && l.bytes().all(|c| c.is_ascii_hexdigit());
        lines.into_iter().filter(|l| !id(l) && l != "$40").collect::<Vec<_>>()
    };
    assert_eq!(shape(&call(ports[1], "CLUSTER SLOTS"), &ports), shape(&call(rports[1], "CLUSTER SLOTS"), &rports));
}

/// Invariant: a key of another node's slot is redirected to that node;
/// the topology is versioned (stale pushes refused) and kept across a
/// restart.
#[test]
fn moved_names_the_owner_and_the_topology_survives_a_restart() {
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut nodes: Vec<Served> = dirs.iter().map(|d| cluster_node(d.path())).collect();
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    create(&ports);
    // foo is slot 12182, the second node's half.
    assert_eq!(text(&call(ports[0], "SET foo bar")), format!("-MOVED 12182 127.0.0.1:{}\r\n", ports[1]));
    assert_eq!(text(&call(ports[1], "SET foo bar")), "+OK\r\n");
    assert_eq!(text(&call(ports[0], "CLUSTERX VERSION")), "$1\r\n1\r\n");
    // A redirected command inside MULTI fails the transaction, as in Redis.
    let mut tx = Client::connect(ports[0]);
    for (line, want) in [
        ("MULTI", "+OK\r\n".to_string()),
        ("SET foo x", format!("-MOVED 12182 127.0.0.1:{}\r\n", ports[1])),
        ("EXEC", "-EXECABORT Transaction discarded because of previous errors.\r\n".to_string()),
    ] {
        assert_eq!(text(&tx.call(&words(line))), want, "{line}");
    }
    assert_eq!(text(&call(ports[1], "GET foo")), "$3\r\nbar\r\n", "the aborted SET did not run");
    // redis-cli in cluster mode follows MOVED.
    if redis_server::tools_present(&["redis-cli"]) {
        let cli_c = |args: &[&str]| {
            let out = Command::new("redis-cli").args(["-c", "-p", &ports[0].to_string()]).args(args).output().unwrap();
            text(&out.stdout)
        };
        assert_eq!(cli_c(&["SET", "foo", "via-cli"]), "OK\n");
        assert_eq!(cli_c(&["GET", "foo"]), "via-cli\n");
        assert_eq!(text(&call(ports[1], "GET foo")), "$7\r\nvia-cli\r\n", "written on the owner");
    }
    let stale = format!("{} 127.0.0.1 1 master - 0-16383", "a".repeat(40));
    let mut c = Client::connect(ports[0]);
    let args = [b"CLUSTERX".to_vec(), b"SETNODES".to_vec(), stale.into_bytes(), b"0".to_vec()];
    assert_eq!(text(&c.call(&args)), "-ERR Invalid cluster version\r\n");
    assert_eq!(text(&c.call(&words("CLUSTERX SETSLOT 0 NODE x 2"))), "-ERR Invalid node id\r\n");
    // Give slot 12182 to the first node at version 2, on both.
    let first_id = text(&call(ports[0], "CLUSTER MYID"));
    let first_id = first_id.lines().nth(1).unwrap().to_owned();
    for &p in &ports {
        let reply = call(p, &format!("CLUSTERX SETSLOT 12182 NODE {first_id} 2"));
        assert_eq!(text(&reply), "+OK\r\n");
    }
    assert_eq!(text(&call(ports[1], "GET foo")), format!("-MOVED 12182 127.0.0.1:{}\r\n", ports[0]));

    // A restart (on another port: the node is known by its id) keeps it.
    nodes[0].signal("-TERM");
    nodes[0].wait_exit(Duration::from_secs(10));
    nodes[0] = cluster_node(dirs[0].path());
    let port = nodes[0].port;
    assert_eq!(text(&call(port, "CLUSTERX VERSION")), "$1\r\n2\r\n");
    assert_eq!(text(&call(port, "CLUSTER MYID")), format!("$40\r\n{first_id}\r\n"));
    assert_eq!(text(&call(port, "SET foo mine")), "+OK\r\n", "slot 12182 is its own");
    assert_eq!(text(&call(port, "SET a x")), format!("-MOVED 15495 127.0.0.1:{}\r\n", ports[1]));
}

/// Without `--cluster-enabled`, cluster commands answer as a standalone
/// Redis does.
#[test]
fn standalone_servers_refuse_cluster_commands() {
    let dir = tempfile::tempdir().unwrap();
    let node = Served::start(dir.path(), &[]);
    for line in ["CLUSTER INFO", "CLUSTER KEYSLOT foo", "READONLY", "ASKING"] {
        assert_eq!(text(&call(node.port, line)), "-ERR This instance has cluster support disabled\r\n", "{line}");
    }
    assert_eq!(text(&call(node.port, "CLUSTERX VERSION")), "-ERR Cluster mode is not enabled\r\n");
    assert_eq!(text(&call(node.port, "SELECT 1")), "+OK\r\n");
    assert!(text(&call(node.port, "INFO cluster")).contains("cluster_enabled:0"));
}

/// The same invariant through ioredis v5's cluster client.
#[test]
fn three_nodes_answer_ioredis_cluster_as_one_node_does() {
    let Some(modules) = node::node_modules("ioredis5", "ioredis@5") else { return };
    node_cluster_matches_one_node(&modules, concat!(env!("CARGO_MANIFEST_DIR"), "/tests/node/ioredis_cluster.js"));
}

/// The same invariant through node-redis v4's `createCluster`.
#[test]
fn three_nodes_answer_node_redis_cluster_as_one_node_does() {
    let Some(modules) = node::node_modules("node-redis4", "redis@4") else { return };
    node_cluster_matches_one_node(&modules, concat!(env!("CARGO_MANIFEST_DIR"), "/tests/node/node_redis_cluster.js"));
}

/// Runs a Node.js seed script (`script HOST PORT cluster|single`) against
/// three cluster nodes and against one plain node: the same lines, and the
/// keys split between the nodes.
fn node_cluster_matches_one_node(modules: &std::path::Path, script: &str) {
    let run = |port: u16, mode: &str| {
        let out = Command::new("node")
            .arg(script)
            .arg("127.0.0.1")
            .arg(port.to_string())
            .arg(mode)
            .env("NODE_PATH", modules)
            .output()
            .unwrap();
        assert!(out.status.success(), "{script} {mode}:\n{}\n{}", text(&out.stdout), text(&out.stderr));
        text(&out.stdout)
    };
    let dirs: Vec<_> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
    let nodes: Vec<Served> = dirs[..3].iter().map(|d| cluster_node(d.path())).collect();
    let single = Served::start(dirs[3].path(), &[]);
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    create(&ports);
    let on_cluster = run(ports[0], "cluster");
    assert_eq!(on_cluster, run(single.port, "single"), "the cluster answers as one node");
    let keys: u64 = on_cluster.lines().find_map(|l| l.strip_prefix("keys ")).unwrap().parse().unwrap();
    let sizes: Vec<u64> = ports.iter().map(|&p| dbsize(p)).collect();
    assert!(sizes.iter().all(|&n| n > 0), "every node holds keys: {sizes:?}");
    assert_eq!(sizes.iter().sum::<u64>(), keys, "each key on exactly one node: {sizes:?}");
}

/// Invariant: with one of three nodes killed (kill -9), every key of the
/// other nodes' slots still reads its value there, the dead node's keys
/// are redirected to it (clients get a connection error, never another
/// value), and a restart brings every acknowledged write back;
/// `bitsled cluster info` counts each master's slots and keys, and
/// fails naming the dead master.
#[test]
fn a_killed_node_fails_only_its_slots_and_restarts_with_its_keys() {
    use bitsled_redis::cluster::slot::key_slot;
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut nodes: Vec<Served> =
        dirs.iter().map(|d| Served::start(d.path(), &["--cluster-enabled", "yes", "--fsync", "always"])).collect();
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    create(&ports);
    // redis-cli's split of three: 0-5460, 5461-10922, 10923-16383.
    let owner = |key: &str| match key_slot(key.as_bytes()) {
        0..=5460 => 0,
        5461..=10922 => 1,
        _ => 2,
    };
    let keys: Vec<String> = (0..300).map(|i| format!("user:{i}")).collect();
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(text(&call(ports[owner(k)], &format!("SETBIT {k} {i} 1"))), ":0\r\n", "{k}");
    }
    let seen_from = format!("127.0.0.1:{}", ports[0]);
    let summary = cli(&["info", "--cluster", &seen_from]);
    assert!(summary.contains("3 master(s)") && summary.contains("16384 of 16384 slots assigned"), "{summary}");
    assert!(summary.contains("300 keys in all"), "{summary}");
    for (n, &p) in ports.iter().enumerate() {
        let held = keys.iter().filter(|k| owner(k) == n).count();
        let line = summary.lines().find(|l| l.starts_with(&format!("127.0.0.1:{p} "))).unwrap_or_default();
        assert!(line.ends_with(&format!(", {held} keys")), "{summary}");
    }
    nodes[2].signal("-KILL");
    nodes[2].wait_exit(Duration::from_secs(10));
    let out = Command::new(env!("CARGO_BIN_EXE_bitsled"))
        .args(["cluster", "info", "--cluster", &seen_from])
        .output()
        .unwrap();
    assert!(!out.status.success(), "a master is down: exit code 1");
    assert!(text(&out.stdout).contains("unreachable"), "{}", text(&out.stdout));
    assert!(text(&out.stderr).contains("1 master(s) unreachable"), "{}", text(&out.stderr));
    for (i, k) in keys.iter().enumerate() {
        let o = owner(k);
        if o == 2 {
            let reply = text(&call(ports[0], &format!("GETBIT {k} {i}")));
            assert_eq!(reply, format!("-MOVED {} 127.0.0.1:{}\r\n", key_slot(k.as_bytes()), ports[2]), "{k}");
        } else {
            assert_eq!(text(&call(ports[o], &format!("GETBIT {k} {i}"))), ":1\r\n", "{k} on a live node");
        }
    }
    assert!(std::net::TcpStream::connect(("127.0.0.1", ports[2])).is_err(), "the killed node does not answer");
    nodes[2] = Served::start(dirs[2].path(), &["--cluster-enabled", "yes", "--fsync", "always"]);
    let back = nodes[2].port;
    for (i, k) in keys.iter().enumerate().filter(|(_, k)| owner(k) == 2) {
        assert_eq!(text(&call(back, &format!("GETBIT {k} {i}"))), ":1\r\n", "{k} is back");
    }
}

/// A client that follows MOVED and retries TRYAGAIN, as cluster clients
/// do: `SET key value`, until a node acknowledges it.
fn set_following(conns: &mut std::collections::HashMap<u16, Client>, mut port: u16, key: &str, value: &str) {
    for _ in 0..10_000 {
        let c = conns.entry(port).or_insert_with(|| Client::connect(port));
        let reply = text(&c.call(&words(&format!("SET {key} {value}"))));
        if reply == "+OK\r\n" {
            return;
        }
        if let Some(rest) = reply.strip_prefix("-MOVED ") {
            port = rest.trim().rsplit(':').next().unwrap().parse().unwrap();
        } else if reply.starts_with("-TRYAGAIN ") {
            std::thread::sleep(Duration::from_millis(2));
        } else {
            panic!("SET {key}: {reply}");
        }
    }
    panic!("SET {key} never succeeded");
}

/// The keys a node holds (KEYS runs on the node, whoever owns the slots).
fn keys_on(port: u16) -> std::collections::BTreeSet<String> {
    let reply = text(&call(port, "KEYS *"));
    reply.lines().filter(|l| !l.starts_with('*') && !l.starts_with('$')).map(str::to_owned).collect()
}

/// Invariant: slots moved while a client writes keep every acknowledged
/// write (its last value), each key on exactly the node that owns its
/// slot afterwards.
#[test]
fn slots_move_to_an_added_node_under_writes_without_losing_any() {
    use bitsled_redis::cluster::slot::key_slot;
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let nodes = pair(&dirs, &[]);
    let (a, b) = (nodes[0].port, nodes[1].port);
    // The same node by another name is refused.
    let again = Command::new(env!("CARGO_BIN_EXE_bitsled"))
        .args(["cluster", "add", "--cluster", &format!("127.0.0.1:{a}"), &format!("localhost:{b}")])
        .output()
        .unwrap();
    assert!(
        !again.status.success() && text(&again.stderr).contains("in the cluster already"),
        "{}",
        text(&again.stderr)
    );
    const KEYS: usize = 3000;
    let mut preload = Client::connect(a);
    for i in 0..KEYS {
        assert_eq!(text(&preload.call(&words(&format!("SET k:{i} 0")))), "+OK\r\n");
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut conns = std::collections::HashMap::new();
            let mut last = vec![0u64; KEYS];
            let mut round = 1u64;
            // Rounds over every key until told to stop, then one more.
            loop {
                let last_round = stop.load(std::sync::atomic::Ordering::SeqCst);
                for (i, v) in last.iter_mut().enumerate() {
                    set_following(&mut conns, a, &format!("k:{i}"), &round.to_string());
                    *v = round;
                }
                if last_round {
                    return last;
                }
                round += 1;
            }
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let said = cli(&["migrate", "--from", &format!("127.0.0.1:{a}"), "--to", &format!("127.0.0.1:{b}"), "0-8191"]);
    assert!(said.contains("slots 0-8191 moved"), "{said}");
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let last = writer.join().unwrap();

    let (on_a, on_b) = (keys_on(a), keys_on(b));
    assert!(on_a.is_disjoint(&on_b), "no key on both nodes");
    assert_eq!(on_a.len() + on_b.len(), KEYS, "every key somewhere");
    for k in &on_a {
        assert!(key_slot(k.as_bytes()) > 8191, "{k} on the node that kept 8192-16383");
    }
    for k in &on_b {
        assert!(key_slot(k.as_bytes()) <= 8191, "{k} on the node given 0-8191");
    }
    assert!(!on_b.is_empty() && !on_a.is_empty());
    for (i, v) in last.iter().enumerate() {
        let k = format!("k:{i}");
        let port = if key_slot(k.as_bytes()) <= 8191 { b } else { a };
        assert_eq!(text(&call(port, &format!("GET {k}"))), format!("${}\r\n{v}\r\n", v.to_string().len()), "{k}");
    }
    let info = text(&call(b, "CLUSTER INFO"));
    assert!(info.contains("cluster_current_epoch:3"), "create, add, migrate: version 3\n{info}");
    // Back and forth: each move carries the keys.
    for (from, to) in [(b, a), (a, b), (b, a)] {
        cli(&["migrate", "--from", &format!("127.0.0.1:{from}"), "--to", &format!("127.0.0.1:{to}"), "0-8191"]);
        assert!(keys_on(from).iter().all(|k| key_slot(k.as_bytes()) > 8191), "{from} kept none of 0-8191");
        assert_eq!(keys_on(a).len() + keys_on(b).len(), KEYS, "every key somewhere, once");
    }
    assert_eq!(keys_on(a).len(), KEYS, "all back on the first node");
}

/// Invariant: a migration whose target is gone fails, and the source goes
/// on serving the slots, writes included, with every key.
#[test]
fn a_migration_to_a_dead_node_fails_and_keeps_the_slots() {
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut nodes = pair(&dirs, &[]);
    let (a, b) = (nodes[0].port, nodes[1].port);
    for i in 0..200 {
        assert_eq!(text(&call(a, &format!("SET k:{i} {i}"))), "+OK\r\n");
    }
    let b_id = text(&call(b, "CLUSTER MYID")).lines().nth(1).unwrap().to_owned();
    nodes[1].signal("-KILL");
    nodes[1].wait_exit(Duration::from_secs(10));
    let reply = text(&call(a, &format!("CLUSTERX MIGRATE 0-16383 {b_id} SYNC")));
    assert!(reply.starts_with("-ERR connecting to"), "{reply}");
    assert!(text(&call(a, "CLUSTER INFO")).contains("migrating_state:fail"));
    assert_eq!(dbsize(a), 200);
    assert_eq!(text(&call(a, "SET k:0 again")), "+OK\r\n", "writes go on");
}

/// Two `--fsync always` cluster nodes, the first owning every slot and
/// holding `n` keys of 4 MB in slots 0-8191 (so a copy takes a while),
/// the second added with no slots; and the second's id.
fn loaded_pair(dirs: &[tempfile::TempDir], n: usize) -> (Vec<Served>, String, Vec<String>) {
    use bitsled_redis::cluster::slot::key_slot;
    let nodes = pair(dirs, &["--fsync", "always"]);
    let (a, b) = (nodes[0].port, nodes[1].port);
    let keys: Vec<String> =
        (0..).map(|i| format!("big:{i}")).filter(|k| key_slot(k.as_bytes()) <= 8191).take(n).collect();
    let mut c = Client::connect(a);
    for (i, k) in keys.iter().enumerate() {
        let value: Vec<u8> = (0..4u32 << 20).map(|j| (j.wrapping_mul(2_654_435_761) >> 24) as u8 ^ i as u8).collect();
        assert_eq!(text(&c.call(&[b"SET".to_vec(), k.clone().into_bytes(), value])), "+OK\r\n");
    }
    let id = text(&call(b, "CLUSTER MYID")).lines().nth(1).unwrap().to_owned();
    (nodes, id, keys)
}

/// Waits until the node on `port` says it is importing.
fn wait_importing(port: u16) {
    for _ in 0..1000 {
        if text(&call(port, "CLUSTER INFO")).contains("import_state:start") {
            return;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    panic!("no import began on {port}");
}

/// Invariant: kill -9 of the target in the middle of a copy leaves the
/// source serving every key (writes included), and the restarted target
/// holds none of the partial copy.
#[test]
fn a_target_killed_mid_migration_keeps_every_key_on_the_source() {
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let (mut nodes, b_id, keys) = loaded_pair(&dirs, 24);
    let a = nodes[0].port;
    assert_eq!(text(&call(a, &format!("CLUSTERX MIGRATE 0-8191 {b_id}"))), "+OK\r\n");
    wait_importing(nodes[1].port);
    nodes[1].signal("-KILL");
    nodes[1].wait_exit(Duration::from_secs(10));
    for _ in 0..500 {
        if text(&call(a, "CLUSTER INFO")).contains("migrating_state:fail") {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(text(&call(a, "CLUSTER INFO")).contains("migrating_state:fail"));
    for k in &keys {
        assert_eq!(text(&call(a, &format!("STRLEN {k}"))), format!(":{}\r\n", 4 << 20), "{k} on the source");
    }
    assert_eq!(text(&call(a, &format!("SET {} x", keys[0]))), "+OK\r\n", "writes go on");
    nodes[1] = Served::start(dirs[1].path(), &["--cluster-enabled", "yes", "--fsync", "always"]);
    assert!(keys_on(nodes[1].port).is_empty(), "the partial copy is dropped at start");
    assert!(!dirs[1].path().join("cluster-importing.conf").exists());
}

/// Invariant: kill -9 of the source in the middle of a copy leaves every
/// key on the restarted source, and the target drops what it took.
#[test]
fn a_source_killed_mid_migration_keeps_every_key_after_restart() {
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let (mut nodes, b_id, keys) = loaded_pair(&dirs, 24);
    let (a, b) = (nodes[0].port, nodes[1].port);
    assert_eq!(text(&call(a, &format!("CLUSTERX MIGRATE 0-8191 {b_id}"))), "+OK\r\n");
    wait_importing(b);
    // Some keys have arrived, not all.
    for _ in 0..2000 {
        if !keys_on(b).is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let arrived = keys_on(b).len();
    assert!(arrived > 0 && arrived < keys.len(), "{arrived} keys arrived before the kill");
    nodes[0].signal("-KILL");
    nodes[0].wait_exit(Duration::from_secs(10));
    // The import's connection closed: the target abandons it.
    for _ in 0..1000 {
        if keys_on(b).is_empty() && !text(&call(b, "CLUSTER INFO")).contains("import_state") {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(keys_on(b).is_empty(), "the target dropped the partial copy");
    nodes[0] = Served::start(dirs[0].path(), &["--cluster-enabled", "yes", "--fsync", "always"]);
    let a = nodes[0].port;
    for k in &keys {
        assert_eq!(text(&call(a, &format!("STRLEN {k}"))), format!(":{}\r\n", 4 << 20), "{k} back on the source");
    }
}

/// Invariant: a source killed (kill -9) after a copy and before the push
/// remembers where the slots went: restarted, it redirects their
/// commands to the target (which serves the copies) instead of taking
/// writes the push would then hide; CLUSTER INFO still lists the move,
/// and the push (CLUSTERX SETSLOT, as a controller sends it) settles it:
/// the source deletes its copies and forgets the move.
#[test]
fn a_source_restarted_after_a_copy_keeps_redirecting_until_the_push() {
    use bitsled_redis::cluster::slot::key_slot;
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut nodes = pair(&dirs, &["--fsync", "always"]);
    let (a, b) = (nodes[0].port, nodes[1].port);
    let keys: Vec<String> =
        (0..).map(|i| format!("k:{i}")).filter(|k| key_slot(k.as_bytes()) <= 8191).take(50).collect();
    for k in &keys {
        assert_eq!(text(&call(a, &format!("SET {k} v"))), "+OK\r\n");
    }
    let b_id = text(&call(b, "CLUSTER MYID")).lines().nth(1).unwrap().to_owned();
    assert_eq!(text(&call(a, &format!("CLUSTERX MIGRATE 0-8191 {b_id} SYNC"))), "+OK\r\n");
    assert!(text(&call(a, "CLUSTER INFO")).contains("migrating_state:success"));
    nodes[0].signal("-KILL");
    nodes[0].wait_exit(Duration::from_secs(10));
    nodes[0] = Served::start(dirs[0].path(), &["--cluster-enabled", "yes", "--fsync", "always"]);
    let a = nodes[0].port;
    let slot = key_slot(keys[0].as_bytes());
    assert_eq!(text(&call(a, &format!("SET {} new", keys[0]))), format!("-MOVED {slot} 127.0.0.1:{b}\r\n"));
    assert_eq!(text(&call(b, &format!("GET {}", keys[0]))), "$1\r\nv\r\n", "the target serves the copy");
    assert!(text(&call(a, "CLUSTER INFO")).contains(&format!("migrated_to_{b_id}:0-8191")));
    let version: i64 = text(&call(a, "CLUSTERX VERSION")).lines().nth(1).unwrap().parse().unwrap();
    for port in [b, a] {
        let push = format!("CLUSTERX SETSLOT 0-8191 NODE {b_id} {}", version + 1);
        assert_eq!(text(&call(port, &push)), "+OK\r\n", "{port}");
    }
    assert!(keys_on(a).iter().all(|k| key_slot(k.as_bytes()) > 8191), "the source deleted its copies");
    assert!(!text(&call(a, "CLUSTER INFO")).contains("migrated_to_"), "the move is settled");
    assert!(!dirs[0].path().join("cluster-moves.conf").exists(), "nothing left to remember");
    assert_eq!(keys.iter().filter(|k| keys_on(b).contains(*k)).count(), keys.len(), "every key on the target");
}

/// Invariant: a target (default `--fsync everysec`) killed right after it
/// confirmed an import has every imported key after its restart, and
/// still holds the slots as imported: it made them durable before it
/// confirmed.
#[test]
fn a_target_killed_right_after_a_copy_keeps_every_key() {
    use bitsled_redis::cluster::slot::key_slot;
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut nodes = pair(&dirs, &[]);
    let (a, b) = (nodes[0].port, nodes[1].port);
    let keys: Vec<String> =
        (0..).map(|i| format!("k:{i}")).filter(|k| key_slot(k.as_bytes()) <= 8191).take(3000).collect();
    let mut c = Client::connect(a);
    for k in &keys {
        assert_eq!(text(&c.call(&words(&format!("SET {k} v")))), "+OK\r\n");
    }
    let b_id = text(&call(b, "CLUSTER MYID")).lines().nth(1).unwrap().to_owned();
    assert_eq!(text(&call(a, &format!("CLUSTERX MIGRATE 0-8191 {b_id} SYNC"))), "+OK\r\n");
    nodes[1].signal("-KILL");
    nodes[1].wait_exit(Duration::from_secs(10));
    nodes[1] = Served::start(dirs[1].path(), &["--cluster-enabled", "yes"]);
    let held = keys_on(nodes[1].port);
    assert_eq!(keys.iter().filter(|k| held.contains(*k)).count(), keys.len(), "every confirmed key survived");
    let info = text(&call(nodes[1].port, "CLUSTER INFO"));
    assert!(info.contains("importing_slot(s):0-8191\r\nimport_state:success"), "{info}");
}

/// Invariant: nothing a client sends can break a migration's guarantees:
/// CLUSTERX is refused inside MULTI; CLUSTER IMPORT refuses slots the node
/// owns (deleting nothing) and ends only on the connection that began it;
/// no push changes the owner of slots being copied (on the source) or
/// imported (on the target); FLUSHALL waits for the copy; and slots copied
/// but not yet pushed stay redirected when another migration starts.
#[test]
fn migrations_refuse_what_would_lose_or_duplicate_keys() {
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let (nodes, b_id, keys) = loaded_pair(&dirs, 24);
    let (a, b) = (nodes[0].port, nodes[1].port);
    let mut tx = Client::connect(a);
    assert_eq!(text(&tx.call(&words("MULTI"))), "+OK\r\n");
    assert_eq!(text(&tx.call(&words("CLUSTERX VERSION"))), "-ERR Command not allowed inside a transaction\r\n");
    assert_eq!(text(&tx.call(&words("DISCARD"))), "+OK\r\n");
    let before = dbsize(a);
    assert_eq!(text(&call(a, "CLUSTER IMPORT 0-16383 0")), "-ERR Can't import slots this node owns\r\n");
    assert_eq!(text(&call(a, "CLUSTER IMPORT 0-16383 2")), "-ERR No import of these slots on this connection\r\n");
    assert_eq!(dbsize(a), before, "nothing deleted");

    assert_eq!(text(&call(a, &format!("CLUSTERX MIGRATE 0-8191 {b_id}"))), "+OK\r\n");
    wait_importing(b);
    assert_eq!(text(&call(b, "CLUSTER IMPORT 0-8191 1")), "-ERR No import of these slots on this connection\r\n");
    for port in [a, b] {
        let reply = text(&call(port, &format!("CLUSTERX SETSLOT 0-8191 NODE {b_id} 3")));
        assert_eq!(reply, "-ERR Can't change the owner of slots being migrated\r\n", "on {port}");
    }
    let flush = text(&call(a, "FLUSHALL"));
    let copied = text(&call(a, "CLUSTER INFO")).contains("migrating_state:success");
    assert!(flush.starts_with("-TRYAGAIN") || copied, "FLUSHALL during the copy: {flush}");
    for _ in 0..1000 {
        if text(&call(a, "CLUSTER INFO")).contains("migrating_state:success") {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // Copied, not pushed: another migration does not bring the slots back.
    assert_eq!(text(&call(a, &format!("CLUSTERX MIGRATE 8192-8200 {b_id} SYNC"))), "+OK\r\n");
    let slot = bitsled_redis::cluster::slot::key_slot(keys[0].as_bytes());
    assert_eq!(text(&call(a, &format!("SET {} x", keys[0]))), format!("-MOVED {slot} 127.0.0.1:{b}\r\n"));
    assert_eq!(text(&call(b, &format!("STRLEN {}", keys[0]))), format!(":{}\r\n", 4 << 20), "the target serves it");
}

/// Invariant: a one-node cluster grown to three with the README's
/// commands keeps every key (each on the node owning its slot, the slots
/// split evenly), and redis-py's cluster client gives the same answers
/// before and after.
#[test]
fn one_node_grows_to_three_with_the_same_answers() {
    use bitsled_redis::cluster::slot::key_slot;
    let Some(python) = python_with_redis() else { return };
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let nodes: Vec<Served> = dirs.iter().map(|d| cluster_node(d.path())).collect();
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    create(&ports[..1]);
    let before = run_seed(python, ports[0], "cluster");
    for &p in &ports[1..] {
        cli(&["add", "--cluster", &format!("127.0.0.1:{}", ports[0]), &format!("127.0.0.1:{p}")]);
    }
    let said = cli(&["rebalance", "--cluster", &format!("127.0.0.1:{}", ports[0])]);
    assert!(said.contains("2 move(s)"), "{said}");
    let keys: usize = before.lines().find_map(|l| l.strip_prefix("keys ")).unwrap().parse().unwrap();
    let shares = [(0, 5460), (5461, 10922), (10923, 16383)];
    let mut total = 0;
    for (&p, (lo, hi)) in ports.iter().zip(shares) {
        let held = keys_on(p);
        assert!(!held.is_empty(), "{p} holds keys");
        assert!(held.iter().all(|k| (lo..=hi).contains(&key_slot(k.as_bytes()))), "{p} holds only slots {lo}-{hi}");
        total += held.len();
    }
    assert_eq!(total, keys, "every key, once");
    // The same workload again (the same bits) through the grown cluster.
    assert_eq!(run_seed(python, ports[2], "cluster"), before, "the same answers after growing");
    assert!(cli(&["rebalance", "--cluster", &format!("127.0.0.1:{}", ports[1])])
        .contains("evenly over 3 master(s) already"));
}

/// Invariant: strings above a chunk move byte for byte with their time to
/// live: dense ones, sparse ones whose chunks are mostly zero, and one
/// whose last chunk is all zero (only its length is sent).
#[test]
fn large_values_move_in_chunks_byte_for_byte() {
    use bitsled_redis::cluster::slot::key_slot;
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let nodes = pair(&dirs, &[]);
    let (a, b) = (nodes[0].port, nodes[1].port);
    let tag = (0..).map(|i| format!("{{m{i}}}")).find(|t| key_slot(t.as_bytes()) <= 8191).unwrap();
    let slot = key_slot(tag.as_bytes());
    let mut c = Client::connect(a);
    let dense: Vec<u8> = (0..3_000_000u32).map(|j| (j.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let set = |c: &mut Client, args: &[&[u8]]| text(&c.call(&args.iter().map(|x| x.to_vec()).collect::<Vec<_>>()));
    assert_eq!(set(&mut c, &[b"SET", format!("{tag}dense").as_bytes(), &dense]), "+OK\r\n");
    for line in [
        format!("SETBIT {tag}sparse 7 1"),
        format!("SETBIT {tag}sparse 20000000 1"),
        format!("PEXPIRE {tag}sparse 100000000"),
        format!("SETRANGE {tag}tail 100 x"),
        format!("SETBIT {tag}tail 30000000 0"),
        format!("SET {tag}small hello"),
    ] {
        assert!(!text(&c.call(&words(&line))).starts_with('-'), "{line}");
    }
    let names = ["dense", "sparse", "tail", "small"];
    let before: Vec<Vec<u8>> = names.iter().map(|n| c.call(&words(&format!("GET {tag}{n}")))).collect();
    cli(&["migrate", "--from", &format!("127.0.0.1:{a}"), "--to", &format!("127.0.0.1:{b}"), &slot.to_string()]);
    let mut d = Client::connect(b);
    for (n, want) in names.iter().zip(&before) {
        assert!(*d.call(&words(&format!("GET {tag}{n}"))) == **want, "{n} moved byte for byte");
    }
    let ttl = text(&d.call(&words(&format!("PTTL {tag}sparse"))));
    let ttl: i64 = ttl.trim().trim_start_matches(':').parse().unwrap();
    assert!(ttl > 90_000_000 && ttl <= 100_000_000, "time to live kept: {ttl}");
    assert_eq!(text(&d.call(&words(&format!("PTTL {tag}dense")))), ":-1\r\n");
    assert!(keys_on(a).is_empty(), "nothing left on the source");
}

/// Invariant: Bloom filters move with their slot and back (BF.SCANDUMP
/// chunks by BF.LOADCHUNK): on the node that has the slot, a small
/// filter, a paged one and a chain grown to several sub-filters answer
/// BF.INFO and BF.MEXISTS as before the move, a time to live is kept, and
/// the node that gave the slot away keeps none of them.
#[test]
fn bloom_filters_move_with_their_slot() {
    use bitsled_redis::cluster::slot::key_slot;
    let dirs: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let nodes = pair(&dirs, &[]);
    let (a, b) = (nodes[0].port, nodes[1].port);
    let tag = (0..).map(|i| format!("{{bf{i}}}")).find(|t| key_slot(t.as_bytes()) <= 8191).unwrap();
    let slot = key_slot(tag.as_bytes()).to_string();
    let mut c = Client::connect(a);
    let items = |from: u32, to: u32| (from..to).map(|i| format!("i{i}")).collect::<Vec<_>>().join(" ");
    for line in [
        format!("BF.MADD {tag}small {}", items(0, 40)),
        format!("BF.RESERVE {tag}paged 0.001 100000"),
        format!("BF.MADD {tag}paged {}", items(0, 5000)),
        format!("BF.RESERVE {tag}grown 0.01 100"),
        format!("BF.MADD {tag}grown {}", items(0, 700)),
        format!("PEXPIRE {tag}paged 100000000"),
    ] {
        assert!(!text(&c.call(&words(&line))).starts_with('-'), "{line}");
    }
    let names = ["small", "paged", "grown"];
    let probe = |c: &mut Client, n: &str| {
        let info = c.call(&words(&format!("BF.INFO {tag}{n}")));
        let found = c.call(&words(&format!("BF.MEXISTS {tag}{n} {}", items(0, 8000))));
        (info, found)
    };
    let before: Vec<_> = names.iter().map(|n| probe(&mut c, n)).collect();
    assert!(text(&before[2].0).contains(":3\r\n") || text(&before[2].0).contains(":4\r\n"), "the chain grew");
    for (from, to) in [(a, b), (b, a), (a, b)] {
        cli(&["migrate", "--from", &format!("127.0.0.1:{from}"), "--to", &format!("127.0.0.1:{to}"), &slot]);
        let mut d = Client::connect(to);
        for (n, want) in names.iter().zip(&before) {
            assert!(probe(&mut d, n) == *want, "{n} answers as before, on {to}");
        }
        let ttl = text(&d.call(&words(&format!("PTTL {tag}paged"))));
        let ttl: i64 = ttl.trim().trim_start_matches(':').parse().unwrap();
        assert!(ttl > 90_000_000 && ttl <= 100_000_000, "time to live kept: {ttl}");
        assert!(keys_on(from).is_empty(), "nothing left on {from}");
    }
}

/// Invariant: the `redis` crate's cluster client (CLUSTER SLOTS, MOVED)
/// reads back every key it wrote over three nodes, BITOP and BITCOUNT
/// over keys that share a hash tag included, and the keys spread over the
/// nodes.
#[test]
fn the_redis_crate_cluster_client_works_unchanged() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let nodes: Vec<Served> = dirs.iter().map(|d| cluster_node(d.path())).collect();
    let ports: Vec<u16> = nodes.iter().map(|n| n.port).collect();
    create(&ports);
    let client = redis::cluster::ClusterClient::new(vec![format!("redis://127.0.0.1:{}/", ports[0])]).unwrap();
    let mut con = client.get_connection().unwrap();
    for i in 0..300u64 {
        let _: i64 = redis::cmd("SETBIT").arg(format!("login:{i}")).arg(i).arg(1).query(&mut con).unwrap();
        let _: i64 = redis::cmd("SETBIT").arg(format!("{{day}}:{}", i % 3)).arg(i).arg(1).query(&mut con).unwrap();
    }
    for i in 0..300u64 {
        let bit: i64 = redis::cmd("GETBIT").arg(format!("login:{i}")).arg(i).query(&mut con).unwrap();
        assert_eq!(bit, 1, "login:{i}");
    }
    let n: i64 = redis::cmd("BITOP")
        .arg("OR")
        .arg("{day}:all")
        .arg("{day}:0")
        .arg("{day}:1")
        .arg("{day}:2")
        .query(&mut con)
        .unwrap();
    assert!(n > 0);
    let count: i64 = redis::cmd("BITCOUNT").arg("{day}:all").query(&mut con).unwrap();
    assert_eq!(count, 300);
    let sizes: Vec<u64> = ports.iter().map(|&p| dbsize(p)).collect();
    assert!(sizes.iter().all(|&n| n > 0), "{sizes:?}");
    assert_eq!(sizes.iter().sum::<u64>(), 304);
}
