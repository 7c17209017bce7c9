//! What the command layer asks of the server behind a session: the
//! [`Host`] trait. The server implements it for each connection; the
//! command layer sees nothing else of the server, so the crate's
//! dependency runs one way (`server` uses `command`, never the reverse).
//! A session without a host (the CLI's) answers the server commands with
//! an error, and INFO describes the database alone.

use std::net::SocketAddr;
use std::sync::Arc;

use parking_lot::RwLock;

use super::{Proto, Reply};

/// Where a client is connected from and to, and its id: what CLIENT
/// KILL's filters look at.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ClientAddr {
    /// The client's id.
    pub(crate) id: u64,
    /// The client's address (`ADDR`).
    pub(crate) addr: SocketAddr,
    /// The server's address of the connection (`LADDR`).
    pub(crate) laddr: SocketAddr,
    /// Whether it is subscribed to anything (`TYPE pubsub`).
    pub(crate) pubsub: bool,
}

/// A checked `CONFIG SET` value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Setting {
    /// `maxclients`, `slowlog-*`, `timeout`.
    Int(i64),
    /// `maxmemory`, bytes.
    Bytes(u64),
    /// `notify-keyspace-events`: the event class bits.
    Events(u32),
    /// `appendfsync`, `maxmemory-policy`: the lower-case name.
    Name(&'static str),
}

/// The server's side of INFO memory.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HostMemory {
    /// Bytes the clients' buffers and state take.
    pub(crate) clients_bytes: u64,
    /// `maxmemory` (0: none).
    pub(crate) maxmemory: u64,
    /// `maxmemory-policy`.
    pub(crate) policy: &'static str,
}

impl Default for HostMemory {
    /// Without a server: no clients, no limit.
    fn default() -> HostMemory {
        HostMemory { clients_bytes: 0, maxmemory: 0, policy: "noeviction" }
    }
}

/// The namespace of a pub/sub subscription.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum SubKind {
    /// A channel (SUBSCRIBE).
    Channel,
    /// A glob-style pattern of channels (PSUBSCRIBE).
    Pattern,
    /// A shard channel (SSUBSCRIBE): a namespace of its own, counted apart
    /// from the other two.
    Shard,
}

impl SubKind {
    /// Every kind, in the order RESET and a closing connection drop them.
    pub(crate) const ALL: [SubKind; 3] = [SubKind::Channel, SubKind::Shard, SubKind::Pattern];

    /// The first element of a subscription's confirmation.
    pub(crate) fn subscribed(self) -> &'static str {
        match self {
            SubKind::Channel => "subscribe",
            SubKind::Pattern => "psubscribe",
            SubKind::Shard => "ssubscribe",
        }
    }

    /// The first element of an unsubscription's confirmation.
    pub(crate) fn unsubscribed(self) -> &'static str {
        match self {
            SubKind::Channel => "unsubscribe",
            SubKind::Pattern => "punsubscribe",
            SubKind::Shard => "sunsubscribe",
        }
    }
}

/// A client's CLIENT TRACKING options (while tracking is on).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TrackingOptions {
    /// The client invalidations go to instead (`REDIRECT`); `None`: this
    /// one.
    pub(crate) redirect: Option<u64>,
    /// Broadcasting mode: invalidations for every key under a prefix.
    pub(crate) bcast: bool,
    /// The prefixes of broadcasting mode (empty: the empty prefix, every
    /// key), sorted.
    pub(crate) prefixes: Vec<Vec<u8>>,
    /// Keys read are tracked only after `CLIENT CACHING yes`.
    pub(crate) optin: bool,
    /// Keys read are tracked unless after `CLIENT CACHING no`.
    pub(crate) optout: bool,
    /// No invalidations for this client's own writes.
    pub(crate) noloop: bool,
}

/// One `T` per subscription kind: a session's own subscriptions, the
/// server's subscribers by name.
#[derive(Debug, Default)]
pub(crate) struct ByKind<T> {
    pub(crate) channels: T,
    pub(crate) patterns: T,
    pub(crate) shard: T,
}

impl<T> ByKind<T> {
    pub(crate) fn of(&self, kind: SubKind) -> &T {
        match kind {
            SubKind::Channel => &self.channels,
            SubKind::Pattern => &self.patterns,
            SubKind::Shard => &self.shard,
        }
    }

