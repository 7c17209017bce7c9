//! A connection's outgoing bytes. Its own thread puts its replies here, and
//! publishers on other threads put pub/sub messages here, each whole and
//! under one lock, so the two never interleave inside a reply. Whoever
//! adds bytes sends what the socket takes at once, never blocking (a
//! publisher is never held up by a slow subscriber); what it does not take
//! waits for the next sender or for the connection's own thread, which
//! keeps sending while bytes wait.
//!
//! While the connection's own thread runs a batch of requests, bytes other
//! threads add wait in a side buffer and follow the batch's replies: a
//! reply computed before a push was made never comes after it (a client
//! caching a value it read must see the value before the invalidation of a
//! later write, as Redis, running one command at a time, sends them).
//! Bytes the connection's own thread adds during the batch (a message a
//! client publishes to itself) go straight in, in order.
//!
//! A subscriber that lets its backlog grow past Redis's `pubsub` class of
//! `client-output-buffer-limit` (32 MiB at once, or 8 MiB for 60 seconds)
//! is disconnected, as Redis does it.

use std::io::ErrorKind;
use std::net::{Shutdown, TcpStream};
use std::time::{Duration, Instant};

/// The hard limit of a subscriber's backlog (Redis's default
/// `client-output-buffer-limit pubsub 32mb 8mb 60`).
pub(super) const PUBSUB_HARD_LIMIT: usize = 32 << 20;
/// The soft limit, and how long a backlog may stay past it.
pub(super) const PUBSUB_SOFT_LIMIT: usize = 8 << 20;
pub(super) const PUBSUB_SOFT_SECONDS: Duration = Duration::from_secs(60);

/// Bytes waiting to be sent on one connection.
#[derive(Default)]
pub(super) struct Outbox {
    buf: Vec<u8>,
    /// Bytes of `buf` already sent.
    sent: usize,
    /// Since when the backlog has been past the soft limit.
    over_soft_since: Option<Instant>,
    /// The connection was closed for its backlog: nothing more is added.
    closed: bool,
    /// The connection's own thread.
    owner: Option<std::thread::ThreadId>,
    /// Its thread runs a batch whose replies are not in `buf` yet.
    busy: bool,
    /// What other threads added meanwhile.
    deferred: Vec<u8>,
    /// What the connection's own command raised for after its reply (an
    /// invalidation of a key the client itself wrote, as Redis sends it).
    after_reply: Vec<u8>,
}

impl Outbox {
    /// Bytes not yet sent.
    pub(super) fn pending(&self) -> usize {
        self.buf.len() - self.sent + self.deferred.len()
    }

    /// Records the calling thread as the connection's own.
    pub(super) fn set_owner(&mut self) {
        self.owner = Some(std::thread::current().id());
    }

    /// The connection's thread starts a batch: what other threads add waits
    /// for its replies.
    pub(super) fn begin_batch(&mut self) {
        self.busy = true;
    }

    /// The batch's replies are in: what waited follows them.
    pub(super) fn end_batch(&mut self) {
        self.busy = false;
        if !self.deferred.is_empty() {
            let mut waiting = std::mem::take(&mut self.deferred);
            self.append(&mut waiting);
        }
    }

    /// Adds a push the running command raised for its own client, to
    /// follow the command's reply.
    pub(super) fn push_after_reply(&mut self, bytes: &[u8]) {
        self.after_reply.extend_from_slice(bytes);
    }

