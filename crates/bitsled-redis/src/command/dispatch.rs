//! The one dispatch every command goes through, in Redis 7's order of
//! checks: the command exists, its arity, authentication, then queueing
//! inside MULTI or running it (timed, counted, logged). This module owns
//! the command table; handlers that need the table (`COMMAND`, `EXEC`) get
//! it as [`Commands`], so no handler depends on the table that lists it.

use std::time::Instant;

use bitsled::Durability;

use super::session::{Session, NOAUTH};
use super::spec::{Commands, Flags, Handler, Spec};
use super::{table, unknown_command, unknown_subcommand, wrong_arity, Fail, Reply};

/// The command table, as [`Handler::Tabled`] handlers see it.
struct Table;

impl Commands for Table {
    fn all(&self) -> &'static [Spec] {
        table::COMMANDS
    }

    fn lookup(&self, name: &[u8]) -> Option<&'static Spec> {
        table::lookup(name)
    }

    fn run_queued(&self, s: &mut Session, args: &[Vec<u8>]) -> Reply {
        match resolve(args) {
            Ok(spec) => s.run(spec, args, true),
            Err(Fail(text)) => Reply::Error(text),
        }
    }
}

impl Session {
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
        if let Some(text) = self.cluster_refusal(spec, args, &|q| resolve(q).ok()) {
            // As Redis: a redirected EXEC discards its transaction, and
            // the reply is the redirection itself.
            if spec.name == "exec" {
                self.multi = None;
                self.watches.clear();
            }
            return self.refuse(text);
        }
        if let Some(refused) = self.refuse_for_memory(spec) {
            return refused;
        }
        if let Some(refused) = self.refuse_for_disk(spec, args) {
            return refused;
        }
        if let Some(refused) = self.refuse_for_replica(spec) {
            return refused;
        }
        if let Some(text) = super::pubsub::refusal_while_subscribed(self, spec.name) {
            return self.refuse(text);
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

    /// Redis's `-OOM` refusal, checked as Redis 7 checks it: a command
    /// that may use memory (`denyoom`, or an EXEC with one queued) and any
    /// command queued inside MULTI (but EXEC, DISCARD, QUIT and RESET) is
    /// refused while the server is out of memory ([`Host::out_of_memory`]).
    /// A refused EXEC aborts the transaction.
    fn refuse_for_memory(&mut self, spec: &'static Spec) -> Option<Reply> {
        let host = self.host.as_ref()?;
        let exec = spec.name == "exec";
        let denyoom = spec.flags.contains(Flags::DENYOOM)
            || (exec && self.multi.as_ref().is_some_and(|m| m.queue.iter().any(|args| queued_denies_oom(args))));
        let queued = self.multi.is_some() && !matches!(spec.name, "exec" | "discard" | "quit" | "reset");
        if !(denyoom || queued) || !host.out_of_memory() {
            return None;
        }
        Some(self.refuse_before_running(exec, OOM.to_string()))
    }

    /// Refuses a command before it runs with `text`; an EXEC refused so
    /// discards its transaction (`EXECABORT ... because of: text`).
    fn refuse_before_running(&mut self, exec: bool, text: String) -> Reply {
        if exec && self.multi.is_some() {
            self.multi = None;
            self.watches.clear();
            return self.refuse(format!("EXECABORT Transaction discarded because of: {text}"));
        }
        self.refuse(text)
    }

    /// Runs a resolved command; `in_exec` when EXEC runs it (and already
    /// holds the server's transaction lock exclusively).
    pub(crate) fn run(&mut self, spec: &'static Spec, args: &[Vec<u8>], in_exec: bool) -> Reply {
        // The command running is the last command (CLIENT LIST's `cmd`).
        self.last_cmd = spec.name;
        self.track_before(spec, args);
        // Asked once: whether this write's events are wanted (keyspace
        // events or tracking); without them nothing is collected, and
        // nothing is invalidated after it.
        let wanted = spec.is_write() && self.host.as_ref().is_some_and(|h| h.events_wanted());
        let mut events = None;
        // Timed from when the command may run: a wait for another
        // client's EXEC is not its own time.
        let (reply, start) = match spec.run {
            Handler::Data(_) if self.subscribed() && self.proto == super::Proto::Resp2 && spec.name == "ping" => {
                (Ok(super::pubsub::subscribed_ping(args)), Instant::now())
            }
            Handler::Data(f) => {
                let _shared = self.host.as_ref().filter(|_| !in_exec).map(|h| h.transaction_lock().read());
                let start = Instant::now();
                if let Some(text) = self.migration_refusal(spec, args) {
                    (Err(super::Fail(text.into_bytes())), start)
                } else if wanted {
                    let (reply, raised) = self.run_data(spec, f, args);
                    events = Some(raised);
                    (reply, start)
                } else {
                    (f(&self.db, args), start)
                }
            }
            Handler::Conn(f) => {
                let start = Instant::now();
                (f(self, args), start)
            }
            Handler::Tabled(f) => {
                let start = Instant::now();
                (f(self, args, &Table), start)
            }
        };
        let reply = reply.unwrap_or_else(|Fail(text)| Reply::Error(super::sanitize(text)));
        // An emptied database also empties the tracking table, tracked or
        // not (as Redis does).
        if wanted || self.caching.is_some() || (spec.is_write() && super::tracking::empties(spec)) {
            self.track_after(spec, args, &reply, events.as_deref(), in_exec);
        }
        if let Reply::Error(text) = &reply {
            self.count_error(text);
        }
        if spec.is_write() {
            self.note_write();
        }
        let usec = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
        if let Some(host) = self.host.as_ref().filter(|_| !spec.flags.contains(Flags::SKIP_SLOWLOG)) {
            host.log_command(args, usec, self.name.as_deref().unwrap_or_default());
        }
        let st = self.stats.entry(super::session::StatKey(spec.name)).or_default();
        st.calls += 1;
        st.usec += usec;
        st.failed += u64::from(matches!(reply, Reply::Error(_)));
        reply
    }
}

impl Session {
    /// Redis's `-MISCONF` refusal of writes the server cannot persist:
    /// while the disk is short of space (see `Config::disk_reserve_bytes`),
    /// a write command, or an EXEC with one queued, is refused before it
    /// runs (a refused EXEC aborts the transaction). Under `appendfsync
    /// always` the space is checked afresh before each write, with room
    /// for what the write may add (its arguments' bytes, and at least half
    /// the reserve), so a write that could not be made durable does not
    /// run. Other commands, PING included, are served.
    fn refuse_for_disk(&mut self, spec: &'static Spec, args: &[Vec<u8>]) -> Option<Reply> {
        let exec = spec.name == "exec";
        let write = spec.is_write()
            || (exec && self.multi.as_ref().is_some_and(|m| m.queue.iter().any(|args| queued_writes(args))));
        if !write {
            return None;
        }
        let checked = if self.db.durability() == Durability::Always {
            let args_bytes: usize = args.iter().map(Vec::len).sum();
            self.db.check_disk_space((args_bytes as u64).max(self.db.disk_reserve() / 2))
        } else if self.db.disk_shortage().is_some() {
            self.db.check_disk_space(0)
        } else {
            Ok(())
        };
        let text = super::error_text(&checked.err()?);
        Some(self.refuse_before_running(exec, text))
    }
}

impl Session {
    /// A replica's refusals, as Redis's: `-LOADING` for commands that
    /// cannot run while it loads its master's snapshot, and `-READONLY`
    /// for a write (or an EXEC with one queued), before it runs.
    fn refuse_for_replica(&mut self, spec: &'static Spec) -> Option<Reply> {
        if self.host.as_ref().is_some_and(|h| h.replication().loading()) && !spec.flags.contains(Flags::LOADING) {
            return Some(self.refuse("LOADING Redis is loading the dataset in memory"));
        }
        if !self.db.is_following() {
            return None;
        }
        let exec = spec.name == "exec";
        let write = spec.is_write()
            || (exec && self.multi.as_ref().is_some_and(|m| m.queue.iter().any(|args| queued_writes(args))));
        write.then(|| self.refuse_before_running(exec, super::READONLY_REPLICA.into()))
    }
}

/// Whether a queued command writes (it resolved when queued).
fn queued_writes(args: &[Vec<u8>]) -> bool {
    resolve(args).is_ok_and(Spec::is_write)
}

/// Redis's reply to a command refused for memory.
const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// Whether a queued command may use memory (it resolved when queued).
fn queued_denies_oom(args: &[Vec<u8>]) -> bool {
    resolve(args).is_ok_and(|spec| spec.flags.contains(Flags::DENYOOM))
}

impl Session {
    /// Runs data command `f`; when keyspace events are enabled and the
    /// command writes, publishes the events it raised (after the `new`
    /// events of the keys it created, as Redis raises them first).
    /// Returns the reply and the events the command raised. Only called
    /// when the server wants them (`Host::events_wanted`).
    fn run_data(
        &self,
        spec: &'static Spec,
        f: super::spec::DataFn,
        args: &[Vec<u8>],
    ) -> (super::CmdResult, Vec<super::notify::Event>) {
        let Some(host) = self.host.as_ref() else { return (f(&self.db, args), Vec::new()) };
        let watch_new = host.keyspace_events() & super::notify::NEW != 0;
        let absent: Vec<&[u8]> = if watch_new {
            super::introspect::key_positions(spec, args)
                .unwrap_or_default()
                .into_iter()
                .filter_map(|(i, _)| args.get(i).map(Vec::as_slice))
                .filter(|k| self.db.exists(k).is_ok_and(|e| !e))
                .collect()
        } else {
            Vec::new()
        };
        let (reply, events) = super::notify::collect(|| f(&self.db, args));
        let db = self.db.index();
        for key in absent {
            if self.db.exists(key).is_ok_and(|e| e) {
                let event =
                    super::notify::Event { class: super::notify::NEW, name: "new", key: key.to_vec(), db: None };
                host.notify(db, &event);
            }
        }
        for event in &events {
            host.notify(db, event);
        }
        (reply, events)
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
