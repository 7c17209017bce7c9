//! A Redis-protocol (RESP2/RESP3) server over a [`Db`]: what `bitsled
//! serve` runs. A library module (it needs only `std` and `parking_lot`,
//! not the CLI's dependencies), so tests and applications can start one
//! in-process.
//!
//! ```no_run
//! # fn main() -> bitsled::Result<()> {
//! use bitsled_redis::server::{Fsync, Server, ServerConfig};
//! let config = ServerConfig::new().port(6380).fsync(Fsync::Always);
//! let db = config.db_config(bitsled::Config::new("data")).open()?;
//! let server = Server::bind(db, config)?;
//! let stop = server.shutdown_handle();
//! // ... from another thread or a signal handler: stop.shutdown();
//! server.run()?; // returns after a shutdown, with everything flushed
//! # drop(stop); Ok(()) }
//! ```
//!
//! One thread per connection reads requests, runs every complete request
//! in its buffer (pipelining), and writes their replies together. Each
//! connection owns a [`crate::command::Session`], and every command, the
//! connection and server commands included (AUTH, HELLO, CLIENT, SELECT,
//! QUIT, INFO, CONFIG, SLOWLOG, SAVE, MULTI/EXEC/DISCARD, SHUTDOWN), runs
//! through it and the command table. The server adds I/O, limits,
//! statistics and the durability policy; what the server commands need
//! from it they ask through the command layer's `Host` trait, which
//! `link.rs` implements for each connection, so this module uses
//! `command` and never the reverse, and its shared state's fields are
//! private to it. See DESIGN.md, "The server", for limits and the
//! durability policy. The policy belongs to the database
//! ([`bitsled::Durability`], set on its [`Config`]): the server reads it
//! from the [`Db`] it serves and, under [`bitsled::Durability::Always`],
//! flushes before it replies to a batch of requests with a write.

mod auth;
mod conn;
mod info;
mod limits;
mod link;
mod outbox;
mod park;
mod pubsub;
pub mod resp;
mod save;
mod settings;
mod slowlog;
mod tracking;

pub use crate::command::{parse_memory, POLICIES};
pub use auth::{
    DEFAULT_AUTH_FAILURE_DELAY, DEFAULT_AUTH_FREE_FAILURES, DEFAULT_AUTH_MAX_FAILURES, DEFAULT_AUTH_SERVER_BURST,
    DEFAULT_AUTH_SERVER_INTERVAL,
};
pub use limits::{fit_open_files, OpenFiles, RESERVED_FDS};
pub use settings::{budgets_for, LEAST_BUDGET_BYTES};
pub use slowlog::{
    DEFAULT_MAX_LEN as DEFAULT_SLOWLOG_MAX_LEN, DEFAULT_SLOWER_THAN_USEC as DEFAULT_SLOWLOG_SLOWER_THAN_USEC,
};

use std::collections::HashMap;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};

use crate::command::CommandStat;
use bitsled::Config;
use bitsled::Db;
use bitsled::Durability;
use bitsled::{Error, Result};

/// Redis's names for the durability policies (`--fsync`, `appendfsync`):
/// each is one [`Durability`] of the database.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fsync {
    /// [`Durability::Always`]: a reply to a write is sent only after a
    /// [`Db::flush`] covering it has returned (group commit: one flush for
    /// a pipelined batch, shared by concurrent clients). Nothing
    /// acknowledged is lost on a crash.
    Always,
    /// [`Durability::EverySecond`]: the database's background thread
    /// flushes once a second; a crash loses at most about the last second
    /// (plus one write-back's time).
    EverySec,
    /// [`Durability::Lazy`]: no barrier from the server, and the background
    /// flush runs every [`NO_FSYNC_INTERVAL`]. A crash loses up to that
    /// interval.
    No,
}

/// The background flush interval under [`Fsync::No`]
/// ([`Durability::Lazy`]'s).
pub const NO_FSYNC_INTERVAL: Duration = bitsled::LAZY_FLUSH_INTERVAL;

