//! One client connection: reading and parsing requests, running them
//! through the connection's [`Session`], and writing replies without ever
//! blocking on a client that does not read.
//!
//! A connection runs on a pool thread (`park.rs`), which blocks in `read`
//! while nothing is pending; after 100 ms with nothing received, nothing
//! pending and nothing that could push to the client, the connection is
//! parked and the thread goes back to the pool. After a read it
//! runs every complete request in its buffer and appends the replies to one
//! output buffer (under `fsync always`, after one group commit), then tries
//! to write it without blocking. If the client does not take it all, the
//! connection switches to non-blocking polling: it keeps writing what the
//! client takes and keeps reading and running its requests (a client may
//! send a whole pipeline before reading any reply), until the output is
//! gone, the client has been idle past the timeout, or the output exceeds
//! the pending-reply limit (then the client is disconnected).
//!
//! Failed authentications hold the connection as the limits of
//! `auth.rs` say (per connection and server-wide); a correct password is
//! never held.

use std::io::{ErrorKind, Read};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::link::Link;
use super::resp::{Parsed, Parser};
use super::{ActiveSlot, ClientInfo, Shared};
use crate::command::{Close, Reply, Session};
use bitsled::Durability;

/// Bytes read at a time, and the initial size of the input buffer.
const READ_CHUNK: usize = 16 * 1024;

/// An input buffer larger than this is given back once it is empty (and
/// an output buffer once sent).
pub(super) const KEEP_BUFFER: usize = 1 << 20;

/// An empty input buffer larger than this shrinks back to [`READ_CHUNK`]
/// when the last batch used less than half of it (Redis's
/// `PROTO_RESIZE_THRESHOLD`).
const RESIZE_THRESHOLD: usize = 32 * 1024;

/// A connection blocked in `read` wakes this often to look at its idle
/// time: the `timeout` setting (which CONFIG SET may have changed) and the
/// release of an idle input buffer (Redis's `clientsCron` does both); the
/// parking thread checks parked connections as often.
pub(super) const TICK: Duration = Duration::from_secs(1);

/// A connection that received nothing for this long is parked if it can
/// be (and otherwise looks at its idle time, as each [`TICK`]): short, so
/// that a burst of new clients needs few threads at once, and long enough
/// that a client sending request after request keeps its thread.
const PARK_AFTER: Duration = Duration::from_millis(100);

/// The same while the client is subscribed: messages its socket did not
/// take when they were published are sent at the latest this much later.
const SUBSCRIBED_TICK: Duration = Duration::from_millis(50);

/// An empty input buffer of a client idle this long is given back.
const IDLE_RELEASE: Duration = Duration::from_secs(2);

/// How long a shutting-down server waits for a client to take its last
/// replies.
const SHUTDOWN_DRAIN: Duration = Duration::from_secs(5);

/// A connection held after a failed authentication looks this often
/// whether the server is shutting down or the client was killed.
const AUTH_HOLD_CHECK: Duration = Duration::from_millis(100);

pub(super) struct Conn {
    shared: Arc<Shared>,
    info: Arc<ClientInfo>,
    session: Session,
    parser: Parser,
    /// Input: bytes `lo..hi` of `buf` are received and not yet parsed.
    buf: Vec<u8>,
    lo: usize,
    hi: usize,
    /// A request behind the one running whose key had the first prefetch
    /// step ([`Conn::prefetch_ahead`]).
    ahead: Option<Ahead>,
    out: Vec<u8>,
    /// Close after sending the pending replies (QUIT, protocol error,
    /// SHUTDOWN).
    close: bool,
    /// Close at once, dropping the pending replies (output limit, failed
    /// durability barrier).
    kill: bool,
    /// The client closed its side: nothing more will be read.
    eof: bool,
    /// Failed authentications on this connection.
    auth_failures: u32,
    /// The `tot-mem` last added to the server's count.
    published_mem: usize,
    /// The read timeout set now.
    tick: Duration,
    /// Its place in the server's count of connections (dropped last).
    _active: ActiveSlot,
}

/// Why [`Conn::run`] returned.
enum Ended {
    /// The connection is over.
    Closed,
    /// Nothing received for a while, nothing pending: it may be parked.
    Idle,
}