    pub(crate) fn of_mut(&mut self, kind: SubKind) -> &mut T {
        match kind {
            SubKind::Channel => &mut self.channels,
            SubKind::Pattern => &mut self.patterns,
            SubKind::Shard => &mut self.shard,
        }
    }
}

/// Why SAVE did not make the data durable.
#[derive(Debug)]
pub(crate) enum SaveFailed {
    /// A background save runs.
    Busy,
    /// The flush failed, with its error.
    Flush(String),
}

/// What BGSAVE did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bgsave {
    /// A save started on a thread of its own.
    Started,
    /// One is running; another follows it (`BGSAVE SCHEDULE`).
    Scheduled,
    /// One is running and none was scheduled.
    Busy,
}

/// The server behind one client's session. Every method is about this
/// client's connection or the server as a whole; none hands out the
/// server's state, except the transaction lock, which the session takes
/// itself because only it knows when a command's time starts and ends.
///
/// `Send + Sync` so that a [`super::Session`] stays both.
pub(crate) trait Host: Send + Sync {
    /// This client's id (CLIENT ID, HELLO).
    fn client_id(&self) -> u64;

    /// The password clients must give before other commands, if any.
    fn requirepass(&self) -> Option<&[u8]>;

    /// Records this client's name (`None`: no name) for CLIENT LIST.
    fn set_client_name(&self, name: Option<&[u8]>);

    /// Records this client's protocol for CLIENT LIST.
    fn set_client_proto(&self, proto: Proto);

    /// Records this client's selected database for CLIENT LIST.
    fn set_client_db(&self, index: u32);

    /// CLIENT INFO: this client's line. `multi` is the number of commands
    /// it has queued when it is in a transaction, `cmd` the command it runs
    /// (the other clients' last commands are published after each batch).
    fn client_info(&self, multi: Option<usize>, cmd: &str) -> String;

    /// CLIENT LIST: every client's line, by id; `multi` and `cmd` are this
    /// client's (the others' `multi` is not known).
    fn client_list(&self, multi: Option<usize>, cmd: &str) -> String;

    /// CLIENT KILL: closes at once every other client for which `matches`
    /// holds (it leaves the client list before this returns) and returns
    /// the ids of all that matched, this client's own included: closing
    /// this connection, after its reply, is the caller's to do.
    fn kill_clients(&self, matches: &dyn Fn(&ClientAddr) -> bool) -> Vec<u64>;

    /// The server-wide transaction lock: every command but EXEC runs
    /// holding it shared, EXEC holds it exclusively, so no other client's
    /// command runs between a transaction's commands.
    fn transaction_lock(&self) -> &RwLock<()>;

    /// Hands a finished command (its arguments, its duration in
    /// microseconds, the client's name) to the slow log, which keeps it if
    /// it was slow enough.
    fn log_command(&self, args: &[Vec<u8>], usec: u64, client_name: &[u8]);

    /// SLOWLOG GET: the newest `count` entries (`None`: all).
    fn slowlog_get(&self, count: Option<usize>) -> Reply;

    /// SLOWLOG LEN.
    fn slowlog_len(&self) -> usize;

    /// SLOWLOG RESET.
    fn slowlog_reset(&self);

    /// CONFIG SET of one parameter, its value checked by the command layer
    /// (its kind and range).
    ///
    /// # Errors
    /// Why the server could not apply it (the text after Redis's
    /// `CONFIG SET failed ... - `).
    fn set_config(&self, name: &str, value: Setting) -> Result<(), String>;

    /// Whether a command that may use memory is refused now (`-OOM`):
    /// `maxmemory` is set and the server's
    /// memory is past it even after the database made what room it could.
    fn out_of_memory(&self) -> bool;

    /// The server's side of INFO memory.
    fn memory(&self) -> HostMemory;

    /// The text of INFO section `name` when it is one of the server's
    /// (server, clients, persistence, stats, errorstats, commandstats);
    /// `None` for any other.
    fn info_section(&self, name: &str) -> Option<String>;

