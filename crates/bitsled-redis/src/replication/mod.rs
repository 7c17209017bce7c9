//! Replication between bitsled servers: `REPLICAOF`, the master's side of
//! `PSYNC`, `WAIT`, `ROLE` and INFO's replication section (DESIGN.md
//! section 10, "Replication").
//!
//! What moves is the store, not commands: a master keeps a change feed
//! of the batches its write-backs apply (`bitsled::replication`), a
//! replica loads a snapshot of the master's store and then applies the
//! feed's frames. Offsets are the feed's bytes, as Redis's replication
//! offsets are. Only bitsled replicas are served (`REPLCONF capa
//! bitsled`); a Redis replica's `PSYNC` is refused.

mod master;
mod replica;
pub(crate) mod wire;

use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hasher};
use std::net::{IpAddr, Shutdown, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bitsled::Db;
use parking_lot::{Condvar, Mutex};

/// Redis's default `repl-backlog-size` is 1 MiB of commands; a frame
/// holds a write-back's pages, so bitsled keeps more.
pub const DEFAULT_BACKLOG_BYTES: usize = 64 << 20;

/// The replication state of a server.
pub struct Replication {
    db: Db,
    /// This server's port, which it announces to a master.
    port: u16,
    /// The password a replica gives its master (`masterauth`).
    masterauth: Option<Vec<u8>>,
    backlog_bytes: AtomicUsize,
    inner: Mutex<Inner>,
    /// Signalled when a replica acknowledges an offset (WAIT).
    acked: Condvar,
    /// When the streams to replicas last wrote back (see
    /// [`Replication::write_back_if_due`]).
    last_write_back: Mutex<Instant>,
}

struct Inner {
    /// This server's replication id, while it is a master.
    replid: String,
    /// The offset a feed starts from when one is first kept (a promoted
    /// replica goes on from the offset it reached).
    base: u64,
    /// The link to the master, while this server is a replica.
    link: Option<Arc<replica::Link>>,
    /// Connected replicas, by client id.
    replicas: BTreeMap<u64, Follower>,
}

/// A replica connected to this master.
struct Follower {
    addr: IpAddr,
    /// The port it listens on (`REPLCONF listening-port`).
    port: u16,
    /// The offset it last acknowledged.
    ack: u64,
    /// Whether its full sync has been sent.
    online: bool,
    last_ack: Instant,
    stream: TcpStream,
}

/// A 40-character hexadecimal replication id, as Redis's.
pub(crate) fn new_replid() -> String {
    let state = std::collections::hash_map::RandomState::new();
    let mut id = String::new();
    for i in 0..3u64 {
        let mut h = state.build_hasher();
        h.write_u64(i);
        h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos());
        id.push_str(&format!("{:016x}", h.finish()));
    }
    id.truncate(40);
    id
}

/// What ROLE answers.
pub(crate) enum Role {
    /// A master: its offset, and (ip, port, acknowledged offset) per replica.
    Master(u64, Vec<(String, u16, u64)>),
    /// A replica: master host and port, link state, offset.
    Replica(String, u16, &'static str, u64),
}

impl Replication {
    /// The state of a server listening on `port`.
    #[must_use]
    pub fn new(db: Db, port: u16, masterauth: Option<Vec<u8>>, backlog_bytes: usize) -> Arc<Replication> {
        Arc::new(Replication {
            db,
            port,
            masterauth,
            backlog_bytes: AtomicUsize::new(backlog_bytes),
            inner: Mutex::new(Inner { replid: new_replid(), base: 0, link: None, replicas: BTreeMap::new() }),
            acked: Condvar::new(),
            last_write_back: Mutex::new(Instant::now()),
        })
    }

    /// Starts as the configuration and the store say: a replica of
    /// `replicaof`, or a master. A store that followed a master and is
    /// started without `replicaof` becomes a master with what it holds
    /// (as a restarted Redis replica without its `replicaof` does).
    ///
    /// # Errors
    /// A store that stopped in the middle of loading a master's snapshot
    /// is not consistent: it is refused without `replicaof`.
    pub fn start(self: &Arc<Self>, replicaof: Option<(String, u16)>) -> Result<(), String> {
        if let Some((host, port)) = replicaof {
            self.replicaof(&host, port)?;
            return Ok(());
        }
        if self.db.is_following() {
            let state = self.db.follower_state().map_err(|e| e.to_string())?;
            if state.as_ref().is_some_and(|s| s.loading) {
                return Err("the store stopped while loading a master's snapshot, so it is not consistent: \
                            start it with --replicaof to load it again, or remove the directory"
                    .into());
            }
            let offset = state.map_or(0, |s| s.offset);
            self.db.stop_following().map_err(|e| e.to_string())?;
            self.inner.lock().base = offset;
            eprintln!("bitsled serve: the store followed a master; started without --replicaof, it is a master now");
        }
        Ok(())
    }

    /// Whether this server is a replica.
    pub(crate) fn is_replica(&self) -> bool {
        self.inner.lock().link.is_some()
    }

