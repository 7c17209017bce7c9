//! Who listens to what: the server's pub/sub registry (channels, patterns,
//! shard channels, each with its subscribers in subscription order) and
//! the delivery of a published message into each subscriber's
//! [`super::outbox::Outbox`].
//!
//! A message goes to the channel's subscribers first, then to the
//! subscribers of each matching pattern (one delivery per pattern), as
//! Redis sends them; each delivery counts in PUBLISH's reply. It is encoded
//! once per protocol (an array in RESP2, a push in RESP3).
//!
//! A subscriber whose client has closed its connection is not counted or
//! delivered to, even before its connection's thread has seen the close
//! and unsubscribed it ([`gone`]): a client that closes a subscriber and
//! then asks PUBSUB NUMSUB or PUBLISHes on another connection sees the
//! close, as it does with Redis, whose single event loop handles the close
//! before the later request.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use parking_lot::RwLock;

use super::{ClientInfo, Shared};
use crate::command::{ByKind, KeyEvent, Proto, Reply, SubKind, KEYEVENT, KEYSPACE};

type Subscribers = Vec<Arc<ClientInfo>>;

/// Subscribers by channel, pattern and shard channel.
type Maps = ByKind<HashMap<Vec<u8>, Subscribers>>;

/// The server's pub/sub registry.
#[derive(Default)]
pub(super) struct PubSub {
    maps: RwLock<Maps>,
}

/// A message encoded for both protocols.
struct Encoded {
    resp2: Vec<u8>,
    resp3: Vec<u8>,
}

impl Encoded {
    fn of(items: Vec<Reply>) -> Encoded {
        let push = Reply::Push(items);
        let (mut resp2, mut resp3) = (Vec::new(), Vec::new());
        push.write(Proto::Resp2, &mut resp2);
        push.write(Proto::Resp3, &mut resp3);
        Encoded { resp2, resp3 }
    }

    /// The encoding in `client`'s protocol.
    fn for_client(&self, client: &ClientInfo) -> &[u8] {
        if client.resp.load(Ordering::Relaxed) == 3 {
            &self.resp3
        } else {
            &self.resp2
        }
    }
}

impl PubSub {
    /// Adds `client` to the subscribers of `name` (the caller knows it was
    /// not one).
    pub(super) fn subscribe(&self, kind: SubKind, name: &[u8], client: &Arc<ClientInfo>) {
        self.maps.write().of_mut(kind).entry(name.to_vec()).or_default().push(Arc::clone(client));
        client.subs[kind_index(kind)].fetch_add(1, Ordering::Relaxed);
    }

    /// Removes `client` from the subscribers of `name`.
    pub(super) fn unsubscribe(&self, kind: SubKind, name: &[u8], client: &ClientInfo) {
        let mut maps = self.maps.write();
        let map = maps.of_mut(kind);
        if let Some(list) = map.get_mut(name) {
            let before = list.len();
            list.retain(|c| c.id != client.id);
            if list.len() < before {
                client.subs[kind_index(kind)].fetch_sub(1, Ordering::Relaxed);
            }
            if list.is_empty() {
                map.remove(name);
            }
        }
    }

    /// Delivers `message` on `channel` (a shard channel if `shard`);
    /// returns the number of deliveries.
    pub(super) fn publish(&self, shard: bool, channel: &[u8], message: &[u8]) -> usize {
        let maps = self.maps.read();
        let now = Instant::now();
        let mut deliveries = 0;
        let kind = if shard { SubKind::Shard } else { SubKind::Channel };
        if let Some(list) = maps.of(kind).get(channel) {
            let what = if shard { "smessage" } else { "message" };
            let encoded =
                Encoded::of(vec![Reply::bulk(what), Reply::bulk(channel.to_vec()), Reply::bulk(message.to_vec())]);
            deliveries += deliver_all(list, &encoded, now);
        }
        if !shard {
            for (pattern, list) in &maps.patterns {
                if !bitsled::glob::glob_match(pattern, channel) {
                    continue;
                }
                let encoded = Encoded::of(vec![
                    Reply::bulk("pmessage"),
                    Reply::bulk(pattern.clone()),
                    Reply::bulk(channel.to_vec()),
                    Reply::bulk(message.to_vec()),
                ]);
                deliveries += deliver_all(list, &encoded, now);
            }
        }
        deliveries
    }

