//! A client's session: the connection state commands read and change (the
//! selected database, authentication, the protocol version, the name, a
//! transaction being queued, the counters not yet handed to the server).
//! Running a command on it is `super::dispatch`'s.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

use bitsled::Db;

use super::host::{ByKind, Host, SubKind};
use super::Reply;

/// The reply protocol a session speaks (HELLO changes it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    /// RESP2, the default.
    Resp2,
    /// RESP3, after `HELLO 3`.
    Resp3,
}

/// The text of Redis's error for a command refused before authentication.
pub(crate) const NOAUTH: &str = "NOAUTH Authentication required.";

/// Per-command counters, for INFO commandstats.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CommandStat {
    pub(crate) calls: u64,
    pub(crate) usec: u64,
    pub(crate) failed: u64,
}

/// A transaction being queued.
pub(crate) struct Multi {
    pub(crate) queue: Vec<Vec<Vec<u8>>>,
    /// A command was refused while queueing: EXEC aborts.
    pub(crate) dirty: bool,
}

/// What the connection does after this session's last reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Close {
    /// Send the reply, then close (QUIT).
    AfterReply,
    /// Close without a reply (SHUTDOWN).
    Silently,
}

/// What CLIENT REPLY asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReplyMode {
    /// Every reply is sent.
    On,
    /// No reply is sent (pushes are).
    Off,
    /// The reply to the next command is not sent.
    SkipNext,
    /// The reply to this command is not sent.
    Skip,
}

/// A session's pub/sub subscriptions, by kind.
pub(crate) type Subscriptions = ByKind<HashSet<Vec<u8>>>;

impl Subscriptions {
    /// The count a confirmation of `kind` carries: channels and patterns
    /// together, shard channels apart (as Redis counts them).
    pub(crate) fn count(&self, kind: SubKind) -> usize {
        match kind {
            SubKind::Shard => self.shard.len(),
            SubKind::Channel | SubKind::Pattern => self.channels.len() + self.patterns.len(),
        }
    }

    /// Whether the client is subscribed to anything (Redis's
    /// `CLIENT_PUBSUB` flag).
    pub(crate) fn any(&self) -> bool {
        !(self.channels.is_empty() && self.patterns.is_empty() && self.shard.is_empty())
    }
}

/// One client's session. The CLI keeps one for its whole input (so SELECT
/// and MULTI span lines, as in redis-cli); the server keeps one per
/// connection.
pub struct Session {
    pub(crate) db: Db,
    /// The server behind the connection; `None` in the CLI.
    pub(crate) host: Option<Arc<dyn Host>>,
    pub(crate) authed: bool,
    pub(crate) proto: Proto,
    pub(crate) name: Option<Vec<u8>>,
    pub(crate) multi: Option<Multi>,
    /// Keys watched (WATCH) since the last EXEC, DISCARD, UNWATCH or RESET.
    pub(crate) watches: Vec<bitsled::Watch>,
    /// Whether a write command ran since [`Session::take_wrote`].
    wrote: bool,
    pub(crate) close: Option<Close>,
    /// Counters not yet handed to the server's statistics.
    pub(crate) stats: HashMap<StatKey, CommandStat, BuildHasherDefault<AddressHasher>>,
    /// Error replies by their code (`ERR`, `WRONGTYPE`, ...) not yet handed
    /// to the server's statistics (INFO errorstats).
    pub(crate) errors: HashMap<String, u64>,
    pub(crate) last_cmd: &'static str,
    /// Pub/sub subscriptions (a server session's only).
    pub(crate) subs: Subscriptions,
    /// CLIENT REPLY.
    pub(crate) reply_mode: ReplyMode,
    /// CLIENT TRACKING, while on.
    pub(crate) tracking: Option<super::host::TrackingOptions>,
    /// CLIENT CACHING yes/no, for the command after it.
    pub(crate) caching: Option<bool>,
    /// In cluster mode: the slots this connection imports from another
    /// node (`CLUSTER IMPORT slots 0`): it may write their keys, and if it
    /// closes before the import ends, the import is abandoned.
    pub(crate) importing: Option<Vec<crate::cluster::topology::SlotRange>>,
    /// What a replica said of itself with REPLCONF: the port it listens
    /// on, and whether it is a bitsled replica (`capa bitsled`).
    pub(crate) replconf: (Option<u16>, bool),
    /// EXEC is running this session's queue (WAIT then does not wait:
    /// EXEC holds every other client off).
    pub(crate) executing: bool,
}

impl Drop for Session {
    /// A connection that closes in the middle of an import (its source
    /// stopped) leaves a partial copy: it is dropped.
    fn drop(&mut self) {
        let Some(slots) = self.importing.take() else { return };
        if let Some(c) = self.host.as_deref().and_then(|h| h.cluster()) {
            if let Err(e) = c.end_import(&self.db, &slots, false) {
                eprintln!("bitsled serve: could not drop the keys of an abandoned import: {e}");
            }
        }
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("db", &self.db).field("proto", &self.proto).finish_non_exhaustive()
    }
}