impl From<Fsync> for Durability {
    fn from(fsync: Fsync) -> Durability {
        match fsync {
            Fsync::Always => Durability::Always,
            Fsync::EverySec => Durability::EverySecond,
            Fsync::No => Durability::Lazy,
        }
    }
}

impl From<Durability> for Fsync {
    fn from(durability: Durability) -> Fsync {
        match durability {
            Durability::Always => Fsync::Always,
            Durability::EverySecond => Fsync::EverySec,
            Durability::Lazy => Fsync::No,
        }
    }
}

impl Fsync {
    /// The name used by `--fsync` and `CONFIG GET appendfsync`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Fsync::Always => "always",
            Fsync::EverySec => "everysec",
            Fsync::No => "no",
        }
    }
}

impl std::str::FromStr for Fsync {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Fsync, String> {
        match s.to_ascii_lowercase().as_str() {
            "always" => Ok(Fsync::Always),
            "everysec" => Ok(Fsync::EverySec),
            "no" => Ok(Fsync::No),
            _ => Err(format!("unknown fsync policy {s:?} (always, everysec or no)")),
        }
    }
}

/// Default length of the queue of connections waiting to be accepted, as
/// Redis's `tcp-backlog` (511).
pub const DEFAULT_TCP_BACKLOG: u32 = 511;

/// Default number of simultaneous clients (Redis's `maxclients`).
pub const DEFAULT_MAX_CLIENTS: usize = 10_000;

/// Default limit of reply bytes waiting for a client that does not read:
/// past it the client is disconnected. 1 GiB, room for the largest value
/// (512 MiB) twice.
pub const DEFAULT_MAX_PENDING_REPLY_BYTES: usize = 1 << 30;

/// Configuration of a [`Server`]; setters take and return it by value.
#[derive(Clone, Debug)]
#[must_use]
pub struct ServerConfig {
    bind: IpAddr,
    port: u16,
    requirepass: Option<Vec<u8>>,
    max_clients: usize,
    fsync: Fsync,
    maxmemory: u64,
    keyspace_events: u32,
    timeout: Option<Duration>,
    protected_mode: bool,
    max_pending_reply_bytes: usize,
    slowlog_slower_than_usec: i64,
    slowlog_max_len: u64,
    auth_limits: auth::AuthLimits,
    tcp_backlog: u32,
    cluster_enabled: bool,
    replicaof: Option<(String, u16)>,
    masterauth: Option<Vec<u8>>,
    repl_backlog_bytes: usize,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig::new()
    }
}

impl ServerConfig {
    /// Defaults: bind 127.0.0.1, port 6380, no password, 10,000 clients,
    /// `everysec`, no idle timeout, protected mode on, 1 GiB of pending
    /// replies per client, Redis's slow log settings (10,000 µs, 128
    /// entries), failed authentications limited as
    /// [`ServerConfig::auth_failures_per_client`] and
    /// [`ServerConfig::auth_failures_per_server`] say.
    pub fn new() -> ServerConfig {
        ServerConfig {
            bind: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 6380,
            requirepass: None,
            max_clients: DEFAULT_MAX_CLIENTS,
            fsync: Fsync::EverySec,
            maxmemory: 0,
            keyspace_events: 0,
            timeout: None,
            protected_mode: true,
            max_pending_reply_bytes: DEFAULT_MAX_PENDING_REPLY_BYTES,
            slowlog_slower_than_usec: slowlog::DEFAULT_SLOWER_THAN_USEC,
            slowlog_max_len: slowlog::DEFAULT_MAX_LEN,
            auth_limits: auth::AuthLimits::default(),
            tcp_backlog: DEFAULT_TCP_BACKLOG,
            cluster_enabled: false,
            replicaof: None,
            masterauth: None,
            repl_backlog_bytes: crate::replication::DEFAULT_BACKLOG_BYTES,
        }
    }

