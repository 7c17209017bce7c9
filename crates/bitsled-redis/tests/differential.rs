//! Differential test against a real `redis-server`: every command of a
//! seeded random sequence gets byte-for-byte the same RESP reply from
//! bitsled's command layer (`bitsled_redis::command::execute`, on a temporary
//! database with tiny cache and dirty budgets, reopened now and then) as
//! from Redis; each sequence ends with a GET of every key and DBSIZE, so the
//! stored bytes are compared too.
//!
//! The sequences mix SETBIT/GETBIT (offsets clustered at byte, word and
//! page edges), BITCOUNT/BITPOS with BYTE and BIT ranges (negative, out of
//! range, malformed, wrong argument counts), BITOP AND/OR/XOR/NOT, BITFIELD
//! and BITFIELD_RO (random types, offsets, `#N` offsets, overflow modes), the
//! string and keyspace commands, PFADD/PFCOUNT/PFMERGE on the same keys
//! (so HyperLogLogs meet bitmap writes and corrupt sketches), and malformed
//! commands. Rarely, a key gets
//! a bit at offset 2^32-1 (Redis then allocates 512 MiB) and is deleted a
//! few commands later. Redis 7 lacks BITOP DIFF/DIFF1/ANDOR/ONE, so those
//! are not generated.
//!
//! Two clients take part, each with its own connection (a session on
//! bitsled's side): SELECT switches databases, WATCH / MULTI / EXEC /
//! DISCARD / UNWATCH interleave with the other client's writes, and MOVE,
//! SWAPDB, COPY ... DB, FLUSHDB and FLUSHALL work across four databases.
//! The string commands next to bitmaps (INCR, DECR, INCRBY, DECRBY,
//! INCRBYFLOAT, MSET, MSETNX, SETNX, SETEX, PSETEX, GETSET, GETEX, TOUCH)
//! are generated too, with expiries far in the future or in the past so
//! that timing cannot make the two sides differ. DUMP payloads are moved
//! both ways: a value DUMPed by Redis (LZF-compressed when long) is
//! RESTOREd into both, and so is one DUMPed by bitsled.
//!
//! On a difference the test prints the seed and the shortest failing
//! sequence it can find (the prefix up to the first difference, then
//! single steps removed while it still fails, each candidate replayed
//! against a FLUSHALL'ed Redis and a fresh database).
//!
//! Needs `redis-server` on the PATH: without it the test prints a notice and
//! passes, unless `BITSLED_REQUIRE_REDIS=1`. `BITSLED_DIFF_SEQUENCES=N` runs
//! N sequences instead of the default 1000, `BITSLED_DIFF_STEPS=L` makes
//! them L steps long instead of 60, `BITSLED_DIFF_SEED=S` starts at another
//! seed; `differential_long` (ignored) runs many more of 100 steps, bounded
//! by `BITSLED_DIFF_SECONDS` (default 600).

