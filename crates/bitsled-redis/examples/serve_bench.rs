//! `bitsled serve` against a private `redis-server`, side by side in one
//! run, through `redis-benchmark` and through a small RESP load generator.
//!
//! ```text
//! cargo run --release --example serve_bench [-- --quick]
//! ```
//!
//! Both servers listen on loopback; bitsled runs in-process (the same
//! server as `bitsled serve`, `--fsync everysec`, a fresh database in a
//! temporary directory), Redis without persistence. 50 clients, pipelines
//! of 1 and 16.
//!
//! Workloads:
//! - `redis-benchmark` (its `__rand_int__` is a zero-padded 12-digit number,
//!   which both servers reject as a bit offset, so it randomises the key):
//!   `SETBIT bm:__rand_int__ 7 1`, `GETBIT bm:__rand_int__ 7`,
//!   `BITCOUNT bm:__rand_int__` over 100,000 keys.
//! - The load generator below (random offsets in one bitmap, as in the
//!   login-status scenario): `SETBIT bm <rand < 10^8> 1`, `GETBIT bm <rand>`,
//!   `BITCOUNT bm`.
//!
//! Prints ops/s for both and the bitsled/Redis ratio. Needs `redis-server`
//! and `redis-benchmark` (Debian: redis-server, redis-tools).

use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bitsled_redis::server::{Server, ServerConfig};

const CLIENTS: usize = 50;

/// Builds one request from the generator's state.
type MakeRequest = fn(&mut u64) -> String;

struct Redis(Child);

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind").local_addr().expect("addr").port()
}

fn wait_for(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `redis-benchmark -p PORT -n N -c 50 -P P -r 100000 --csv CMD...`: ops/s.
fn redis_benchmark(port: u16, n: u64, pipeline: u32, cmd: &[&str]) -> f64 {
    let out = Command::new("redis-benchmark")
        .args(["-p", &port.to_string(), "-n", &n.to_string(), "-c", &CLIENTS.to_string()])
        .args(["-P", &pipeline.to_string(), "-r", "100000", "--csv"])
        .args(cmd)
        .stderr(Stdio::null())
        .output()
        .expect("run redis-benchmark");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().nth(1).unwrap_or_default();
    let rps = line.split(',').nth(1).map(|f| f.trim_matches('"')).and_then(|f| f.parse().ok());
    rps.unwrap_or_else(|| panic!("redis-benchmark {cmd:?} failed: {text}"))
}

/// splitmix64, for offsets.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Reads `n` complete replies (integers, statuses or errors: one line
/// each, as every command here replies); panics on an error reply.
fn read_replies(r: &mut BufReader<TcpStream>, n: usize, line: &mut Vec<u8>) {
    for _ in 0..n {
        line.clear();
        r.read_until(b'\n', line).expect("read reply");
        assert!(line.first() != Some(&b'-') && !line.is_empty(), "reply {:?}", String::from_utf8_lossy(line));
    }
}

/// 50 clients send `total` commands built by `make(rng)` in pipelines of
/// `pipeline`; returns ops/s.
fn load(port: u16, total: u64, pipeline: usize, make: MakeRequest) -> f64 {
    let per_client = total / CLIENTS as u64;
    let start = Instant::now();
    let threads: Vec<_> = (0..CLIENTS)
        .map(|c| {
            std::thread::spawn(move || {
                let stream = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).expect("connect");
                stream.set_nodelay(true).expect("nodelay");
                let mut w = stream.try_clone().expect("clone");
                let mut r = BufReader::new(stream);
                let mut rng = 0x5eed ^ ((c as u64) << 32);
                let (mut done, mut line, mut buf) = (0u64, Vec::new(), Vec::new());
                while done < per_client {
                    let k = pipeline.min((per_client - done) as usize);
                    buf.clear();
                    for _ in 0..k {
                        buf.extend_from_slice(make(&mut rng).as_bytes());
                    }
                    w.write_all(&buf).expect("send");
                    read_replies(&mut r, k, &mut line);
                    done += k as u64;
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("client");
    }
    (per_client * CLIENTS as u64) as f64 / start.elapsed().as_secs_f64()
}

fn resp(args: &[&str]) -> String {
    let mut s = format!("*{}\r\n", args.len());
    for a in args {
        s.push_str(&format!("${}\r\n{a}\r\n", a.len()));
    }
    s
}

fn setbit_random(rng: &mut u64) -> String {
    resp(&["SETBIT", "bm", &(next(rng) % 100_000_000).to_string(), "1"])
}

fn getbit_random(rng: &mut u64) -> String {
    resp(&["GETBIT", "bm", &(next(rng) % 100_000_000).to_string()])
}

fn bitcount_whole(_: &mut u64) -> String {
    resp(&["BITCOUNT", "bm"])
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    for tool in ["redis-server", "redis-benchmark"] {
        if Command::new(tool).arg("--version").stdout(Stdio::null()).status().is_err() {
            eprintln!("{tool} not found (Debian: apt-get install redis-server redis-tools)");
            std::process::exit(2);
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let config = ServerConfig::new().port(0);
    let db = config.db_config(bitsled::Config::new(dir.path())).open().expect("open the database");
    let server = Server::bind(db, config).expect("bind");
    let bitsled_port = server.local_addr().port();
    let stop = server.shutdown_handle();
    let running = std::thread::spawn(move || server.run());

    let redis_port = free_port();
    let redis = Redis(
        Command::new("redis-server")
            .args(["--port", &redis_port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server"),
    );
    wait_for(redis_port);

    let scale = if quick { 1 } else { 5 };
    let mut rows: Vec<(String, u32, f64, f64)> = Vec::new();
    println!("serve_bench: {CLIENTS} clients, loopback, bitsled fsync everysec vs redis-server without persistence");
    for pipeline in [1u32, 16] {
        let n = 100_000 * scale * u64::from(pipeline.min(4));
        let bench: [(&str, Vec<&str>, u64); 3] = [
            ("SETBIT bm:__rand_int__ 7 1", vec!["setbit", "bm:__rand_int__", "7", "1"], n),
            ("GETBIT bm:__rand_int__ 7", vec!["getbit", "bm:__rand_int__", "7"], n),
            ("BITCOUNT bm:__rand_int__", vec!["bitcount", "bm:__rand_int__"], n),
        ];
        for (name, cmd, n) in bench {
            let b = redis_benchmark(bitsled_port, n, pipeline, &cmd);
            let r = redis_benchmark(redis_port, n, pipeline, &cmd);
            rows.push((format!("redis-benchmark {name}"), pipeline, b, r));
        }
        let gen: [(&str, MakeRequest, u64); 3] = [
            ("SETBIT bm <rand 1e8> 1", setbit_random, n),
            ("GETBIT bm <rand 1e8>", getbit_random, n),
            // Redis counts the whole 12.5 MB string per call: fewer calls.
            ("BITCOUNT bm (whole key)", bitcount_whole, 2_000 * scale * u64::from(pipeline.min(4))),
        ];
        for (name, make, n) in gen {
            let b = load(bitsled_port, n, pipeline as usize, make);
            let r = load(redis_port, n, pipeline as usize, make);
            rows.push((name.to_string(), pipeline, b, r));
        }
    }
    println!("\n| workload | -P | bitsled ops/s | Redis ops/s | bitsled/Redis |");
    println!("|---|---|---|---|---|");
    for (name, p, b, r) in &rows {
        println!("| {name} | {p} | {b:.0} | {r:.0} | {:.2} |", b / r);
    }
    drop(redis);
    stop.shutdown();
    let _ = running.join();
}