/// The new connection `stream` with client id `id`, in the client list;
/// `None` if its socket fails at once.
pub(super) fn open(shared: &Arc<Shared>, stream: TcpStream, id: u64, slot: ActiveSlot) -> Option<Box<Conn>> {
    let (Ok(addr), Ok(laddr), Ok(())) =
        (stream.peer_addr(), stream.local_addr(), stream.set_read_timeout(Some(PARK_AFTER)))
    else {
        return None;
    };
    let info = Arc::new(ClientInfo {
        id,
        addr,
        laddr,
        created: Instant::now(),
        name: parking_lot::Mutex::new(None),
        last_cmd: parking_lot::Mutex::new("NULL"),
        last_active: parking_lot::Mutex::new(Instant::now()),
        resp: std::sync::atomic::AtomicUsize::new(2),
        db: std::sync::atomic::AtomicU32::new(0),
        buffers: super::ClientBuffers::default(),
        stream,
        outbox: parking_lot::Mutex::default(),
        subs: Default::default(),
    });
    shared.clients.lock().insert(id, Arc::clone(&info));
    // A shutdown that began before this connection was registered did not
    // see it.
    if shared.shutting_down.load(Ordering::SeqCst) {
        let _ = info.stream.shutdown(std::net::Shutdown::Read);
    }
    let link = Link { shared: Arc::clone(shared), info: Arc::clone(&info) };
    let session = Session::for_client(shared.db.clone(), Arc::new(link));
    let mut conn = Box::new(Conn {
        shared: Arc::clone(shared),
        info,
        session,
        parser: Parser::new(),
        // Taken when the first request arrives (`read_some`): a client
        // that connects and waits holds no input buffer.
        buf: Vec::new(),
        lo: 0,
        hi: 0,
        ahead: None,
        out: Vec::new(),
        close: false,
        kill: false,
        eof: false,
        auth_failures: 0,
        published_mem: 0,
        tick: PARK_AFTER,
        _active: slot,
    });
    conn.publish_buffers();
    Some(conn)
}

/// Serves `conn` on this thread until it ends or is parked.
pub(super) fn resume(mut conn: Box<Conn>) {
    loop {
        match conn.run() {
            Ended::Closed => return close(conn),
            Ended::Idle => {
                conn.release_buffers();
                let shared = Arc::clone(&conn.shared);
                match shared.parking.park(conn) {
                    Ok(()) => return,
                    // Not parked (the parking thread is not running): this
                    // thread keeps it.
                    Err(back) => conn = back,
                }
            }
        }
    }
}

/// Ends the connection: its socket shut, then its state dropped.
pub(super) fn close(conn: Box<Conn>) {
    let _ = conn.info.stream.shutdown(std::net::Shutdown::Both);
    drop(conn);
}

impl Drop for Conn {
    /// However the connection ends (a panic included): out of the client
    /// list, its memory out of the server's count.
    fn drop(&mut self) {
        crate::command::unsubscribe_all(&mut self.session);
        self.shared.clients_mem.fetch_sub(self.published_mem, Ordering::Relaxed);
        self.shared.clients.lock().remove(&self.info.id);
    }
}

/// A request read ahead of the one running.
struct Ahead {
    /// Where it starts in the input buffer, and its bytes.
    at: usize,
    len: usize,
    /// The first prefetch step's hint for its key.
    hint: bitsled::IndexHint,
}

impl Conn {
    /// The client's id.
    pub(super) fn id(&self) -> u64 {
        self.info.id
    }

    /// The client's socket.
    pub(super) fn stream(&self) -> &TcpStream {
        &self.info.stream
    }

    /// Whether output waits to be sent (pushes made while it was parked).
    pub(super) fn has_output(&self) -> bool {
        self.info.outbox.lock().pending() > 0
    }

    /// Whether nothing is pending in or out and nothing may be pushed to
    /// the client, so that it can wait without a thread. (A push to a
    /// parked client, as an invalidation for a client that others
    /// redirect theirs to, sends what the socket takes; the parking
    /// thread resumes the client for the rest.)
    fn parkable(&self) -> bool {
        !self.session.subscribed()
            && self.session.tracking.is_none()
            && self.lo == self.hi
            && !self.parser.in_request()
            && !(self.close || self.kill || self.eof)
            && !self.shared.shutting_down.load(Ordering::SeqCst)
            && self.info.outbox.lock().pending() == 0
    }