impl Session {
    /// A session on `db` with no server behind it (as the CLI uses).
    #[must_use]
    pub fn new(db: Db) -> Session {
        Session {
            db,
            host: None,
            authed: true,
            proto: Proto::Resp2,
            name: None,
            multi: None,
            watches: Vec::new(),
            wrote: false,
            close: None,
            stats: HashMap::default(),
            errors: HashMap::new(),
            last_cmd: "NULL",
            subs: Subscriptions::default(),
            reply_mode: ReplyMode::On,
            tracking: None,
            caching: None,
            importing: None,
            replconf: (None, false),
            executing: false,
        }
    }

    /// A session on `db` of a server connection, `host` being the server
    /// as this connection sees it.
    pub(crate) fn for_client(db: Db, host: Arc<dyn Host>) -> Session {
        let mut s = Session::new(db);
        s.authed = host.requirepass().is_none();
        s.host = Some(host);
        s
    }

    /// The protocol replies are encoded in.
    #[must_use]
    pub fn proto(&self) -> Proto {
        self.proto
    }

    /// Bytes of the commands MULTI has queued (their arguments), 0 outside
    /// a transaction.
    #[must_use]
    pub fn queued_bytes(&self) -> usize {
        self.multi.as_ref().map_or(0, |m| m.queue.iter().flatten().map(Vec::len).sum())
    }

    /// Whether the session is subscribed to any channel, pattern or shard
    /// channel: its connection then also carries pushes from publishers.
    #[must_use]
    pub fn subscribed(&self) -> bool {
        self.subs.any()
    }

    /// What of `reply` goes to the client, as CLIENT REPLY says (pushes
    /// always do); called once per command, after it ran.
    pub fn reply_to_send(&mut self, reply: Reply) -> Option<Reply> {
        match self.reply_mode {
            ReplyMode::On => Some(reply),
            ReplyMode::Off => reply.pushes_only(),
            ReplyMode::Skip => {
                self.reply_mode = ReplyMode::On;
                reply.pushes_only()
            }
            ReplyMode::SkipNext => {
                // CLIENT REPLY SKIP itself: its own reply is not sent, nor
                // the next command's.
                self.reply_mode = ReplyMode::Skip;
                reply.pushes_only()
            }
        }
    }

    /// Whether a write command ran since the last call (the server waits
    /// for durability before sending such replies under `--fsync always`).
    pub fn take_wrote(&mut self) -> bool {
        std::mem::take(&mut self.wrote)
    }

    /// An error for a command refused before it ran: inside MULTI it also
    /// dooms the transaction (Redis's `flagTransaction`).
    pub(super) fn refuse(&mut self, text: impl Into<Vec<u8>>) -> Reply {
        if let Some(m) = &mut self.multi {
            m.dirty = true;
        }
        let text = text.into();
        self.count_error(&text);
        Reply::Error(text)
    }

    /// Counts an error reply under its code, the text's first word.
    pub(super) fn count_error(&mut self, text: &[u8]) {
        let code = text.split(|&b| b == b' ').next().unwrap_or_default();
        *self.errors.entry(String::from_utf8_lossy(code).into_owned()).or_default() += 1;
    }

    /// Notes that a write command ran (see [`Session::take_wrote`]).
    pub(super) fn note_write(&mut self) {
        self.wrote = true;
    }
}

/// A command's name as a session's counters key it: by the address of the
/// command table's `'static` name, so counting a command hashes no bytes.
/// Two table entries of one name (none today) would count apart here and
/// be added up by name when the counters reach the server's statistics.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StatKey(pub(crate) &'static str);

impl PartialEq for StatKey {
    fn eq(&self, other: &StatKey) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for StatKey {}

impl std::hash::Hash for StatKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_usize(self.0.as_ptr() as usize);
    }
}

/// The hasher of [`StatKey`]: a multiply of the address, folded so the
/// low bits (which the map indexes by) depend on all of it.
#[derive(Default)]
pub(crate) struct AddressHasher(u64);

impl Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b) ^ self.0.rotate_left(8));
        }
    }

    fn write_u64(&mut self, n: u64) {
        let h = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        self.0 = h ^ (h >> 29);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }
}

/// FNV-1a over a command's name, for the command table's index by name:
/// the default hasher (SipHash, keyed against hash flooding, which a fixed
/// table of names does not need) costs more than the lookup.
#[derive(Default)]
pub(crate) struct NameHasher(u64);

impl Hasher for NameHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 { 0xcbf2_9ce4_8422_2325 } else { self.0 };
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}