use std::io::{BufReader, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::time::{Duration, Instant};

use bitsled::testing::PAGE_BITS;
use bitsled::{Config, Db};
use bitsled_redis::command::{execute, Session};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use bitsled_testkit::redis_server;

/// Keys the sequences use: four plain ones, and rarely two binary names.
const KEYS: [&[u8]; 6] = [b"k0", b"k1", b"k2", b"k3", b"\x00bin\xff\r\n", b"sp ace"];

/// The key that gets a bit at offset 2^32-1; deleted right after.
const HUGE: &[u8] = b"huge";

/// Bit positions inside a page where encodings and word arithmetic change.
const EDGES: [u64; 14] = [0, 1, 6, 7, 8, 9, 63, 64, 65, 127, 128, 4095 * 8, PAGE_BITS - 64, PAGE_BITS - 1];

/// Clients per side.
const CLIENTS: usize = 2;

/// Databases the sequences use.
const DATABASES: u32 = 4;

/// An expiry far in the future (2100-01-01), in Unix seconds.
const FAR_SECONDS: u64 = 4_102_444_800;

/// One step of a sequence.
#[derive(Clone, Debug)]
enum Step {
    /// A command from one client, sent to both sides.
    Cmd(usize, Vec<Vec<u8>>),
    /// Close and reopen the bitsled database (Redis keeps running); both
    /// sides' clients RESET (SELECT 0, no transaction, nothing watched).
    Reopen,
    /// DUMP `key` of database 0 on one side (`from_redis`), then RESTORE
    /// the payload as `dest` on both, with REPLACE if `replace`.
    Transfer { from_redis: bool, key: Vec<u8>, dest: Vec<u8>, replace: bool },
}

/// Connections to the test's own `redis-server`, speaking RESP2: one per
/// client, and one more for the harness's own DUMP and RESTORE.
struct Redis {
    _server: redis_server::Server,
    conns: Vec<BufReader<TcpStream>>,
}

/// The harness's own connection.
const CONTROL: usize = CLIENTS;

impl Redis {
    /// Starts `redis-server` on a free loopback port, or returns `None`
    /// (after a notice) when it is not installed and not required.
    fn start() -> Option<Redis> {
        let server = redis_server::start()?;
        let conns = (0..=CLIENTS)
            .map(|_| {
                let stream = TcpStream::connect((Ipv4Addr::LOCALHOST, server.port)).expect("connect to redis-server");
                stream.set_nodelay(true).expect("nodelay");
                BufReader::new(stream)
            })
            .collect();
        let mut redis = Redis { _server: server, conns };
        assert_eq!(redis.call(0, &[b"PING".to_vec()]), b"+PONG\r\n");
        Some(redis)
    }

    /// Sends one command from client `c` and returns its reply's exact RESP
    /// bytes.
    fn call(&mut self, c: usize, args: &[Vec<u8>]) -> Vec<u8> {
        let out = bitsled_redis::server::resp::encode_request(args);
        self.conns[c].get_mut().write_all(&out).expect("write to redis");
        let mut reply = Vec::new();
        bitsled_testkit::wire::read_reply(&mut self.conns[c], &mut reply);
        reply
    }

    /// Every client RESET, every database empty.
    fn flushall(&mut self) {
        self.reset_clients();
        assert_eq!(self.call(CONTROL, &[b"FLUSHALL".to_vec()]), b"+OK\r\n");
    }

    fn reset_clients(&mut self) {
        for c in 0..=CLIENTS {
            assert_eq!(self.call(c, &[b"RESET".to_vec()]), b"+RESET\r\n");
        }
    }
}

fn open(dir: &std::path::Path) -> Db {
    // Tiny budgets: evictions and write-backs happen within a sequence.
    Config::new(dir)
        .cache_bytes(48 << 10)
        .dirty_bytes(16 << 10)
        .flush_interval(None)
        .databases(16)
        .open()
        .expect("open bitsled")
}

/// A difference: the step and both replies.
struct Difference {
    step: usize,
    redis: Vec<u8>,
    bitsled: Vec<u8>,
}

/// The bulk string of a RESP reply, if it is one.
fn bulk_of(reply: &[u8]) -> Option<Vec<u8>> {
    let rest = reply.strip_prefix(b"$")?;
    let nl = rest.iter().position(|&b| b == b'\n')?;
    let n: usize = std::str::from_utf8(&rest[..nl - 1]).ok()?.parse().ok()?;
    Some(rest[nl + 1..nl + 1 + n].to_vec())
}

/// Replays `steps` against a FLUSHALL'ed Redis and a fresh database;
/// returns the first step whose replies differ.
fn first_difference(redis: &mut Redis, steps: &[Step]) -> Option<Difference> {
    redis.flushall();
    let dir = tempfile::tempdir().expect("tempdir");
    let mut db = open(dir.path());
    let mut sessions: Vec<Session> = (0..CLIENTS).map(|_| Session::new(db.clone())).collect();
    for (i, step) in steps.iter().enumerate() {
        match step {
            Step::Reopen => {
                sessions.clear();
                drop(db);
                db = open(dir.path());
                sessions = (0..CLIENTS).map(|_| Session::new(db.clone())).collect();
                redis.reset_clients();
            }
            Step::Cmd(c, args) => {
                let want = redis.call(*c, args);
                let got = sessions[*c].execute(args).to_resp();
                if want != got {
                    return Some(Difference { step: i, redis: want, bitsled: got });
                }
            }
            Step::Transfer { from_redis, key, dest, replace } => {
                let dump = vec![b"DUMP".to_vec(), key.clone()];
                let payload = if *from_redis {
                    bulk_of(&redis.call(CONTROL, &dump))
                } else {
                    bulk_of(&execute(&db, &dump).to_resp())
                };
                let Some(payload) = payload else { continue };
                let mut restore = vec![b"RESTORE".to_vec(), dest.clone(), b"0".to_vec(), payload];
                if *replace {
                    restore.push(b"REPLACE".to_vec());
                }
                let want = redis.call(CONTROL, &restore);
                let got = execute(&db, &restore).to_resp();
                if want != got {
                    return Some(Difference { step: i, redis: want, bitsled: got });
                }
            }
        }
    }
    None
}

/// The shortest failing prefix, then without every single step whose
/// removal keeps a difference.
fn shrink(redis: &mut Redis, steps: &[Step], first: usize) -> (Vec<Step>, Difference) {
    let mut current = steps[..=first].to_vec();
    let mut i = 0;
    while i + 1 < current.len() {
        let mut candidate = current.clone();
        candidate.remove(i);
        match first_difference(redis, &candidate) {
            Some(d) => current = candidate[..=d.step].to_vec(),
            None => i += 1,
        }
    }
    let d = first_difference(redis, &current).expect("the shrunk sequence still fails");
    (current, d)
}

/// An argument as redis-cli would accept it; a long one is cut to its first
/// 64 bytes and its length (the seed replays it in full).
fn quote(a: &[u8]) -> String {
    if a.len() > 200 {
        return format!("{}...({} bytes)", quote(&a[..64]), a.len());
    }
    if !a.is_empty() && a.iter().all(|b| b.is_ascii_graphic() && !b"\"'\\".contains(b)) {
        return String::from_utf8_lossy(a).into_owned();
    }
    let mut s = String::from("\"");
    for &b in a {
        if b.is_ascii_graphic() && !b"\"'\\".contains(&b) || b == b' ' {
            s.push(char::from(b));
        } else {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    s.push('"');
    s
}

/// A reply, escaped; a long one is shown around its first byte that is
/// not zero and its end.
fn shorten(reply: &[u8]) -> String {
    if reply.len() <= 300 {
        return reply.escape_ascii().to_string();
    }
    let first = reply.iter().skip(12).position(|&b| b != 0).map_or(12, |p| p + 12);
    let at = first.min(reply.len() - 64).saturating_sub(16);
    format!(
        "{} bytes: {}...[at {at}] {}...[end] {}",
        reply.len(),
        reply[..12].escape_ascii(),
        reply[at..at + 48].escape_ascii(),
        reply[reply.len() - 16..].escape_ascii()
    )
}

fn render(steps: &[Step]) -> String {
    let lines: Vec<String> = steps
        .iter()
        .map(|s| match s {
            Step::Reopen => "# reopen bitsled (clients RESET)".to_string(),
            Step::Cmd(c, args) => format!("[{c}] {}", args.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")),
            Step::Transfer { from_redis, key, dest, replace } => format!(
                "# DUMP {} on {}, RESTORE {} 0 <payload>{} on both",
                quote(key),
                if *from_redis { "Redis" } else { "bitsled" },
                quote(dest),
                if *replace { " REPLACE" } else { "" }
            ),
        })
        .collect();
    lines.join("\n")
}

/// The random command generator.
struct Gen {
    rng: StdRng,
}

#[expect(clippy::needless_pass_by_value, reason = "called with temporaries of many types")]
fn s(x: impl ToString) -> Vec<u8> {
    x.to_string().into_bytes()
}

impl Gen {
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.rng.gen_range(0..items.len())]
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.gen_bool(p)
    }

    fn key(&mut self) -> Vec<u8> {
        if self.chance(0.9) {
            KEYS[self.rng.gen_range(0..4)].to_vec()
        } else {
            self.pick(&KEYS).to_vec()
        }
    }

    fn keys(&mut self, min: usize, max: usize) -> Vec<Vec<u8>> {
        let n = self.rng.gen_range(min..=max);
        (0..n).map(|_| self.key()).collect()
    }

    /// A bit offset: mostly at byte, word and page edges (give or take two)
    /// of the first few pages, some anywhere, some small.
    fn bit_offset(&mut self) -> u64 {
        let page = if self.chance(0.8) { self.rng.gen_range(0..4) } else { self.rng.gen_range(0..24) };
        match self.rng.gen_range(0..10) {
            0..=5 => {
                let edge = self.pick(&EDGES);
                (page * PAGE_BITS + edge).saturating_add_signed(self.rng.gen_range(-2..=2))
            }
            6 | 7 => page * PAGE_BITS + self.rng.gen_range(0..PAGE_BITS),
            _ => self.rng.gen_range(0..200),
        }
    }

    /// A malformed integer argument.
    fn not_an_integer(&mut self) -> Vec<u8> {
        s(self.pick(&[
            "abc",
            "1.5",
            "",
            " 1",
            "1 ",
            "+1",
            "0x10",
            "01",
            "-0",
            "1e3",
            "--1",
            "-",
            "9223372036854775808",
        ]))
    }

    /// An offset argument for SETBIT (never allocating 512 MiB).
    fn setbit_offset(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..40) {
            0 => s(self.pick(&["4294967296", "-1", "18446744073709551615", "-9223372036854775808"])),
            1 => self.not_an_integer(),
            _ => s(self.bit_offset()),
        }
    }

    /// An offset argument for reads: may be anywhere up to 2^32-1.
    fn read_offset(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..30) {
            0 => s(self.pick(&["4294967295", "4294967288", "4294967296", "2147483648", "-1"])),
            1 => self.not_an_integer(),
            _ => s(self.bit_offset()),
        }
    }

    /// A start or end index for BITCOUNT, BITPOS and GETRANGE.
    fn index(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..24) {
            0..=8 => s(self.rng.gen_range(-20i64..20)),
            9..=13 => {
                // Byte or bit indexes near edges, from either end.
                let o = self.bit_offset();
                let v = if self.chance(0.5) { o / 8 } else { o };
                let v = i64::try_from(v).expect("small");
                s(if self.chance(0.4) { -v - 1 } else { v })
            }
            14 => s(i64::MIN),
            15 => s(i64::MAX),
            16 => s(self.pick(&["9223372036854775808", "-9223372036854775809", "4294967296", "-4294967296"])),
            17 => self.not_an_integer(),
            _ => s(self.rng.gen_range(-70_000i64..70_000)),
        }
    }

    fn unit(&mut self) -> Vec<u8> {
        s(self.pick(&["BYTE", "BIT", "byte", "bit", "Bit", "BITS", "x"]))
    }

    /// A string value: short text, random bytes, runs, or zeros with a few
    /// bytes set (each forcing a different page encoding).
    fn value(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..6) {
            0 => s(self.pick(&[
                "",
                "a",
                "foobar",
                "\u{0}\u{ff}",
                "12345",
                "-7",
                "0",
                "9223372036854775807",
                "-9223372036854775808",
                "3.5",
                "1e3",
                "0x10",
                " 1",
                "01",
                "10.5",
            ])),
            1 => (0..self.rng.gen_range(0..64)).map(|_| self.rng.gen()).collect(),
            2 => vec![self.pick(&[0u8, 0xff, 0x55, 0x80]); self.rng.gen_range(0..9000)],
            3 => (0..self.rng.gen_range(0..5000)).map(|_| self.rng.gen()).collect(),
            _ => {
                let mut v = vec![0u8; self.rng.gen_range(0..20_000)];
                for _ in 0..self.rng.gen_range(0..16) {
                    if !v.is_empty() {
                        let i = self.rng.gen_range(0..v.len());
                        v[i] = self.rng.gen();
                    }
                }
                v
            }
        }
    }

    fn bitfield_type(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..20) {
            0 => s(self.pick(&["u64", "i65", "i0", "u0", "x8", "I8", "U8", "i", "u-1", "i 8", "i08", "u+8"])),
            1..=9 => s(format!("{}{}", self.pick(&["i", "u"]), self.pick(&[1, 2, 7, 8, 9, 15, 16, 31, 32, 33, 63]))),
            _ => {
                if self.chance(0.5) {
                    s(format!("i{}", self.rng.gen_range(1..=64)))
                } else {
                    s(format!("u{}", self.rng.gen_range(1..=63)))
                }
            }
        }
    }

    fn bitfield_offset(&mut self, write: bool) -> Vec<u8> {
        match self.rng.gen_range(0..20) {
            0 => s(self.pick(&["#", "#-1", "#x", "-1", "x", "4294967296", "#99999999999"])),
            1..=6 => s(format!("#{}", self.rng.gen_range(0..80))),
            // A read that far does not allocate; a write would.
            7 if !write => s(self.pick(&["4294967295", "4294967232", "#67108863"])),
            _ => s(self.bit_offset()),
        }
    }

    fn bitfield_value(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..12) {
            0 => self.not_an_integer(),
            1 => s(self.pick(&[i64::MIN, i64::MAX, -1, 0, 1, i64::MIN + 1, i64::MAX - 1])),
            2..=4 => {
                let bits = self.rng.gen_range(0..63);
                let v = (1i64 << bits) + self.rng.gen_range(-2..=2);
                s(if self.chance(0.5) { -v } else { v })
            }
            5 => s(self.rng.gen::<i64>()),
            _ => s(self.rng.gen_range(-300i64..300)),
        }
    }

    fn bitfield(&mut self) -> Vec<Vec<u8>> {
        let ro = self.chance(0.15);
        let mut a = vec![s(if ro { "BITFIELD_RO" } else { "BITFIELD" }), self.key()];
        for _ in 0..self.rng.gen_range(0..5) {
            match self.rng.gen_range(0..10) {
                0..=2 => {
                    a.push(s(self.pick(&["GET", "get"])));
                    a.push(self.bitfield_type());
                    a.push(self.bitfield_offset(false));
                }
                3..=4 if !ro || self.chance(0.1) => {
                    a.push(s(self.pick(&["SET", "set"])));
                    a.push(self.bitfield_type());
                    a.push(self.bitfield_offset(true));
                    a.push(self.bitfield_value());
                }
                5..=6 if !ro || self.chance(0.1) => {
                    a.push(s(self.pick(&["INCRBY", "incrby"])));
                    a.push(self.bitfield_type());
                    a.push(self.bitfield_offset(true));
                    a.push(self.bitfield_value());
                }
                7 | 8 => {
                    a.push(s("OVERFLOW"));
                    a.push(s(self.pick(&["WRAP", "SAT", "FAIL", "sat", "fail", "wrap", "BAD"])));
                }
                _ => {
                    // Malformed: an unknown word, or a subcommand cut short.
                    a.push(s(self.pick(&["GET", "SET", "INCRBY", "OVERFLOW", "FOO"])));
                    if self.chance(0.5) {
                        a.push(self.bitfield_type());
                    }
                }
            }
        }
        a
    }

    fn command(&mut self) -> Vec<Vec<u8>> {
        let c = |x: &str| s(x);
        match self.rng.gen_range(0..100) {
            0..=17 => {
                let v = if self.chance(0.97) {
                    s(self.rng.gen_range(0..2))
                } else {
                    s(self.pick(&["2", "-1", "x", "01", ""]))
                };
                vec![c("SETBIT"), self.key(), self.setbit_offset(), v]
            }
            18..=25 => vec![c("GETBIT"), self.key(), self.read_offset()],
            26..=35 => {
                let mut a = vec![c("BITCOUNT"), self.key()];
                let n = self.pick(&[0, 1, 2, 2, 2, 3, 3, 3, 4]);
                for i in 0..n {
                    a.push(if i < 2 { self.index() } else { self.unit() });
                }
                a
            }
            36..=45 => {
                let bit = if self.chance(0.95) { s(self.rng.gen_range(0..2)) } else { s(self.pick(&["2", "-1", "x"])) };
                let mut a = vec![c("BITPOS"), self.key(), bit];
                let n = self.pick(&[0, 1, 2, 2, 3, 3, 3, 4]);
                for i in 0..n {
                    a.push(if i < 2 { self.index() } else { self.unit() });
                }
                a
            }
            46..=52 => {
                let op = self.pick(&["AND", "OR", "XOR", "NOT", "and", "Or", "not", "FOO"]);
                let n = if op.eq_ignore_ascii_case("not") && self.chance(0.9) { 1 } else { self.rng.gen_range(0..=4) };
                let mut a = vec![c("BITOP"), c(op), self.key()];
                a.extend(self.keys(n, n));
                a
            }
            53..=62 => self.bitfield(),
            63..=66 => {
                let mut a = vec![c("SET"), self.key(), self.value()];
                if self.chance(0.2) {
                    a.push(s(self.pick(&["NX", "XX", "GET", "nx", "BAD"])));
                }
                a
            }
            67..=69 => vec![c("GET"), self.key()],
            70..=72 => {
                let off = match self.rng.gen_range(0..20) {
                    0 => s(self.pick(&["-1", "536870912", "x"])),
                    // At the limit, only an empty value (which allocates nothing).
                    1 => return vec![c("SETRANGE"), self.key(), c("536870911"), Vec::new()],
                    _ => s(self.bit_offset() / 8),
                };
                let v = if self.chance(0.1) { Vec::new() } else { self.value() };
                vec![c("SETRANGE"), self.key(), off, v]
            }
            73..=75 => {
                vec![c("GETRANGE"), self.key(), self.index(), self.index()]
            }
            76 | 77 => vec![c("APPEND"), self.key(), self.value()],
            78 | 79 => vec![c("STRLEN"), self.key()],
            80 | 81 => {
                let mut a = vec![c("DEL")];
                a.extend(self.keys(1, 3));
                a
            }
            82 => {
                let mut a = vec![c("EXISTS")];
                a.extend(self.keys(1, 4));
                a
            }
            83 => vec![c("TYPE"), self.key()],
            84 | 85 => vec![c("RENAME"), self.key(), self.key()],
            86 => vec![c("GETDEL"), self.key()],
            87 => {
                let mut a = vec![c("MGET")];
                a.extend(self.keys(1, 4));
                a
            }
            88 => vec![c("DBSIZE")],
            89 | 90 => {
                // Wrong argument count for a known command.
                let name = self.pick(&[
                    "SETBIT", "GETBIT", "BITCOUNT", "BITPOS", "BITOP", "BITFIELD", "GET", "SET", "SETRANGE",
                    "GETRANGE", "APPEND", "STRLEN", "DEL", "RENAME", "GETDEL", "MGET", "TYPE", "EXISTS",
                ]);
                let n = self.rng.gen_range(0..6);
                let mut a = vec![c(name)];
                for _ in 0..n {
                    a.push(self.key());
                }
                a
            }
            91 => {
                // Only UTF-8 arguments: bitsled's unknown-command error turns
                // other bytes into U+FFFD where Redis echoes them raw
                // (tests/regression_unknown_command_bytes.rs).
                let key = KEYS[self.rng.gen_range(0..4)].to_vec();
                let text = s(self.pick(&["", "x y", "a\r\nb", "\u{0}after-nul", "é"]));
                vec![c(self.pick(&["NOSUCH", "bitcounts", "SETBITS"])), key, text]
            }
            92..=94 => {
                // A name in mixed case.
                let mut a = self.command();
                a[0] = a[0].iter().map(|b| if self.chance(0.5) { b.to_ascii_lowercase() } else { *b }).collect();
                a
            }
            95 | 96 => {
                let mut a = vec![c("PFADD"), self.key()];
                // Sometimes enough elements to turn a sparse HLL dense.
                let n = if self.chance(0.1) { self.rng.gen_range(500..3000) } else { self.rng.gen_range(0..20) };
                for _ in 0..n {
                    a.push(s(format!("e{}", self.rng.gen_range(0..5000))));
                }
                a
            }
            97 => {
                let mut a = vec![c("PFCOUNT")];
                a.extend(self.keys(1, 3));
                a
            }
            98 => {
                let mut a = vec![c("PFMERGE"), self.key()];
                a.extend(self.keys(0, 3));
                a
            }
            _ => vec![c("GETBIT"), self.key(), self.not_an_integer()],
        }
    }

    /// A float argument for INCRBYFLOAT.
    fn float(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..10) {
            0 => s(self.pick(&["inf", "-inf", "nan", "abc", "", " 1", "1e400", "1e-400", "0x1p3", "+2.5", "1.", ".5"])),
            1..=3 => s(self.rng.gen_range(-1000i64..1000)),
            4..=6 => s(format!("{}.{}", self.rng.gen_range(-100i64..100), self.rng.gen_range(0..1000))),
            7 => s(format!("{}e{}", self.rng.gen_range(1..10), self.rng.gen_range(-20i32..20))),
            _ => s(self.pick(&["0.1", "-0.1", "1.1", "0.3", "3.0e-5", "1e17", "1.7976931348623157e308"])),
        }
    }

    /// An integer argument for INCRBY and DECRBY.
    fn increment(&mut self) -> Vec<u8> {
        match self.rng.gen_range(0..10) {
            0 => self.not_an_integer(),
            1 => s(self.pick(&[i64::MIN, i64::MAX, -1, i64::MIN + 1])),
            _ => s(self.rng.gen_range(-1000i64..1000)),
        }
    }

    /// An expiry option: far in the future (absolute, so both sides agree),
    /// in the past (GETEX only: it deletes the key at once, where SET keeps
    /// an expired key that only a timer-driven sweep removes, at different
    /// moments on both sides), or malformed.
    fn expiry_option(&mut self, getex: bool) -> Vec<Vec<u8>> {
        let far = FAR_SECONDS + self.rng.gen_range(0..1000);
        match self.rng.gen_range(0..10) {
            0..=3 => vec![s("EXAT"), s(far)],
            4 | 5 => vec![s("PXAT"), s(far * 1000 + self.rng.gen_range(0..1000))],
            6 if getex => vec![s(self.pick(&["EXAT", "PXAT"])), s(self.pick(&["1", "100"]))],
            7 => vec![s(self.pick(&["EX", "PX", "EXAT"])), s(self.pick(&["0", "-1", "x", "9223372036854775807"]))],
            8 if getex => vec![s("PERSIST")],
            8 => vec![s("KEEPTTL")],
            _ => vec![s(self.pick(&["EX", "PX", "BAD", "PERSIST", "KEEPTTL", "NX"]))],
        }
    }

    /// The string commands applications use next to bitmaps.
    fn string_command(&mut self) -> Vec<Vec<u8>> {
        let c = |x: &str| s(x);
        match self.rng.gen_range(0..20) {
            0 | 1 => vec![c(self.pick(&["INCR", "DECR"])), self.key()],
            2 | 3 => vec![c(self.pick(&["INCRBY", "DECRBY"])), self.key(), self.increment()],
            4..=6 => vec![c("INCRBYFLOAT"), self.key(), self.float()],
            7 | 8 => {
                let name = self.pick(&["MSET", "MSETNX"]);
                let mut a = vec![c(name)];
                for _ in 0..self.rng.gen_range(1..=3) {
                    a.push(self.key());
                    a.push(self.value());
                }
                if self.chance(0.1) {
                    a.pop();
                }
                a
            }
            9 => vec![c("SETNX"), self.key(), self.value()],
            10 => {
                let t = if self.chance(0.85) { s(self.rng.gen_range(100_000..200_000)) } else { self.not_an_integer() };
                vec![c(self.pick(&["SETEX", "PSETEX"])), self.key(), t, self.value()]
            }
            11 => vec![c("GETSET"), self.key(), self.value()],
            12 | 13 => {
                let mut a = vec![c("GETEX"), self.key()];
                for _ in 0..self.rng.gen_range(0..=2) {
                    a.extend(self.expiry_option(true));
                }
                a
            }
            14 | 15 => {
                let mut a = vec![c("SET"), self.key(), self.value()];
                if self.chance(0.5) {
                    a.push(s(self.pick(&["NX", "XX", "GET"])));
                }
                a.extend(self.expiry_option(false));
                a
            }
            16 => {
                let mut a = vec![c("TOUCH")];
                a.extend(self.keys(1, 3));
                a
            }
            17 => vec![c("PERSIST"), self.key()],
            18 => {
                // RESTORE refusals: a busy key, a bad TTL, a damaged payload.
                let mut a = vec![c("RESTORE"), self.key(), s(self.pick(&["0", "-1", "x"])), c("garbage-payload")];
                if self.chance(0.3) {
                    a.push(s(self.pick(&["REPLACE", "ABSTTL", "IDLETIME", "FREQ", "BAD"])));
                }
                a
            }
            _ => vec![c("EXPIRETIME"), self.key()],
        }
    }

    /// A database index: mostly one the sequences use, sometimes not.
    fn db_index(&mut self) -> Vec<u8> {
        if self.chance(0.9) {
            s(self.rng.gen_range(0..DATABASES))
        } else {
            s(self.pick(&["16", "-1", "x", "4294967296", "1.5"]))
        }
    }

    /// Connection and transaction commands.
    fn session_command(&mut self) -> Vec<Vec<u8>> {
        let c = |x: &str| s(x);
        match self.rng.gen_range(0..10) {
            0 | 1 => vec![c("SELECT"), self.db_index()],
            2 | 3 => {
                let mut a = vec![c("WATCH")];
                a.extend(self.keys(1, 2));
                a
            }
            4 => vec![c("UNWATCH")],
            5 | 6 => vec![c("MULTI")],
            7 | 8 => vec![c("EXEC")],
            _ => vec![c("DISCARD")],
        }
    }

    /// Whole-database and cross-database commands.
    fn db_command(&mut self) -> Vec<Vec<u8>> {
        let c = |x: &str| s(x);
        match self.rng.gen_range(0..12) {
            0..=3 => vec![c("MOVE"), self.key(), self.db_index()],
            4 | 5 => vec![c("SWAPDB"), self.db_index(), self.db_index()],
            6..=8 => {
                let mut a = vec![c("COPY"), self.key(), self.key(), c("DB"), self.db_index()];
                if self.chance(0.5) {
                    a.push(c("REPLACE"));
                }
                a
            }
            9 => vec![c("FLUSHDB")],
            10 => vec![c("FLUSHALL")],
            _ => vec![c("DBSIZE")],
        }
    }

    /// One bit at 2^32-1 (or just below): Redis allocates 512 MiB. The key
    /// is read in ways that do not copy it, then deleted.
    fn huge_episode(&mut self) -> Vec<Step> {
        let off = s(self.pick(&[4_294_967_295u64, 4_294_967_288, 4_294_967_232]));
        let h = HUGE.to_vec();
        let c = |x: &str| s(x);
        let mut cmds = vec![
            vec![c("SETBIT"), h.clone(), off.clone(), c("1")],
            vec![c("GETBIT"), h.clone(), off],
            vec![c("STRLEN"), h.clone()],
            vec![c("BITCOUNT"), h.clone()],
            vec![c("BITCOUNT"), h.clone(), c("-1"), c("-1")],
            vec![c("BITCOUNT"), h.clone(), c("-100"), c("-1"), c("BIT")],
            vec![c("BITPOS"), h.clone(), c("1")],
            vec![c("BITPOS"), h.clone(), c("0"), c("-2")],
            vec![c("BITPOS"), h.clone(), c("1"), c("-9"), c("-1"), c("BIT")],
            vec![c("GETRANGE"), h.clone(), c("-3"), c("-1")],
            vec![c("BITFIELD"), h.clone(), c("GET"), c("u8"), c("4294967288"), c("INCRBY"), c("i5"), c("#3"), c("9")],
            vec![c("TYPE"), h.clone()],
        ];
        let keep = self.rng.gen_range(2..=cmds.len());
        cmds.truncate(keep);
        cmds.push(vec![c("DEL"), h]);
        cmds.into_iter().map(|a| Step::Cmd(0, a)).collect()
    }

    /// A sequence of `len` random steps, then, for each database, a GET of
    /// every key and DBSIZE.
    fn sequence(&mut self, len: usize) -> Vec<Step> {
        let mut steps = Vec::new();
        while steps.len() < len {
            let client = usize::from(self.chance(0.25));
            if self.chance(0.02) {
                steps.push(Step::Reopen);
            } else if self.chance(1.0 / 3000.0) {
                steps.extend(self.huge_episode());
            } else if self.chance(0.02) {
                let (key, dest) = (self.key(), self.key());
                steps.push(Step::Transfer { from_redis: self.chance(0.5), key, dest, replace: self.chance(0.7) });
            } else {
                let args = match self.rng.gen_range(0..100) {
                    0..=59 => self.command(),
                    60..=81 => self.string_command(),
                    82..=95 => self.session_command(),
                    _ => self.db_command(),
                };
                steps.push(Step::Cmd(client, args));
            }
        }
        steps.push(Step::Cmd(0, vec![s("RESET")]));
        for db in 0..DATABASES {
            steps.push(Step::Cmd(0, vec![s("SELECT"), s(db)]));
            for k in KEYS {
                steps.push(Step::Cmd(0, vec![s("GET"), k.to_vec()]));
            }
            steps.push(Step::Cmd(0, vec![s("DBSIZE")]));
        }
        steps
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| v.parse().unwrap_or_else(|_| panic!("{name}={v:?} is not a number")))
}

