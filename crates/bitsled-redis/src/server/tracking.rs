//! Client-side caching (CLIENT TRACKING): which clients may cache which
//! keys, and the invalidation messages sent when those keys are written.
//!
//! In the default mode a key read by a tracking client is remembered (the
//! dispatcher remembers it before the read runs, so a write that follows
//! the read always finds it); the next write of the key sends each client
//! that remembered it one invalidation and forgets it. In broadcasting
//! mode (BCAST) nothing is remembered: the keys written under each prefix
//! are gathered and, when the writing connection's batch of requests ends
//! (Redis sends them before its event loop sleeps), every client of the
//! prefix gets one invalidation with them (NOLOOP: without those it wrote
//! itself). Like Redis, keys are tracked by name alone,
//! whatever the database. An emptied database invalidates everything (a
//! nil key list).
//!
//! An invalidation goes to the tracking client as a RESP3 push
//! `["invalidate", [key ...]]`, or, with REDIRECT, to the other client: as
//! a push if it speaks RESP3, else as a message on `__redis__:invalidate`
//! if it is subscribed. A RESP2 client without REDIRECT gets none (RESP2
//! has no pushes), as in Redis. If the REDIRECT target has gone, a RESP3
//! tracking client is told once with `["tracking-redir-broken", id]`.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{ClientInfo, Shared};
use crate::command::{Reply, TrackingOptions};

#[derive(Default)]
struct Table {
    /// Default mode: key -> the clients that may cache it.
    keys: HashMap<Vec<u8>, HashSet<u64>>,
    /// Broadcasting mode: prefix -> its clients.
    prefixes: BTreeMap<Vec<u8>, HashSet<u64>>,
    /// Every client with tracking on, and its options.
    clients: HashMap<u64, TrackingOptions>,
    /// Tracking clients whose REDIRECT target has gone.
    broken: HashSet<u64>,
    /// Keys written under each prefix since the last broadcast, each with
    /// its writer (`None`: several, or none).
    written: BTreeMap<Vec<u8>, BTreeMap<Vec<u8>, Option<u64>>>,
}

/// The server's tracking table.
pub(super) struct Tracking {
    table: Mutex<Table>,
    /// Clients with tracking on (read without the lock).
    on: AtomicUsize,
    /// `tracking-table-max-keys` (0: no limit).
    max_keys: AtomicUsize,
}

/// Redis's default `tracking-table-max-keys`.
const DEFAULT_MAX_KEYS: usize = 1_000_000;

impl Default for Tracking {
    fn default() -> Tracking {
        Tracking { table: Mutex::default(), on: AtomicUsize::new(0), max_keys: AtomicUsize::new(DEFAULT_MAX_KEYS) }
    }
}

/// One invalidation to send: to whom, and its keys (`None`: everything).
struct Invalidation {
    client: u64,
    keys: Option<Vec<Vec<u8>>>,
}

impl Tracking {
    /// Turns tracking on with `options`, or off, for `client`.
    pub(super) fn set(&self, client: u64, options: Option<&TrackingOptions>) {
        let mut t = self.table.lock();
        for ids in t.prefixes.values_mut() {
            ids.remove(&client);
        }
        t.prefixes.retain(|_, ids| !ids.is_empty());
        t.broken.remove(&client);
        match options {
            Some(o) => {
                if o.bcast {
                    for p in &o.prefixes {
                        t.prefixes.entry(p.clone()).or_default().insert(client);
                    }
                }
                t.clients.insert(client, o.clone());
            }
            None => {
                t.clients.remove(&client);
            }
        }
        self.on.store(t.clients.len(), Ordering::Relaxed);
    }

    /// `tracking-table-max-keys`.
    pub(super) fn max_keys(&self) -> usize {
        self.max_keys.load(Ordering::Relaxed)
    }

    pub(super) fn set_max_keys(&self, n: usize) {
        self.max_keys.store(n, Ordering::Relaxed);
    }

    /// For INFO: tracking clients, keys tracked, (key, client) items,
    /// broadcast prefixes.
    pub(super) fn counts(&self) -> [usize; 4] {
        let t = self.table.lock();
        [t.clients.len(), t.keys.len(), t.keys.values().map(HashSet::len).sum(), t.prefixes.len()]
    }

    /// Whether any client has tracking on.
    pub(super) fn active(&self) -> bool {
        self.on.load(Ordering::Relaxed) > 0
    }

    /// Whether `client`'s REDIRECT target was found gone.
    pub(super) fn broken(&self, client: u64) -> bool {
        self.table.lock().broken.contains(&client)
    }

    /// `client` may cache `keys`. Past `tracking-table-max-keys`, other
    /// keys are invalidated (and forgotten) to make room, as Redis does.
    pub(super) fn remember(&self, shared: &Shared, client: u64, keys: &[&[u8]]) {
        {
            let mut t = self.table.lock();
            for k in keys {
                t.keys.entry(k.to_vec()).or_default().insert(client);
            }
        }
        self.enforce_limit(shared, keys);
    }

