//! A client's session: the connection state commands read and change (the
//! selected database, authentication, the protocol version, the name, a
//! transaction being queued), and the one dispatch every command goes
//! through, in Redis 7's order of checks: the command exists, its arity,
//! authentication, then queueing inside MULTI or running it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use bitsled::Db;

use super::host::Host;
use super::spec::{Flags, Handler, Spec};
use super::{table, unknown_command, unknown_subcommand, wrong_arity, Fail, Reply};

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
    pub(crate) stats: HashMap<&'static str, CommandStat>,
    /// Error replies by their code (`ERR`, `WRONGTYPE`, ...) not yet handed
    /// to the server's statistics (INFO errorstats).
    pub(crate) errors: HashMap<String, u64>,
    pub(crate) last_cmd: &'static str,
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
            stats: HashMap::new(),
            errors: HashMap::new(),
            last_cmd: "NULL",
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

    /// Whether a write command ran since the last call (the server waits
    /// for durability before sending such replies under `--fsync always`).
    pub fn take_wrote(&mut self) -> bool {
        std::mem::take(&mut self.wrote)
    }

    /// Runs one command (`args[0]` is its name, in any case) and returns
    /// its reply, errors included; never panics on any input.
    pub fn execute(&mut self, args: &[Vec<u8>]) -> Reply {
        if args.is_empty() {
            return Reply::error("ERR empty command");
        }
        let spec = match resolve(args) {
            Ok(spec) => spec,
            Err(Fail(text)) => return self.refuse(text),
        };
        if !self.authed && !spec.flags.contains(Flags::NO_AUTH) {
            return self.refuse(NOAUTH);
        }
        if self.multi.is_some() && !spec.flags.contains(Flags::NOT_QUEUED) {
            if spec.flags.contains(Flags::NO_MULTI) {
                return self.refuse("ERR Command not allowed inside a transaction");
            }
            if let Some(m) = &mut self.multi {
                m.queue.push(args.to_vec());
            }
            return Reply::Status("QUEUED".into());
        }
        self.run(spec, args, false)
    }

    /// An error for a command refused before it ran: inside MULTI it also
    /// dooms the transaction (Redis's `flagTransaction`).
    fn refuse(&mut self, text: impl Into<Vec<u8>>) -> Reply {
        if let Some(m) = &mut self.multi {
            m.dirty = true;
        }
        let text = text.into();
        self.count_error(&text);
        Reply::Error(text)
    }

    /// Counts an error reply under its code, the text's first word.
    fn count_error(&mut self, text: &[u8]) {
        let code = text.split(|&b| b == b' ').next().unwrap_or_default();
        *self.errors.entry(String::from_utf8_lossy(code).into_owned()).or_default() += 1;
    }

    /// Runs a resolved command; `in_exec` when EXEC runs it (and already
    /// holds the server's transaction lock exclusively).
    pub(crate) fn run(&mut self, spec: &'static Spec, args: &[Vec<u8>], in_exec: bool) -> Reply {
        // Timed from when the command may run: a wait for another
        // client's EXEC is not its own time.
        let (reply, start) = match spec.run {
            Handler::Data(f) => {
                let _shared = self.host.as_ref().filter(|_| !in_exec).map(|h| h.transaction_lock().read());
                let start = Instant::now();
                (f(&self.db, args), start)
            }
            Handler::Conn(f) => {
                let start = Instant::now();
                (f(self, args), start)
            }
        };
        let reply = reply.unwrap_or_else(|Fail(text)| Reply::Error(super::sanitize(text)));
        if let Reply::Error(text) = &reply {
            self.count_error(text);
        }
        if spec.is_write() {
            self.wrote = true;
        }
        let usec = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
        if let Some(host) = self.host.as_ref().filter(|_| !spec.flags.contains(Flags::SKIP_SLOWLOG)) {
            host.log_command(args, usec, self.name.as_deref().unwrap_or_default());
        }
        let st = self.stats.entry(spec.name).or_default();
        st.calls += 1;
        st.usec += usec;
        st.failed += u64::from(matches!(reply, Reply::Error(_)));
        self.last_cmd = spec.name;
        reply
    }
}

/// The command (or, for a container, the subcommand) that `args` names,
/// with its arity checked; or Redis's error for an unknown command, an
/// unknown subcommand or a wrong argument count.
pub(crate) fn resolve(args: &[Vec<u8>]) -> Result<&'static Spec, Fail> {
    let Some(spec) = table::lookup(&args[0]) else { return Err(Fail(unknown_command(args))) };
    if !spec.arity_ok(args.len()) {
        return Err(Fail::new(wrong_arity(spec.name)));
    }
    let Some(sub_name) = args.get(1).filter(|_| !spec.subcommands.is_empty()) else { return Ok(spec) };
    let Some(sub) = spec.subcommand(sub_name) else { return Err(Fail(unknown_subcommand(&args[0], sub_name))) };
    if !sub.arity_ok(args.len()) {
        return Err(Fail::new(wrong_arity(sub.name)));
    }
    Ok(sub)
}