/// Runs `sequences` sequences of `len` commands (or until `budget` runs
/// out); panics with the seed and a shrunk sequence at the first difference.
fn run(sequences: u64, len: usize, budget: Option<Duration>) {
    let Some(mut redis) = Redis::start() else { return };
    let base = env_u64("BITSLED_DIFF_SEED").unwrap_or(0xd1ff_0000);
    eprintln!("differential: base seed {base} (BITSLED_DIFF_SEED), {sequences} sequences of {len} steps");
    let started = Instant::now();
    let (mut done, mut commands, mut huge) = (0u64, 0usize, 0usize);
    let mut report_at = Duration::from_secs(60);
    for i in 0..sequences {
        if budget.is_some_and(|b| started.elapsed() > b) {
            break;
        }
        if started.elapsed() > report_at {
            eprintln!("differential: {done} sequences, {commands} commands so far");
            report_at += Duration::from_secs(60);
        }
        let seed = base.wrapping_add(i);
        let steps = Gen { rng: StdRng::seed_from_u64(seed) }.sequence(len);
        if let Some(d) = first_difference(&mut redis, &steps) {
            eprintln!("seed {seed}: step {} differs; shrinking", d.step);
            let (short, d) = shrink(&mut redis, &steps, d.step);
            panic!(
                "bitsled differs from Redis (seed {seed}; BITSLED_DIFF_SEED={seed} BITSLED_DIFF_SEQUENCES=1 \
                 BITSLED_DIFF_STEPS={len} cargo test --test differential bitsled_replies_like_redis replays it); \
                 shortest failing sequence ({} steps):\n{}\nRedis:   {}\nbitsled: {}",
                short.len(),
                render(&short),
                shorten(&d.redis),
                shorten(&d.bitsled),
            );
        }
        done += 1;
        for step in &steps {
            if let Step::Cmd(_, args) = step {
                commands += 1;
                huge += usize::from(args[0] == b"SETBIT" && args.get(1).is_some_and(|k| k == HUGE));
            }
        }
    }
    eprintln!(
        "differential: {done} sequences, {commands} commands ({huge} with a bit near 2^32), no difference, in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(done > 0, "no sequence ran");
}

/// The default run: a thousand sequences of 60 steps, well under a minute.
#[test]
fn bitsled_replies_like_redis() {
    let steps = env_u64("BITSLED_DIFF_STEPS").map_or(60, |n| usize::try_from(n).expect("steps"));
    run(env_u64("BITSLED_DIFF_SEQUENCES").unwrap_or(1000), steps, None);
}

/// The long run: up to `BITSLED_DIFF_SEQUENCES` (default a million)
/// sequences of 100 steps within `BITSLED_DIFF_SECONDS` (default 600).
#[test]
#[ignore = "long: run with --ignored (bounded by BITSLED_DIFF_SECONDS)"]
fn differential_long() {
    let secs = env_u64("BITSLED_DIFF_SECONDS").unwrap_or(600);
    run(env_u64("BITSLED_DIFF_SEQUENCES").unwrap_or(1_000_000), 100, Some(Duration::from_secs(secs)));
}

/// The harness itself: the RESP reader returns whole replies of every kind,
/// and a real difference (a command bitsled does not know) is found and
/// shrunk to the one step that shows it, so a broken harness cannot pass
/// silently.
#[test]
fn harness_reads_every_reply_kind() {
    let Some(mut redis) = Redis::start() else { return };
    let a = |x: &[&[u8]]| x.iter().map(|v| v.to_vec()).collect::<Vec<_>>();
    redis.flushall();
    assert_eq!(redis.call(0, &a(&[b"SET", b"k", b"a\r\nb"])), b"+OK\r\n");
    assert_eq!(redis.call(0, &a(&[b"GET", b"k"])), b"$4\r\na\r\nb\r\n");
    assert_eq!(redis.call(1, &a(&[b"MGET", b"k", b"nope"])), b"*2\r\n$4\r\na\r\nb\r\n$-1\r\n");
    assert_eq!(redis.call(0, &a(&[b"STRLEN", b"k"])), b":4\r\n");
    assert!(redis.call(0, &a(&[b"GETBIT", b"k", b"x"])).starts_with(b"-ERR "));
    assert_eq!(bulk_of(b"$4\r\na\r\nb\r\n").unwrap(), b"a\r\nb");
    assert_eq!(quote(b"a b"), "\"a b\"");
    assert_eq!(quote(b"\x00'"), "\"\\x00\\x27\"");
    // A real difference is found and shrunk to the step that shows it.
    let steps = vec![
        Step::Cmd(0, a(&[b"SET", b"k", b"x"])),
        Step::Cmd(1, a(&[b"SETBIT", b"k2", b"3", b"1"])),
        Step::Cmd(0, a(&[b"COPY", b"k", b"k3"])),
        Step::Cmd(1, a(&[b"HSET", b"h", b"f", b"v"])),
    ];
    let d = first_difference(&mut redis, &steps).expect("bitsled has no hashes");
    assert_eq!(d.step, 3);
    let (short, _) = shrink(&mut redis, &steps, d.step);
    assert_eq!(short.len(), 1, "{}", render(&short));
}