    /// Whether this replica is loading its master's snapshot.
    pub(crate) fn loading(&self) -> bool {
        self.db.is_loading()
    }

    /// `REPLICAOF host port`: follows that master (dropping what this
    /// server holds at the first sync). Returns the status line.
    pub(crate) fn replicaof(self: &Arc<Self>, host: &str, port: u16) -> Result<&'static str, String> {
        let mut inner = self.inner.lock();
        if let Some(link) = &inner.link {
            if link.host == host && link.port == port {
                return Ok("OK Already connected to specified master");
            }
            // The old link applies nothing more before the new one loads.
            link.stop();
            link.wait_stopped(Duration::from_secs(30));
        }
        // Replicas of this server sync again from the new history.
        for (_, r) in std::mem::take(&mut inner.replicas) {
            let _ = r.stream.shutdown(Shutdown::Both);
        }
        self.db.stop_feed();
        self.db.follow();
        let link = replica::Link::new(host, port);
        inner.link = Some(Arc::clone(&link));
        drop(inner);
        replica::spawn(Arc::clone(self), &link);
        Ok("OK")
    }

    /// `REPLICAOF NO ONE`: stops following and becomes a master, with a
    /// new replication id, going on from the offset reached.
    pub(crate) fn promote(self: &Arc<Self>) -> Result<(), String> {
        let mut inner = self.inner.lock();
        let Some(link) = inner.link.clone() else { return Ok(()) };
        if link.status().syncing {
            return Err("ERR the replica is loading its master's snapshot; it can be promoted once it has".into());
        }
        link.stop();
        // The link thread applies nothing after `stop`: wait for an apply
        // under way.
        link.wait_stopped(Duration::from_secs(30));
        if self.db.follower_state().map_err(|e| format!("ERR {e}"))?.is_some_and(|s| s.loading) {
            let link = replica::Link::new(&link.host, link.port);
            inner.link = Some(Arc::clone(&link));
            replica::spawn(Arc::clone(self), &link);
            return Err("ERR the replica stopped while loading its master's snapshot, so it is not consistent".into());
        }
        inner.link = None;
        let status = link.status();
        self.db.stop_following().map_err(|e| format!("ERR {e}"))?;
        inner.replid = new_replid();
        inner.base = status.offset;
        self.db.stop_feed();
        Ok(())
    }

    /// ROLE's answer.
    pub(crate) fn role(&self) -> Role {
        let inner = self.inner.lock();
        if let Some(link) = &inner.link {
            let s = link.status();
            let state = if s.up {
                "connected"
            } else if s.syncing {
                "sync"
            } else {
                "connecting"
            };
            return Role::Replica(link.host.clone(), link.port, state, s.offset);
        }
        let offset = self.db.feed().map_or(inner.base, |f| f.offset());
        let replicas =
            inner.replicas.values().filter(|r| r.online).map(|r| (r.addr.to_string(), r.port, r.ack)).collect();
        Role::Master(offset, replicas)
    }

    /// INFO's replication section.
    pub(crate) fn info(&self) -> String {
        use std::fmt::Write as _;
        let inner = self.inner.lock();
        let mut out = String::from("# Replication\r\n");
        let feed = self.db.feed();
        // A replica's link status, read once.
        let link = inner.link.as_ref().map(|l| (l, l.status()));
        let (offset, replid) = match &link {
            Some((_, s)) => (s.offset, s.replid.clone()),
            None => (feed.as_ref().map_or(inner.base, |f| f.offset()), inner.replid.clone()),
        };
        match &link {
            None => {
                let _ = write!(out, "role:master\r\n");
            }
            Some((link, s)) => {
                let _ = write!(
                    out,
                    "role:slave\r\nmaster_host:{}\r\nmaster_port:{}\r\nmaster_link_status:{}\r\n\
                     master_last_io_seconds_ago:{}\r\nmaster_sync_in_progress:{}\r\nslave_read_repl_offset:{}\r\n\
                     slave_repl_offset:{}\r\n",
                    link.host,
                    link.port,
                    if s.up { "up" } else { "down" },
                    if s.up { i64::try_from(s.last_io.elapsed().as_secs()).unwrap_or(i64::MAX) } else { -1 },
                    u8::from(s.syncing),
                    s.offset,
                    s.offset,
                );
                if !s.up {
                    let _ = write!(out, "master_link_down_since_seconds:{}\r\n", s.down_since.elapsed().as_secs());
                }
                let _ = write!(out, "slave_priority:100\r\nslave_read_only:1\r\nreplica_announced:1\r\n");
            }
        }
        let online: Vec<&Follower> = inner.replicas.values().filter(|r| r.online).collect();
        let _ = write!(out, "connected_slaves:{}\r\n", online.len());
        for (i, r) in online.iter().enumerate() {
            let _ = write!(
                out,
                "slave{i}:ip={},port={},state=online,offset={},lag={}\r\n",
                r.addr,
                r.port,
                r.ack,
                r.last_ack.elapsed().as_secs()
            );
        }
        let (first, histlen) = feed.as_ref().map_or((0, 0), |f| f.backlog());
        let _ = write!(
            out,
            "master_failover_state:no-failover\r\nmaster_replid:{replid}\r\nmaster_replid2:{}\r\n\
             master_repl_offset:{offset}\r\nsecond_repl_offset:-1\r\nrepl_backlog_active:{}\r\n\
             repl_backlog_size:{}\r\nrepl_backlog_first_byte_offset:{}\r\nrepl_backlog_histlen:{histlen}\r\n",
            "0".repeat(40),
            u8::from(feed.is_some()),
            self.backlog_bytes.load(Ordering::Relaxed),
            if feed.is_some() { first + 1 } else { 0 },
        );
        out
    }