    /// Redis's `replicaof host port`: start as a replica of that master
    /// (a bitsled server), which the store then follows (DESIGN.md
    /// section 10, "Replication"). Default: a master.
    pub fn replicaof(mut self, master: Option<(String, u16)>) -> ServerConfig {
        self.replicaof = master;
        self
    }

    /// Redis's `masterauth`: the password a replica gives its master.
    pub fn masterauth(mut self, password: Option<Vec<u8>>) -> ServerConfig {
        self.masterauth = password;
        self
    }

    /// Redis's `repl-backlog-size`: bytes of the change feed a master
    /// keeps for replicas that reconnect. Default
    /// [`crate::replication::DEFAULT_BACKLOG_BYTES`].
    pub fn repl_backlog_bytes(mut self, bytes: usize) -> ServerConfig {
        self.repl_backlog_bytes = bytes;
        self
    }

    /// Redis's `cluster-enabled`: serve as a node of a cluster (key slots,
    /// `MOVED` redirections, the CLUSTER and CLUSTERX commands), with the
    /// topology a controller pushes (DESIGN.md, "Cluster"), kept in the
    /// database directory's `cluster-nodes.conf`. Default off.
    pub fn cluster_enabled(mut self, enabled: bool) -> ServerConfig {
        self.cluster_enabled = enabled;
        self
    }

    /// Redis's `tcp-backlog`: how many connections the kernel queues for
    /// the server to accept (capped by the kernel's
    /// `net.core.somaxconn`). A full queue drops new connection attempts,
    /// which clients see as a connect taking a second or more (the SYN
    /// is retried). Default [`DEFAULT_TCP_BACKLOG`].
    pub fn tcp_backlog(mut self, backlog: u32) -> ServerConfig {
        self.tcp_backlog = backlog;
        self
    }

    /// The slow log's settings, as Redis's `slowlog-log-slower-than`
    /// (microseconds; negative logs nothing, 0 every command) and
    /// `slowlog-max-len`. CONFIG SET changes both at run time.
    pub fn slowlog(mut self, slower_than_usec: i64, max_len: u64) -> ServerConfig {
        self.slowlog_slower_than_usec = slower_than_usec;
        self.slowlog_max_len = max_len;
        self
    }

    /// The address to listen on. Default 127.0.0.1.
    pub fn bind(mut self, addr: IpAddr) -> ServerConfig {
        self.bind = addr;
        self
    }

    /// The TCP port; 0 picks a free one ([`Server::local_addr`] tells
    /// which). Default 6380.
    pub fn port(mut self, port: u16) -> ServerConfig {
        self.port = port;
        self
    }

    /// The password clients must give (AUTH or HELLO ... AUTH) before any
    /// other command. Default none.
    pub fn requirepass(mut self, password: Option<Vec<u8>>) -> ServerConfig {
        self.requirepass = password.filter(|p| !p.is_empty());
        self
    }

    /// The most simultaneous clients; one more gets `ERR max number of
    /// clients reached` and is disconnected. Default
    /// [`DEFAULT_MAX_CLIENTS`].
    pub fn max_clients(mut self, n: usize) -> ServerConfig {
        self.max_clients = n;
        self
    }

    /// The durability policy to open the database with:
    /// [`ServerConfig::db_config`] sets it on the database's
    /// configuration. The server follows the policy of the [`Db`] it is
    /// given ([`Db::durability`]). Default [`Fsync::EverySec`].
    pub fn fsync(mut self, fsync: Fsync) -> ServerConfig {
        self.fsync = fsync;
        self
    }

    /// Redis's `maxmemory`: the memory limit, bytes (0: none).
    /// [`ServerConfig::db_config`] sizes the database's budgets to it
    /// ([`budgets_for`]); writes that may use memory are refused (`-OOM`) while the server's memory (INFO
    /// `used_memory`) is past it after the database made what room it
    /// could. CONFIG SET changes it at run time. Default 0.
    pub fn maxmemory(mut self, bytes: u64) -> ServerConfig {
        self.maxmemory = bytes;
        self
    }