    /// Invalidates (and forgets) keys while the table holds more than
    /// `tracking-table-max-keys`, sparing `keep` (the keys just read).
    pub(super) fn enforce_limit(&self, shared: &Shared, keep: &[&[u8]]) {
        let evicted: Vec<Vec<u8>> = {
            let t = self.table.lock();
            let max = self.max_keys();
            let over = if max == 0 { 0 } else { t.keys.len().saturating_sub(max) };
            t.keys.keys().filter(|k| !keep.contains(&k.as_slice())).take(over).cloned().collect()
        };
        if !evicted.is_empty() {
            let refs: Vec<&[u8]> = evicted.iter().map(Vec::as_slice).collect();
            self.invalidate_as(shared, None, &refs, false);
        }
    }

    /// `keys` were written (by `writer`, if a client): invalidates them.
    pub(super) fn invalidate(&self, shared: &Shared, writer: Option<u64>, keys: &[&[u8]]) {
        self.invalidate_as(shared, writer, keys, true);
    }

    /// [`Tracking::invalidate`]; `written` false for keys only evicted
    /// from the table (broadcasting clients are not told).
    fn invalidate_as(&self, shared: &Shared, writer: Option<u64>, keys: &[&[u8]], written: bool) {
        if !self.active() {
            return;
        }
        let mut sends: Vec<Invalidation> = Vec::new();
        {
            let mut guard = self.table.lock();
            let t = &mut *guard;
            let skip = |id: u64, o: &TrackingOptions| o.noloop && Some(id) == writer;
            for key in keys {
                let Some(ids) = t.keys.remove(*key) else { continue };
                for id in ids {
                    if t.clients.get(&id).is_some_and(|o| !o.bcast && !skip(id, o)) {
                        sends.push(Invalidation { client: id, keys: Some(vec![key.to_vec()]) });
                    }
                }
            }
            for key in keys.iter().filter(|_| written) {
                for prefix in t.prefixes.keys().filter(|p| key.starts_with(p)) {
                    let by = t.written.entry(prefix.clone()).or_default().entry(key.to_vec()).or_insert(writer);
                    if *by != writer {
                        *by = None;
                    }
                }
            }
        }
        self.send(shared, sends, writer);
        if writer.is_none() {
            self.broadcast(shared);
        }
    }

    /// Sends the broadcasting mode's invalidations gathered so far.
    pub(super) fn broadcast(&self, shared: &Shared) {
        if !self.active() {
            return;
        }
        let mut sends = Vec::new();
        {
            let mut t = self.table.lock();
            if t.written.is_empty() {
                return;
            }
            let written = std::mem::take(&mut t.written);
            for (prefix, keys) in written {
                for &id in t.prefixes.get(&prefix).into_iter().flatten() {
                    let noloop = t.clients.get(&id).is_some_and(|o| o.noloop);
                    let keys: Vec<Vec<u8>> =
                        keys.iter().filter(|(_, by)| !(noloop && **by == Some(id))).map(|(k, _)| k.clone()).collect();
                    if !keys.is_empty() {
                        sends.push(Invalidation { client: id, keys: Some(keys) });
                    }
                }
            }
        }
        self.send(shared, sends, None);
    }

    /// A database was emptied (by `writer`, if a client): every tracking
    /// client drops everything, and the table forgets every key (whether or
    /// not a client tracks now, as Redis empties its table).
    pub(super) fn invalidate_all(&self, shared: &Shared, writer: Option<u64>) {
        let sends = {
            let mut t = self.table.lock();
            t.keys.clear();
            t.clients.keys().map(|&client| Invalidation { client, keys: None }).collect()
        };
        self.send(shared, sends, writer);
    }

    /// Sends each invalidation; one for the writing client itself follows
    /// its reply.
    fn send(&self, shared: &Shared, sends: Vec<Invalidation>, writer: Option<u64>) {
        for inv in sends {
            let Some(options) = self.table.lock().clients.get(&inv.client).cloned() else { continue };
            let lookup = |id: u64| shared.clients.lock().get(&id).cloned();
            let Some(own) = lookup(inv.client) else { continue };
            let (target, redirected) = match options.redirect {
                None => (own, false),
                Some(to) => {
                    let Some(target) = lookup(to) else {
                        self.redirect_broken(&own, to);
                        continue;
                    };
                    (target, true)
                }
            };
            let keys = match inv.keys {
                Some(keys) => Reply::Array(keys.into_iter().map(|k| Reply::Bulk(Some(k))).collect()),
                None => Reply::Bulk(None),
            };
            let message = if target.resp.load(Ordering::Relaxed) == 3 {
                Reply::Push(vec![Reply::bulk("invalidate"), keys])
            } else if redirected && target.subscribed() {
                Reply::Push(vec![Reply::bulk("message"), Reply::bulk("__redis__:invalidate"), keys])
            } else {
                continue;
            };
            // The writer's own invalidation follows its reply (its
            // connection takes it after the reply while it tracks).
            let own = Some(target.id) == writer && self.table.lock().clients.contains_key(&target.id);
            super::pubsub::deliver_reply(&target, &message, own);
        }
    }

    /// Tells a RESP3 tracking client, once, that its REDIRECT target has
    /// gone.
    fn redirect_broken(&self, client: &Arc<ClientInfo>, to: u64) {
        if !self.table.lock().broken.insert(client.id) || client.resp.load(Ordering::Relaxed) != 3 {
            return;
        }
        let message =
            Reply::Push(vec![Reply::bulk("tracking-redir-broken"), Reply::Integer(i64::try_from(to).unwrap_or(0))]);
        super::pubsub::deliver_reply(client, &message, false);
    }
}