    /// Takes what waits for the last reply (see
    /// [`Outbox::push_after_reply`]).
    pub(super) fn take_after_reply(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.after_reply)
    }

    /// Adds a push (a message, an invalidation) from any thread: after the
    /// current batch's replies if another thread adds it mid-batch. Returns
    /// whether it may be sent now.
    pub(super) fn push(&mut self, bytes: &[u8]) -> bool {
        if self.busy && self.owner != Some(std::thread::current().id()) {
            self.deferred.extend_from_slice(bytes);
            false
        } else {
            self.extend(bytes);
            true
        }
    }

    /// Whether the connection was closed for its backlog.
    pub(super) fn closed(&self) -> bool {
        self.closed
    }

    /// Appends `bytes`, taking the vector itself (no copy) when nothing
    /// waits; `bytes` is left empty.
    pub(super) fn append(&mut self, bytes: &mut Vec<u8>) {
        if self.buf.len() == self.sent {
            std::mem::swap(&mut self.buf, bytes);
            self.sent = 0;
            bytes.clear();
        } else {
            self.buf.append(bytes);
        }
    }

    /// Appends a copy of `bytes`.
    pub(super) fn extend(&mut self, bytes: &[u8]) {
        if self.buf.len() == self.sent {
            self.buf.clear();
            self.sent = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Sends what the socket takes now without blocking; returns the bytes
    /// sent. An error means the connection is broken.
    pub(super) fn flush(&mut self, stream: &TcpStream) -> std::io::Result<usize> {
        let socket = socket2::SockRef::from(stream);
        let mut total = 0;
        while self.sent < self.buf.len() {
            match socket.send_with_flags(&self.buf[self.sent..], libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.sent += n;
                    total += n;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.sent == self.buf.len() {
            self.buf.clear();
            self.sent = 0;
            if self.buf.capacity() > super::conn::KEEP_BUFFER {
                self.buf = Vec::new();
            }
        } else if self.sent > self.buf.len() / 2 {
            self.buf.drain(..self.sent);
            self.sent = 0;
        }
        Ok(total)
    }

    /// Whether a subscriber's backlog is past the pub/sub limits now (the
    /// soft one for long enough); keeps the time the soft one was passed.
    pub(super) fn over_pubsub_limit(&mut self, now: Instant) -> bool {
        let pending = self.pending();
        if pending <= PUBSUB_SOFT_LIMIT {
            self.over_soft_since = None;
            return false;
        }
        let since = *self.over_soft_since.get_or_insert(now);
        pending > PUBSUB_HARD_LIMIT || now.duration_since(since) > PUBSUB_SOFT_SECONDS
    }

    /// Closes the connection for its backlog: what waits is dropped and the
    /// socket shut, so the connection's thread ends.
    pub(super) fn close(&mut self, stream: &TcpStream) {
        self.closed = true;
        self.buf = Vec::new();
        self.deferred = Vec::new();
        self.sent = 0;
        let _ = stream.shutdown(Shutdown::Both);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invariant: bytes appended go out in order, whoever appended them,
    /// and a flush leaves nothing pending when the socket takes it all.
    #[test]
    fn appends_keep_order_and_flush_sends_all() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        let mut out = Outbox::default();
        out.extend(b"one ");
        let mut reply = b"two ".to_vec();
        out.append(&mut reply);
        assert!(reply.is_empty());
        out.extend(b"three");
        assert_eq!(out.flush(&server).unwrap(), 13);
        assert_eq!(out.pending(), 0);
        let mut got = [0u8; 13];
        std::io::Read::read_exact(&mut &client, &mut got).unwrap();
        assert_eq!(&got, b"one two three");
    }

    /// Invariant: a backlog past the hard limit is over at once; one past
    /// the soft limit only after the soft limit's time.
    #[test]
    fn pubsub_limits() {
        let now = Instant::now();
        let mut out = Outbox::default();
        out.extend(&vec![0u8; PUBSUB_SOFT_LIMIT + 1]);
        assert!(!out.over_pubsub_limit(now));
        assert!(out.over_pubsub_limit(now + PUBSUB_SOFT_SECONDS + Duration::from_secs(1)));
        out.extend(&vec![0u8; PUBSUB_HARD_LIMIT]);
        let mut fresh = Outbox::default();
        fresh.extend(&vec![0u8; PUBSUB_HARD_LIMIT + 1]);
        assert!(fresh.over_pubsub_limit(now));
    }
}