    /// Redis's `notify-keyspace-events`: the classes of keyspace events
    /// published (its flag letters, e.g. `KEA`, `Ex`; empty: none).
    /// CONFIG SET changes it at run time. Default none.
    ///
    /// # Errors
    /// Redis's text for a letter it does not know.
    pub fn notify_keyspace_events(mut self, classes: &str) -> std::result::Result<ServerConfig, String> {
        self.keyspace_events = crate::command::parse_keyspace_events(classes.as_bytes())
            .ok_or_else(|| "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".to_string())?;
        Ok(self)
    }

    /// Disconnect a client idle (nothing received, or a reply not taken)
    /// for this long; `None` never does. CONFIG SET `timeout` changes it
    /// at run time. Default `None`.
    pub fn timeout(mut self, timeout: Option<Duration>) -> ServerConfig {
        self.timeout = timeout.filter(|t| !t.is_zero());
        self
    }

    /// Whether to refuse binding a non-loopback address without a
    /// password. Default true.
    pub fn protected_mode(mut self, on: bool) -> ServerConfig {
        self.protected_mode = on;
        self
    }

    /// Reply bytes that may wait for a client that does not read before it
    /// is disconnected. Default [`DEFAULT_MAX_PENDING_REPLY_BYTES`].
    pub fn max_pending_reply_bytes(mut self, bytes: usize) -> ServerConfig {
        self.max_pending_reply_bytes = bytes;
        self
    }

    /// The per-connection limit on failed authentications (AUTH or HELLO
    /// ... AUTH with a wrong password): the first `free` on a connection
    /// are answered at once, each further one holds the connection for
    /// `delay` before its reply, and the `max`th closes the connection
    /// after its reply (`max` 0: never). A correct password is never held.
    /// Default [`DEFAULT_AUTH_FREE_FAILURES`] (10),
    /// [`DEFAULT_AUTH_FAILURE_DELAY`] (50 ms), [`DEFAULT_AUTH_MAX_FAILURES`]
    /// (100).
    pub fn auth_failures_per_client(mut self, free: u32, delay: Duration, max: u32) -> ServerConfig {
        self.auth_limits.client_free = free;
        self.auth_limits.client_delay = delay;
        self.auth_limits.client_max = max;
        self
    }

    /// The server-wide limit on failed authentications, over all
    /// connections: `burst` are answered at once, then one per `interval`
    /// (a failure past that waits for its turn, holding its connection; a
    /// zero `interval` disables the limit). A correct password neither
    /// waits nor uses the budget. Default [`DEFAULT_AUTH_SERVER_BURST`]
    /// (100) and [`DEFAULT_AUTH_SERVER_INTERVAL`] (10 ms: 100 a second).
    pub fn auth_failures_per_server(mut self, burst: u32, interval: Duration) -> ServerConfig {
        self.auth_limits.server_burst = burst;
        self.auth_limits.server_interval = interval;
        self
    }

    /// `db` with the durability policy chosen by [`ServerConfig::fsync`]
    /// ([`Config::durability`]), which also sets the background flush, and
    /// with budgets sized to [`ServerConfig::maxmemory`] if one is set.
    pub fn db_config(&self, db: Config) -> Config {
        let db = db.durability(self.fsync.into());
        if self.maxmemory == 0 {
            return db;
        }
        let (cache, dirty, store) = budgets_for(self.maxmemory);
        db.cache_bytes(cache).dirty_bytes(dirty).store_cache_bytes(store)
    }
}

/// Counters for INFO stats and commandstats.
#[derive(Default)]
struct Stats {
    connections_received: AtomicU64,
    rejected_connections: AtomicU64,
    commands_processed: AtomicU64,
    net_input_bytes: AtomicU64,
    net_output_bytes: AtomicU64,
    flushes: AtomicU64,
    flush_failures: AtomicU64,
    /// Failed AUTH and HELLO AUTH attempts (INFO stats
    /// `acl_access_denied_auth` and `auth_failures`).
    auth_failures: AtomicU64,
    /// Per command (its table name): calls, microseconds, failed calls.
    commands: Mutex<HashMap<&'static str, CommandStat>>,
    /// Error replies by code (INFO errorstats).
    errors: Mutex<HashMap<String, u64>>,
}