    /// `PSYNC replid offset` from client `id` (a bitsled replica at
    /// `addr`, listening on `port`), whose socket is `stream`: starts
    /// streaming to it on a thread of its own.
    pub(crate) fn psync(
        self: &Arc<Self>,
        id: u64,
        stream: TcpStream,
        addr: IpAddr,
        port: u16,
        replid: &[u8],
        offset: Option<u64>,
    ) -> Result<(), String> {
        let mut inner = self.inner.lock();
        if inner.link.is_some() {
            return Err("ERR this bitsled server is a replica: replicas are served by a master only".into());
        }
        let feed = self
            .db
            .start_feed(inner.base, self.backlog_bytes.load(Ordering::Relaxed))
            .map_err(|e| format!("ERR {e}"))?;
        let from = offset.filter(|&o| replid == inner.replid.as_bytes() && feed.can_continue(o));
        let writer = stream.try_clone().map_err(|e| format!("ERR {e}"))?;
        inner.replicas.insert(id, Follower { addr, port, ack: 0, online: false, last_ack: Instant::now(), stream });
        let replid = inner.replid.clone();
        drop(inner);
        master::spawn(Arc::clone(self), id, writer, replid, from, feed);
        Ok(())
    }

    /// Writes back what the master holds if the streams to its replicas
    /// have not done so for [`master::WRITE_BACK_EVERY`] (one of them
    /// does it for all).
    fn write_back_if_due(&self) -> bitsled::Result<()> {
        {
            let mut last = self.last_write_back.lock();
            if last.elapsed() < master::WRITE_BACK_EVERY {
                return Ok(());
            }
            *last = Instant::now();
        }
        self.db.write_back()
    }

    /// Whether client `id` is still a replica this master streams to.
    fn serves(&self, id: u64) -> bool {
        self.inner.lock().replicas.contains_key(&id)
    }

    /// Marks replica `id` online (its full sync is sent).
    fn set_online(&self, id: u64) {
        if let Some(r) = self.inner.lock().replicas.get_mut(&id) {
            r.online = true;
        }
    }

    /// Forgets replica `id` (its stream ended).
    fn drop_replica(&self, id: u64) {
        if let Some(r) = self.inner.lock().replicas.remove(&id) {
            let _ = r.stream.shutdown(Shutdown::Both);
        }
        self.acked.notify_all();
    }

    /// `REPLCONF ACK offset` from client `id`.
    pub(crate) fn ack(&self, id: u64, offset: u64) {
        if let Some(r) = self.inner.lock().replicas.get_mut(&id) {
            r.ack = r.ack.max(offset);
            r.last_ack = Instant::now();
        }
        self.acked.notify_all();
    }

    /// `WAIT numreplicas timeout`, once the caller has written back what
    /// the server holds (so it is in the feed): waits until `n` replicas
    /// acknowledge the feed's offset or `timeout` passes (`None`: no
    /// limit). Returns how many did.
    pub(crate) fn wait(&self, n: usize, timeout: Option<Duration>) -> Result<usize, String> {
        if self.is_replica() {
            return Err("ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if \
                        a replica is configured to be writable (which is not the default) writes to replicas are \
                        just local and are not propagated."
                .into());
        }
        let Some(feed) = self.db.feed() else { return Ok(0) };
        let target = feed.offset();
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut inner = self.inner.lock();
        loop {
            let count = inner.replicas.values().filter(|r| r.ack >= target).count();
            if count >= n {
                return Ok(count);
            }
            match deadline {
                Some(d) => {
                    if self.acked.wait_until(&mut inner, d).timed_out() {
                        return Ok(inner.replicas.values().filter(|r| r.ack >= target).count());
                    }
                }
                None => self.acked.wait(&mut inner),
            }
        }
    }

    /// Stops the link to the master and the streams to replicas (at
    /// shutdown).
    pub fn stop(&self) {
        let mut inner = self.inner.lock();
        if let Some(link) = &inner.link {
            link.stop();
        }
        for (_, r) in std::mem::take(&mut inner.replicas) {
            let _ = r.stream.shutdown(Shutdown::Both);
        }
    }
}