    /// CONFIG GET: every parameter the server reports, with its value.
    fn config(&self) -> Vec<(&'static str, String)>;

    /// CONFIG RESETSTAT: clears the server's statistics.
    fn reset_stats(&self);

    /// SAVE: makes everything written so far durable before returning.
    ///
    /// # Errors
    /// [`SaveFailed::Busy`] while a background save runs; the flush's
    /// error.
    fn save(&self) -> Result<(), SaveFailed>;

    /// BGSAVE: starts the same on a thread of its own, unless one runs
    /// (then another follows it if `schedule`).
    ///
    /// # Errors
    /// The thread could not be started.
    fn bgsave(&self, schedule: bool) -> std::io::Result<Bgsave>;

    /// LASTSAVE: the Unix time of the last successful save (the server's
    /// start before any).
    fn last_save_secs(&self) -> u64;

    /// Adds this client to the subscribers of `name` (a channel, pattern
    /// or shard channel); the session keeps its own list, so this is
    /// called once per new subscription.
    fn subscribe(&self, kind: SubKind, name: &[u8]);

    /// Removes this client from the subscribers of `name`.
    fn unsubscribe(&self, kind: SubKind, name: &[u8]);

    /// PUBLISH (`shard` false) or SPUBLISH: delivers `message` to every
    /// subscriber of `channel` (and, for PUBLISH, of every pattern matching
    /// it, once per pattern); returns how many deliveries were made.
    fn publish(&self, shard: bool, channel: &[u8], message: &[u8]) -> usize;

    /// PUBSUB CHANNELS / SHARDCHANNELS: the channels with at least one
    /// subscriber, those matching `pattern` if given.
    fn pubsub_channels(&self, shard: bool, pattern: Option<&[u8]>) -> Vec<Vec<u8>>;

    /// PUBSUB NUMSUB / SHARDNUMSUB: the subscribers of `channel` (pattern
    /// subscriptions not counted).
    fn pubsub_numsub(&self, shard: bool, channel: &[u8]) -> usize;

    /// PUBSUB NUMPAT: the number of distinct patterns subscribed to.
    fn pubsub_numpat(&self) -> usize;

    /// The keyspace event classes enabled (`notify-keyspace-events`; 0:
    /// none).
    fn keyspace_events(&self) -> u32;

    /// Publishes `event` of database `db` (its keyspace and keyevent
    /// messages, as the classes enabled say).
    fn notify(&self, db: u32, event: &super::notify::Event);

    /// Turns CLIENT TRACKING on with `options` (replacing the previous
    /// ones) or off (`None`) for this client.
    fn set_tracking(&self, options: Option<&TrackingOptions>);

    /// Whether any client has tracking on (the only case in which the
    /// dispatcher tells the server about keys read and written).
    fn tracking_active(&self) -> bool;

    /// Whether a write's keyspace events are wanted: events are enabled or
    /// some client tracks keys (one question per command).
    fn events_wanted(&self) -> bool;

    /// Whether client `id` is connected (a REDIRECT target must be).
    fn client_exists(&self, id: u64) -> bool;

    /// Whether this client's REDIRECT target has gone (CLIENT TRACKINGINFO's
    /// `broken_redirect`).
    fn tracking_redirect_broken(&self) -> bool;

    /// Remembers that this client may cache `keys` (read by a read-only
    /// command).
    fn track_keys(&self, keys: &[&[u8]]);

    /// `keys` were written by this client: invalidates them for every
    /// client tracking them (the tracking of a key ends with its
    /// invalidation).
    fn invalidate_keys(&self, keys: &[&[u8]]);

    /// A database was emptied: every tracking client drops everything.
    fn invalidate_all(&self);

    /// SHUTDOWN: makes everything acknowledged durable, then starts
    /// stopping the server. A failed flush stops nothing.
    ///
    /// # Errors
    /// The flush's error.
    fn shutdown(&self) -> bitsled::Result<()>;

    /// The server's cluster state, in cluster mode.
    fn cluster(&self) -> Option<&Arc<crate::cluster::Cluster>>;

    /// The server's replication state.
    fn replication(&self) -> &Arc<crate::replication::Replication>;

    /// A second handle on the client's socket and the client's address
    /// (PSYNC hands the connection to a replication stream).
    fn socket(&self) -> std::io::Result<(std::net::TcpStream, std::net::IpAddr)>;
}