impl Stats {
    /// CONFIG RESETSTAT: the counters of commands, errors, connections and
    /// network bytes start again from zero (the flush counters are kept).
    fn reset(&self) {
        self.commands.lock().clear();
        self.errors.lock().clear();
        self.commands_processed.store(0, Ordering::Relaxed);
        self.connections_received.store(0, Ordering::Relaxed);
        self.rejected_connections.store(0, Ordering::Relaxed);
        self.net_input_bytes.store(0, Ordering::Relaxed);
        self.net_output_bytes.store(0, Ordering::Relaxed);
    }
}

/// What CLIENT LIST shows about a connection, shared with other threads.
struct ClientInfo {
    id: u64,
    addr: SocketAddr,
    laddr: SocketAddr,
    created: Instant,
    name: Mutex<Option<Vec<u8>>>,
    last_cmd: Mutex<&'static str>,
    last_active: Mutex<Instant>,
    resp: AtomicUsize,
    /// The selected database (SELECT).
    db: AtomicU32,
    /// Its buffers, as its thread last published them.
    buffers: ClientBuffers,
    /// The connection's socket: its connection reads and writes it, and
    /// others shut it down (CLIENT KILL, shutdown) or send on it (through
    /// the outbox). One descriptor per client, as in Redis.
    stream: TcpStream,
    /// What waits to be sent on the connection: its replies and the
    /// messages publishers deliver.
    outbox: Mutex<outbox::Outbox>,
    /// Its subscriptions: channels, patterns, shard channels.
    subs: [AtomicUsize; 3],
}

impl ClientInfo {
    /// Whether the client is subscribed to anything (CLIENT LIST's `P`
    /// flag, CLIENT KILL's `TYPE pubsub`).
    fn subscribed(&self) -> bool {
        self.subs.iter().any(|n| n.load(Ordering::Relaxed) > 0)
    }
}

/// A connection's buffers, for CLIENT LIST and the server's memory count
/// (bytes; published by the connection's thread, read by any).
#[derive(Default)]
struct ClientBuffers {
    /// Received bytes not yet run (the running request included).
    qbuf: AtomicUsize,
    /// Room left in the input buffer.
    qbuf_free: AtomicUsize,
    /// Arguments of the command running now (0 between commands).
    argv_mem: AtomicUsize,
    /// Commands queued by MULTI.
    multi_mem: AtomicUsize,
    /// Reply bytes not yet sent (CLIENT LIST shows them as `obl`, `omem`
    /// and `rbp`: bitsled holds replies in one buffer, not a buffer and a
    /// list, and keeps no peak).
    obl: AtomicUsize,
    /// The reply buffer's allocation (`rbs`).
    rbs: AtomicUsize,
    /// All of the connection's memory: its buffers, its queued commands and
    /// its own structures.
    tot_mem: AtomicUsize,
}

/// The flush at shutdown. Short of disk space, it tries again every
/// second, saying so every 10 s, instead of dropping the changes held in
/// memory (Redis likewise refuses to shut down while it cannot save).
fn final_flush(db: &Db) -> Result<()> {
    let mut said: Option<Instant> = None;
    loop {
        match db.flush() {
            Err(e @ bitsled::Error::DiskFull { .. }) => {
                if said.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
                    eprintln!("bitsled serve: {e}; waiting for space to write what is in memory");
                    said = Some(Instant::now());
                }
                std::thread::sleep(Duration::from_secs(1));
            }
            r => return r,
        }
    }
}