    /// The channels (shard channels if `shard`) with subscribers, those
    /// matching `pattern` if given.
    pub(super) fn channels(&self, shard: bool, pattern: Option<&[u8]>) -> Vec<Vec<u8>> {
        let maps = self.maps.read();
        let kind = if shard { SubKind::Shard } else { SubKind::Channel };
        maps.of(kind)
            .iter()
            .filter(|(c, list)| pattern.is_none_or(|p| bitsled::glob::glob_match(p, c)) && any_live(list))
            .map(|(c, _)| c.clone())
            .collect()
    }

    /// The subscribers of `channel` whose clients are still connected.
    pub(super) fn numsub(&self, shard: bool, channel: &[u8]) -> usize {
        let kind = if shard { SubKind::Shard } else { SubKind::Channel };
        self.maps.read().of(kind).get(channel).map_or(0, |list| list.iter().filter(|c| !gone(c)).count())
    }

    /// The patterns with a subscriber still connected (PUBSUB NUMPAT).
    pub(super) fn numpat(&self) -> usize {
        self.maps.read().patterns.values().filter(|list| any_live(list)).count()
    }

    /// The number of distinct channels, patterns and shard channels with
    /// subscribers (INFO stats; PUBSUB NUMPAT is the second).
    pub(super) fn counts(&self) -> [usize; 3] {
        let maps = self.maps.read();
        [maps.channels.len(), maps.patterns.len(), maps.shard.len()]
    }
}

/// Whether `client` has closed its connection (or the server closed it):
/// its outbox is closed, or its socket reads as ended with nothing unread
/// before the end, or as reset (a client that closes with replies unread
/// resets the connection). A peek, so the connection's own thread still
/// reads the close (a reset the peek reported reads as an end there: the
/// socket's error is taken once, and either way the thread closes the
/// connection).
fn gone(client: &ClientInfo) -> bool {
    if client.outbox.lock().closed() {
        return true;
    }
    let mut byte = [std::mem::MaybeUninit::<u8>::uninit()];
    let socket = socket2::SockRef::from(&client.stream);
    match socket.recv_with_flags(&mut byte, libc::MSG_PEEK | libc::MSG_DONTWAIT) {
        Ok(n) => n == 0,
        Err(e) => !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted),
    }
}

/// Whether a subscriber in `list` is still connected.
fn any_live(list: &Subscribers) -> bool {
    list.iter().any(|c| !gone(c))
}

/// Delivers `encoded` to the connected subscribers in `list`; returns how
/// many. A subscriber delivered to earlier in this thread's batch is not
/// peeked at again: a pipeline of PUBLISHes costs one peek per subscriber,
/// as it costs one send, and sees a close between its batches (Redis, too,
/// runs a client's whole read before it handles another's close).
fn deliver_all(list: &Subscribers, encoded: &Encoded, now: Instant) -> usize {
    let mut delivered = 0;
    for c in list.iter().filter(|c| in_batch(c) || !gone(c)) {
        deliver(c, encoded.for_client(c), now);
        delivered += 1;
    }
    delivered
}