    /// Gives back the input and output buffers of a connection about to
    /// be parked.
    fn release_buffers(&mut self) {
        self.buf = Vec::new();
        self.out = Vec::new();
        self.lo = 0;
        self.hi = 0;
        self.publish_buffers();
    }

    /// Serves requests on this thread until the connection ends or has
    /// been idle for a while and can be parked.
    fn run(&mut self) -> Ended {
        // The connection may have moved to this thread since it last ran.
        self.info.outbox.lock().set_owner();
        loop {
            match self.read_some() {
                Ok(0) => return Ended::Closed,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    if !(self.tick() && self.send()) {
                        return Ended::Closed;
                    }
                    if self.parkable() {
                        return Ended::Idle;
                    }
                    continue;
                }
                Err(_) => return Ended::Closed,
            }
            self.process();
            if self.close {
                // Gone from the client list before its last reply goes out
                // (QUIT): a client told OK no longer counts as connected
                // (a CLIENT TRACKING redirect to it is broken).
                self.shared.clients.lock().remove(&self.info.id);
            }
            if !self.send() || self.close || self.eof || !self.set_tick() {
                return Ended::Closed;
            }
        }
    }

    /// Sets the read timeout for the session's state (shorter while it is
    /// subscribed); false if the socket refuses.
    fn set_tick(&mut self) -> bool {
        let tick = if self.session.subscribed() {
            SUBSCRIBED_TICK
        } else if self.session.tracking.is_some() {
            // Never parked: it wakes only for its idle checks.
            TICK
        } else {
            PARK_AFTER
        };
        if tick != self.tick {
            self.tick = tick;
            return self.info.stream.set_read_timeout(Some(tick)).is_ok();
        }
        true
    }

    /// A tick passed with nothing received (on its thread, or parked):
    /// false if the client has been idle past the timeout (the connection
    /// ends); gives back an idle client's empty input buffer.
    pub(super) fn tick(&mut self) -> bool {
        let idle = self.info.last_active.lock().elapsed();
        // As in Redis, the timeout does not apply to a subscribed client.
        if !self.session.subscribed() && self.shared.settings.timeout().is_some_and(|t| idle > t) {
            return false;
        }
        if idle >= IDLE_RELEASE && self.lo == self.hi && !self.buf.is_empty() {
            self.buf = Vec::new();
            self.lo = 0;
            self.hi = 0;
            self.publish_buffers();
        }
        true
    }

    /// Reads what is available into the input buffer, making room first.
    fn read_some(&mut self) -> std::io::Result<usize> {
        if self.lo == self.hi {
            let used = self.hi;
            self.lo = 0;
            self.hi = 0;
            if self.buf.len() > KEEP_BUFFER {
                self.buf = vec![0; READ_CHUNK];
            } else if self.buf.len() > RESIZE_THRESHOLD && used < self.buf.len() / 2 {
                self.buf = vec![0; READ_CHUNK.max(used)];
            }
        }
        if self.buf.is_empty() {
            // Given back while idle: wait for data without holding one.
            if self.info.stream.peek(&mut [0u8; 1])? == 0 {
                return Ok(0);
            }
            self.buf = vec![0; READ_CHUNK];
        }
        if self.hi == self.buf.len() {
            self.buf.copy_within(self.lo..self.hi, 0);
            self.hi -= self.lo;
            self.lo = 0;
            if self.hi == self.buf.len() {
                // One element larger than the buffer: grow by doubling, but
                // not past what the bulk being received still needs. The
                // buffer grows only as data arrives.
                let mut grow = self.buf.len();
                if let Some(need) = self.parser.bulk_remaining(self.hi) {
                    grow = grow.min(need.max(READ_CHUNK));
                }
                self.buf.resize(self.buf.len() + grow, 0);
            }
        }
        let n = (&self.info.stream).read(&mut self.buf[self.hi..])?;
        self.hi += n;
        if n > 0 {
            self.shared.stats.net_input_bytes.fetch_add(n as u64, Ordering::Relaxed);
            *self.info.last_active.lock() = Instant::now();
        }
        Ok(n)
    }

    /// Runs every complete request in the input buffer, appending the
    /// replies to the output; under [`Durability::Always`] (the database's
    /// policy), the batch's writes are made durable before its replies may
    /// go out.
    fn process(&mut self) {
        self.info.outbox.lock().begin_batch();
        super::pubsub::batch_deliveries();
        let mut requests = 0usize;
        while !self.close && !self.kill {
            let parsed = self.parser.parse(&self.buf[self.lo..self.hi], self.session.authed);
            match parsed {
                Err(e) => {
                    crate::command::write_error(&e.text(), &mut self.out);
                    self.close = true;
                }
                Ok((used, Parsed::Incomplete)) => {
                    self.lo += used;
                    break;
                }
                Ok((used, Parsed::Request(args))) => {
                    // As Redis shows it while the command runs: the
                    // request still counts in the query buffer.
                    self.publish_input();
                    self.lo += used;
                    if !args.is_empty() {
                        requests += 1;
                        self.prefetch_ahead(args.get(1).map(Vec::as_slice));
                        self.request(&args);
                        if self.out.len() > self.shared.config.max_pending_reply_bytes {
                            self.kill = true;
                        }
                    }
                    self.parser.recycle(args);
                }
            }
        }
        if requests > 0 {
            // Idle time counts from the end of the batch's last command, as
            // Redis's `lastinteraction` from its end: a slow command is not
            // idleness.
            *self.info.last_active.lock() = Instant::now();
        }
        if self.session.take_wrote() && self.shared.db.durability() == Durability::Always && !self.kill {
            // The replies are not sent: nothing in this batch counts as
            // acknowledged, and the client cannot tell which of its writes
            // ran (as after a crash). Writes are checked for disk space
            // before they run under this policy, so a shortage meets a
            // flush only if the space went between the check and it.
            if let Err(why) = self.shared.committer.commit(&self.shared.db, &self.shared.stats) {
                eprintln!("bitsled serve: flush failed ({why}); closing client {}", self.info.id);
                self.kill = true;
            }
        }
        self.publish_stats();
        self.publish_buffers();
        // Broadcast-mode invalidations of this batch's writes go out now,
        // after its replies.
        if self.shared.tracking.active() {
            self.info.outbox.lock().append(&mut self.out);
            self.shared.tracking.broadcast(&self.shared);
        }
        super::pubsub::send_deliveries();
    }

    /// Prefetch hints for the commands behind the one about to run (see
    /// [`bitsled::Db::prefetch_index`]): the second step for the next
    /// command's key, if the first was taken for it, and the first step
    /// for the key of the command after it. Only commands whose bytes are
    /// all read are looked at; a hint taken for a command that then runs
    /// in another database, or for bytes the buffer's compaction moved, is
    /// a wasted hint, nothing else.
    ///
    /// No hint is taken for a key the same as `running`'s (the key of the
    /// request about to run): its lines will be in the caches anyway, as
    /// in a pipeline of commands on one key.
    fn prefetch_ahead(&mut self, running: Option<&[u8]>) {
        let rest = &self.buf[self.lo..self.hi];
        let next_len = match self.ahead.take() {
            Some(ahead) if ahead.at == self.lo => {
                self.session.db.prefetch_bucket(ahead.hint);
                ahead.len
            }
            _ => match super::resp::peek_request(rest) {
                Some(next) => next.len,
                None => return,
            },
        };
        let Some(later) = rest.get(next_len..).and_then(super::resp::peek_request) else { return };
        // AUTH's second argument may be a password: not a key, and not to
        // be kept in the hash memo.
        let secret = later.name.eq_ignore_ascii_case(b"auth");
        if later.key.is_some() && later.key == running {
            return;
        }
        if let (Some(key), false) = (later.key, secret) {
            self.ahead =
                self.session.db.prefetch_index(key).map(|hint| Ahead { at: self.lo + next_len, len: later.len, hint });
        }
    }

    /// Hands the input buffer's use to CLIENT LIST.
    fn publish_input(&self) {
        let b = &self.info.buffers;
        b.qbuf.store(self.hi - self.lo, Ordering::Relaxed);
        // Bytes already run are room again (the next read compacts).
        b.qbuf_free.store(self.buf.len() - (self.hi - self.lo), Ordering::Relaxed);
    }

    /// Hands the connection's buffers and its memory to CLIENT LIST and
    /// to the server's memory count.
    fn publish_buffers(&mut self) {
        self.publish_input();
        let b = &self.info.buffers;
        let multi = self.session.queued_bytes();
        b.multi_mem.store(multi, Ordering::Relaxed);
        b.obl.store(self.out.len(), Ordering::Relaxed);
        b.rbs.store(self.out.capacity(), Ordering::Relaxed);
        let fixed = std::mem::size_of::<Conn>() + std::mem::size_of::<ClientInfo>();
        let total = fixed + self.buf.len() + self.out.capacity() + multi;
        b.tot_mem.store(total, Ordering::Relaxed);
        let mem = &self.shared.clients_mem;
        if total >= self.published_mem {
            mem.fetch_add(total - self.published_mem, Ordering::Relaxed);
        } else {
            mem.fetch_sub(self.published_mem - total, Ordering::Relaxed);
        }
        self.published_mem = total;
    }

    /// Hands the session's command counters to the server's statistics.
    fn publish_stats(&mut self) {
        if self.session.stats.is_empty() {
            return;
        }
        let s = &self.shared.stats;
        if !self.session.errors.is_empty() {
            let mut errors = s.errors.lock();
            for (code, n) in self.session.errors.drain() {
                *errors.entry(code).or_default() += n;
            }
        }
        let mut all = s.commands.lock();
        for (crate::command::StatKey(name), st) in self.session.stats.drain() {
            s.commands_processed.fetch_add(st.calls, Ordering::Relaxed);
            let e = all.entry(name).or_default();
            e.calls += st.calls;
            e.usec += st.usec;
            e.failed += st.failed;
        }
        drop(all);
        *self.info.last_cmd.lock() = self.session.last_cmd;
    }

    /// Counts `n` bytes sent.
    fn count_output(&self, n: usize) {
        if n > 0 {
            *self.info.last_active.lock() = Instant::now();
            self.shared.stats.net_output_bytes.fetch_add(n as u64, Ordering::Relaxed);
        }
    }

    /// Moves the replies so far into the outbox, then sends what the socket
    /// takes; returns the bytes sent and those still pending, or `None` if
    /// the connection is to end.
    fn flush_outbox(&mut self) -> Option<(usize, usize)> {
        let mut out = self.info.outbox.lock();
        if out.closed() {
            return None;
        }
        out.append(&mut self.out);
        out.end_batch();
        if out.pending() == 0 {
            return Some((0, 0));
        }
        let n = out.flush(&self.info.stream).ok()?;
        let pending = out.pending();
        drop(out);
        self.count_output(n);
        Some((n, pending))
    }

    /// Sends the pending output; false if the connection is to end.
    fn send(&mut self) -> bool {
        if self.kill {
            return false;
        }
        match self.flush_outbox() {
            None => false,
            Some((_, 0)) => true,
            Some(_) => {
                if self.info.stream.set_nonblocking(true).is_err() {
                    return false;
                }
                let ok = self.drain_output();
                ok && self.info.stream.set_nonblocking(false).is_ok()
            }
        }
    }

    /// With the socket non-blocking: sends until the output is gone,
    /// reading and running further requests meanwhile.
    fn drain_output(&mut self) -> bool {
        let mut pause = Duration::ZERO;
        let mut last_progress = Instant::now();
        loop {
            let Some((sent, pending)) = self.flush_outbox() else { return false };
            if pending == 0 {
                return true;
            }
            if pending > self.shared.config.max_pending_reply_bytes {
                return false;
            }
            let mut progress = sent > 0;
            if !self.close && !self.eof {
                match self.read_some() {
                    Ok(0) => self.eof = true,
                    Ok(_) => {
                        progress = true;
                        self.process();
                        if self.kill {
                            return false;
                        }
                    }
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                    Err(_) => return false,
                }
            }
            if progress {
                pause = Duration::ZERO;
                last_progress = Instant::now();
                continue;
            }
            let stalled = last_progress.elapsed();
            if (!self.session.subscribed() && self.shared.settings.timeout().is_some_and(|t| stalled > t))
                || (self.shared.shutting_down.load(Ordering::Relaxed) && stalled > SHUTDOWN_DRAIN)
            {
                return false;
            }
            pause = (pause * 2).clamp(Duration::from_micros(50), Duration::from_millis(10));
            std::thread::sleep(pause);
        }
    }

    /// One request: the session runs it; its reply goes out unless the
    /// session closes silently (SHUTDOWN).
    fn request(&mut self, args: &[Vec<u8>]) {
        let argv = &self.info.buffers.argv_mem;
        argv.store(args.iter().map(Vec::len).sum(), Ordering::Relaxed);
        if self.session.subscribed() || self.session.tracking.is_some() {
            // Messages this command publishes (or invalidations it makes)
            // to this very client go out after the replies before it.
            let mut out = self.info.outbox.lock();
            if !out.closed() {
                out.append(&mut self.out);
            }
        }
        let reply = self.session.execute(args);
        argv.store(0, Ordering::Relaxed);
        let failed = auth_failures(&reply);
        if self.session.close == Some(Close::Silently) {
            self.close = true;
        } else {
            if let Some(reply) = self.session.reply_to_send(reply) {
                reply.write(self.session.proto(), &mut self.out);
            }
            if self.session.tracking.is_some() {
                let after = self.info.outbox.lock().take_after_reply();
                self.out.extend_from_slice(&after);
            }
            self.close |= self.session.close == Some(Close::AfterReply);
        }
        if failed > 0 {
            self.auth_failed(failed);
        }
    }

    /// Counts `n` failed authentications and holds the connection until
    /// both limits allow its reply (no lock is held meanwhile): its own
    /// (past the free failures, a delay each) and the server's budget.
    /// At the per-connection maximum the connection closes after the
    /// replies so far.
    fn auth_failed(&mut self, n: u32) {
        self.shared.stats.auth_failures.fetch_add(u64::from(n), Ordering::Relaxed);
        let shared = Arc::clone(&self.shared);
        let limits = &shared.config.auth_limits;
        let before = self.auth_failures;
        self.auth_failures = before.saturating_add(n);
        let now = Instant::now();
        let own = limits.client_hold(before, self.auth_failures).and_then(|d| now.checked_add(d));
        let server = self.shared.auth_budget.take(n, now);
        let (Some(own), Some(server)) = (own, server) else {
            // A hold too long to express: the client is not answered.
            self.kill = true;
            return;
        };
        self.hold_until(own.max(server));
        if !self.kill && limits.client_closes(self.auth_failures) {
            eprintln!(
                "bitsled serve: closing client {} ({}) after {} failed authentications",
                self.info.id, self.info.addr, self.auth_failures
            );
            self.close = true;
        }
    }

    /// Sleeps until `until`, looking every [`AUTH_HOLD_CHECK`] whether the
    /// server is shutting down or the client was killed (CLIENT KILL): then
    /// the connection ends at once, without the held replies, so a held
    /// guess is never answered early and a killed client's slot is freed.
    fn hold_until(&mut self, until: Instant) {
        loop {
            let now = Instant::now();
            if now >= until {
                return;
            }
            if self.shared.shutting_down.load(Ordering::SeqCst)
                || !self.shared.clients.lock().contains_key(&self.info.id)
            {
                self.kill = true;
                return;
            }
            std::thread::sleep((until - now).min(AUTH_HOLD_CHECK));
        }
    }
}

/// The failed authentications a reply reports: AUTH's or HELLO's
/// `WRONGPASS`, or those inside EXEC's reply.
fn auth_failures(reply: &Reply) -> u32 {
    let wrongpass = |r: &Reply| matches!(r, Reply::Error(text) if text.starts_with(b"WRONGPASS"));
    match reply {
        Reply::Array(items) => u32::try_from(items.iter().filter(|r| wrongpass(r)).count()).unwrap_or(u32::MAX),
        r => u32::from(wrongpass(r)),
    }
}