/// Group commit under [`Durability::Always`]: writers take a ticket after their
/// writes; one of them flushes for everyone whose ticket is covered.
#[derive(Default)]
struct Committer {
    /// Tickets handed out (writes completed before each).
    issued: AtomicU64,
    state: Mutex<CommitState>,
    done: Condvar,
}

#[derive(Default)]
struct CommitState {
    durable: u64,
    flushing: bool,
    /// Set by a failed flush: every ticket waiting or later fails.
    failed: Option<String>,
}

impl Committer {
    /// Waits until everything done before this call is durable, flushing
    /// `db` or riding on a concurrent flush.
    fn commit(&self, db: &Db, stats: &Stats) -> std::result::Result<(), String> {
        // Writes that completed before this point are covered by any flush
        // that starts after a ticket at least this high was issued.
        let ticket = self.issued.fetch_add(1, Ordering::SeqCst) + 1;
        let mut st = self.state.lock();
        loop {
            if let Some(why) = &st.failed {
                return Err(why.clone());
            }
            if st.durable >= ticket {
                return Ok(());
            }
            if !st.flushing {
                break;
            }
            self.done.wait(&mut st);
        }
        st.flushing = true;
        let target = self.issued.load(Ordering::SeqCst);
        drop(st);
        let result = db.flush();
        stats.flushes.fetch_add(1, Ordering::Relaxed);
        let mut st = self.state.lock();
        st.flushing = false;
        let out = match result {
            Ok(()) => {
                st.durable = st.durable.max(target);
                Ok(())
            }
            Err(e) => {
                stats.flush_failures.fetch_add(1, Ordering::Relaxed);
                let text = crate::command::error_text(&e);
                // A shortage of disk space lifts when space is freed: only
                // this flush's waiters fail (later ones try again).
                let lasting = !matches!(e, bitsled::Error::DiskFull { .. });
                if lasting {
                    st.failed = Some(text.clone());
                }
                Err(text)
            }
        };
        self.done.notify_all();
        out
    }
}

/// State shared by the listener and every connection.
struct Shared {
    db: Db,
    config: ServerConfig,
    local_addr: SocketAddr,
    started: Instant,
    stats: Stats,
    slowlog: slowlog::SlowLog,
    /// What CONFIG SET changes (besides the slow log and appendfsync).
    settings: settings::Settings,
    saves: save::Saves,
    committer: Committer,
    /// The server-wide limit on failed authentications.
    auth_budget: auth::FailureBudget,
    /// Normal commands hold it shared, EXEC exclusively: a transaction runs
    /// with no other client's command between its commands.
    exec_lock: RwLock<()>,
    /// Pub/sub subscriptions.
    pubsub: pubsub::PubSub,
    /// The cluster state, in cluster mode.
    cluster: Option<Arc<crate::cluster::Cluster>>,
    /// Master or replica: the replication state.
    replication: Arc<crate::replication::Replication>,
    /// Client-side caching.
    tracking: tracking::Tracking,
    clients: Mutex<HashMap<u64, Arc<ClientInfo>>>,
    /// The sum of the connections' `tot-mem`s, kept by each as it
    /// publishes its own (so the memory check costs no walk of the list).
    clients_mem: AtomicUsize,
    /// Connections open (running or parked); `run` waits for zero at
    /// shutdown.
    active: Mutex<usize>,
    /// The threads connections run on.
    pool: Arc<park::Pool>,
    /// Idle connections, waiting without a thread.
    parking: park::Parking,
    idle: Condvar,
    next_id: AtomicU64,
    shutting_down: AtomicBool,
}

/// A connection counted in the server's `active` total; dropping it (the
/// connection ended, however) takes it out and wakes a shutdown waiting
/// for zero.
struct ActiveSlot(Arc<Shared>);

impl Drop for ActiveSlot {
    fn drop(&mut self) {
        let mut active = self.0.active.lock();
        *active -= 1;
        self.0.idle.notify_all();
    }
}

impl Shared {
    /// The memory of every connection (the sum of their `tot-mem`s).
    fn clients_bytes(&self) -> u64 {
        u64::try_from(self.clients_mem.load(Ordering::Relaxed)).unwrap_or(u64::MAX)
    }