/// Publishes keyspace event `event` of database `db`, as the classes
/// enabled say: `__keyspace@<db>__:<key>` with the event's name,
/// `__keyevent@<db>__:<name>` with the key.
pub(super) fn notify(shared: &Shared, db: u32, event: &KeyEvent) {
    let classes = shared.settings.keyspace_events();
    if classes & event.class == 0 {
        return;
    }
    let db = event.db.unwrap_or(db);
    if classes & KEYSPACE != 0 {
        let mut channel = format!("__keyspace@{db}__:").into_bytes();
        channel.extend_from_slice(&event.key);
        shared.pubsub.publish(false, &channel, event.name.as_bytes());
    }
    if classes & KEYEVENT != 0 {
        let channel = format!("__keyevent@{db}__:{}", event.name);
        shared.pubsub.publish(false, channel.as_bytes(), &event.key);
    }
}

/// The index of `kind` in a client's subscription counts.
pub(super) fn kind_index(kind: SubKind) -> usize {
    match kind {
        SubKind::Channel => 0,
        SubKind::Pattern => 1,
        SubKind::Shard => 2,
    }
}

/// The clients a batch delivered to, each once.
type ToSend = (std::collections::HashSet<u64>, Vec<Arc<ClientInfo>>);

thread_local! {
    /// The clients delivered to during this thread's batch, if it runs one.
    static TO_SEND: std::cell::RefCell<Option<ToSend>> = const { std::cell::RefCell::new(None) };
}

/// Whether `client`'s outbox is to be sent at the end of this thread's
/// batch (noting it) rather than now.
fn later(client: &Arc<ClientInfo>) -> bool {
    TO_SEND.with(|t| match t.borrow_mut().as_mut() {
        Some((ids, list)) => {
            if ids.insert(client.id) {
                list.push(Arc::clone(client));
            }
            true
        }
        None => false,
    })
}

/// Whether `client` was delivered to in this thread's batch.
fn in_batch(client: &ClientInfo) -> bool {
    TO_SEND.with(|t| t.borrow().as_ref().is_some_and(|(ids, _)| ids.contains(&client.id)))
}

/// A connection's thread starts a batch: deliveries it makes wait for
/// [`send_deliveries`].
pub(super) fn batch_deliveries() {
    TO_SEND.with(|t| *t.borrow_mut() = Some(ToSend::default()));
}

/// The batch ended: sends what it delivered, once per client.
pub(super) fn send_deliveries() {
    let Some((_, list)) = TO_SEND.with(|t| t.borrow_mut().take()) else { return };
    for client in list {
        let mut out = client.outbox.lock();
        if !out.closed() && out.flush(&client.stream).is_err() {
            out.close(&client.stream);
        }
    }
}

/// Delivers one push (encoded in the client's protocol) to `client`; if
/// `after_reply`, the client's own running command raised it and it
/// follows that command's reply.
pub(super) fn deliver_reply(client: &Arc<ClientInfo>, message: &Reply, after_reply: bool) {
    let proto = if client.resp.load(Ordering::Relaxed) == 3 { Proto::Resp3 } else { Proto::Resp2 };
    let mut bytes = Vec::new();
    message.write(proto, &mut bytes);
    if after_reply {
        client.outbox.lock().push_after_reply(&bytes);
        return;
    }
    deliver(client, &bytes, Instant::now());
}

/// Puts a message into `client`'s outbox and sends what its socket takes;
/// a client whose backlog passes the pub/sub limits is disconnected.
/// While a connection's thread runs a batch, the clients it delivered to
/// wait for the batch's end to be sent to, each once (Redis writes to
/// clients once per event-loop turn): a pipeline of PUBLISHes costs a send
/// per subscriber, not one per message.
fn deliver(client: &Arc<ClientInfo>, bytes: &[u8], now: Instant) {
    let mut out = client.outbox.lock();
    if out.closed() {
        return;
    }
    let send_now = out.push(bytes) && !later(client);
    let broken = send_now && out.flush(&client.stream).is_err();
    if broken || out.over_pubsub_limit(now) {
        if !broken {
            eprintln!(
                "bitsled serve: closing client {} ({}): its pub/sub backlog passed the output buffer limit",
                client.id, client.addr
            );
        }
        out.close(&client.stream);
    }
}