    /// Starts the shutdown: no new connections, every connection's reading
    /// side closed (each finishes what it has read and exits).
    fn begin_shutdown(&self) {
        if self.shutting_down.swap(true, Ordering::SeqCst) {
            return;
        }
        // Wake the accept loop with a connection of our own.
        let mut wake = self.local_addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
                SocketAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
            });
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        for c in self.clients.lock().values() {
            let _ = c.stream.shutdown(Shutdown::Read);
        }
    }
}

/// A handle that stops a running [`Server`] (from a signal handler thread,
/// a test, ...). Cheap to clone.
#[derive(Clone)]
pub struct ShutdownHandle(Arc<Shared>);

impl std::fmt::Debug for ShutdownHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShutdownHandle").field("addr", &self.0.local_addr).finish()
    }
}

impl ShutdownHandle {
    /// Stops accepting connections and makes [`Server::run`] return once
    /// every connection has finished the requests it had received and the
    /// database is flushed. Returns at once; calling it again does nothing.
    pub fn shutdown(&self) {
        self.0.begin_shutdown();
    }
}

/// A bound server; [`Server::run`] serves until shut down.
pub struct Server {
    shared: Arc<Shared>,
    listener: TcpListener,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("addr", &self.shared.local_addr).finish_non_exhaustive()
    }
}

/// A listening socket on `addr` whose accept queue holds `backlog`
/// connections (the standard library's `TcpListener::bind` fixes 128).
fn listen(addr: SocketAddr, backlog: i32) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    // As the standard library does on Unix: a restarted server rebinds
    // its port while old connections linger in TIME_WAIT.
    #[cfg(unix)]
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(backlog)?;
    Ok(socket.into())
}

impl Server {
    /// Binds the listening socket.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when protected mode refuses a
    /// non-loopback address without a password; [`Error::Io`] if the
    /// address cannot be bound.
    pub fn bind(db: Db, config: ServerConfig) -> Result<Server> {
        if config.protected_mode && config.requirepass.is_none() && !config.bind.is_loopback() {
            return Err(Error::InvalidArgument(format!(
                "refusing to listen on {} without a password: set --requirepass, or disable protected mode \
                 (--protected-mode no) if the network is trusted",
                config.bind
            )));
        }
        let backlog = i32::try_from(config.tcp_backlog).unwrap_or(i32::MAX);
        let listener = listen(SocketAddr::new(config.bind, config.port), backlog)?;
        let local_addr = listener.local_addr()?;
        let slowlog = slowlog::SlowLog::new(config.slowlog_slower_than_usec, config.slowlog_max_len);
        let auth_budget = auth::FailureBudget::new(&config.auth_limits);
        let settings = settings::Settings::new(config.maxmemory, config.timeout, config.max_clients, &db);
        settings.set_keyspace_events(config.keyspace_events);
        let cluster = if config.cluster_enabled {
            let c = crate::cluster::Cluster::open(db.path(), local_addr)
                .map_err(|e| Error::InvalidArgument(format!("cluster topology: {e}")))?;
            let dropped = c
                .finish_interrupted_import(&db)
                .map_err(|e| Error::InvalidArgument(format!("cluster import left unfinished: {e}")))?;
            if dropped > 0 {
                eprintln!("bitsled serve: dropped {dropped} keys of an import that did not finish");
            }
            Some(Arc::new(c))
        } else {
            None
        };
        let replication = crate::replication::Replication::new(
            db.clone(),
            local_addr.port(),
            config.masterauth.clone(),
            config.repl_backlog_bytes,
        );
        replication.start(config.replicaof.clone()).map_err(Error::InvalidArgument)?;
        let shared = Arc::new(Shared {
            cluster,
            replication,
            settings,
            db,
            config,
            local_addr,
            started: Instant::now(),
            stats: Stats::default(),
            slowlog,
            saves: save::Saves::new(),
            committer: Committer::default(),
            auth_budget,
            exec_lock: RwLock::new(()),
            pubsub: pubsub::PubSub::default(),
            tracking: tracking::Tracking::default(),
            clients: Mutex::new(HashMap::new()),
            clients_mem: AtomicUsize::new(0),
            active: Mutex::new(0),
            pool: Arc::default(),
            parking: park::Parking::new()?,
            idle: Condvar::new(),
            next_id: AtomicU64::new(1),
            shutting_down: AtomicBool::new(false),
        });
        // Keys the database deletes because they expired raise `expired`
        // events (held weakly: the database outlives no server).
        let weak = Arc::downgrade(&shared);
        shared.db.set_expired_listener(Some(Arc::new(move |db, key| {
            let Some(shared) = weak.upgrade() else { return };
            shared.tracking.invalidate(&shared, None, &[key]);
            if shared.settings.keyspace_events() & crate::command::EXPIRED != 0 {
                let event = crate::command::KeyEvent {
                    class: crate::command::EXPIRED,
                    name: "expired",
                    key: key.to_vec(),
                    db: None,
                };
                pubsub::notify(&shared, db, &event);
            }
        })));
        Ok(Server { shared, listener })
    }

    /// The address the server listens on.
    #[must_use]
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    /// A handle that shuts this server down.
    #[must_use]
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle(Arc::clone(&self.shared))
    }

    /// Serves clients until [`ShutdownHandle::shutdown`] or a `SHUTDOWN`
    /// command; then waits for the connections to finish (at most 10 s)
    /// and flushes the database. While the disk is short of space, the
    /// flush waits for room (what is in memory is not dropped; a caller
    /// that must stop at once exits the process).
    ///
    /// # Errors
    /// [`Error::Io`] if accepting fails for a reason other than a client's
    /// own trouble; the final flush's error.
    pub fn run(self) -> Result<()> {
        let shared = &self.shared;
        let parking = park::start(shared);
        for stream in self.listener.incoming() {
            if shared.shutting_down.load(Ordering::SeqCst) {
                break;
            }
            let stream = match stream {
                Ok(s) => s,
                // A connection that failed before we took it, or a
                // transient lack of descriptors: keep serving.
                Err(e) => {
                    if matches!(e.raw_os_error(), Some(23 | 24)) {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    continue;
                }
            };
            self.accept(stream);
        }
        drop(self.listener);
        // No more of a master's changes, and no more streams to replicas.
        shared.replication.stop();
        // Connections accepted just before the flag was seen.
        for c in shared.clients.lock().values() {
            let _ = c.stream.shutdown(Shutdown::Read);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut active = shared.active.lock();
        while *active > 0 {
            if shared.idle.wait_until(&mut active, deadline).timed_out() {
                break;
            }
        }
        drop(active);
        // Closes what is still parked.
        shared.parking.stop();
        if let Some(thread) = parking {
            let _ = thread.join();
        }
        final_flush(&shared.db)
    }

    fn accept(&self, mut stream: TcpStream) {
        let shared = &self.shared;
        shared.stats.connections_received.fetch_add(1, Ordering::Relaxed);
        let _ = stream.set_nodelay(true);
        {
            let mut active = shared.active.lock();
            if *active >= shared.settings.max_clients() {
                drop(active);
                shared.stats.rejected_connections.fetch_add(1, Ordering::Relaxed);
                let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
                let _ = stream.write_all(b"-ERR max number of clients reached\r\n");
                return;
            }
            *active += 1;
        }
        let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
        let Some(conn) = conn::open(shared, stream, id, ActiveSlot(Arc::clone(shared))) else { return };
        // Parked until its first request, so that accepting never waits for
        // a thread; without the parking thread, a pool thread takes it, and
        // without a thread it is closed.
        if let Err(conn) = shared.parking.park(conn) {
            if let Err(conn) = park::submit(shared, conn) {
                conn::close(conn);
            }
        }
    }
}
