//! What the command table says about each command: Redis 7's metadata
//! (arity, flags, key positions and key specs, ACL categories, tips,
//! subcommands) and the handler that runs it. One [`Spec`] per command is
//! the only place these facts live: dispatch, arity checks, MULTI queueing,
//! write detection (for `--fsync always`), the slow log's redaction and
//! `COMMAND` all read it.

use bitsled::Db;

use super::session::Session;
use super::{CmdResult, Reply};

/// Command flags, as Redis 7 lists them in `COMMAND INFO` (in that order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flags(u32);

macro_rules! flags {
    ($($name:ident = $bit:expr, $text:expr;)*) => {
        impl Flags {
            $(
                #[doc = concat!("Redis's `", $text, "` flag.")]
                pub const $name: Flags = Flags(1 << $bit);
            )*
            /// Every flag with its name, in Redis's listing order.
            const NAMED: &'static [(Flags, &'static str)] = &[$((Flags::$name, $text)),*];
        }
    };
}

flags! {
    WRITE = 0, "write";
    READONLY = 1, "readonly";
    DENYOOM = 2, "denyoom";
    MODULE = 3, "module";
    ADMIN = 4, "admin";
    PUBSUB = 5, "pubsub";
    NOSCRIPT = 6, "noscript";
    BLOCKING = 7, "blocking";
    LOADING = 8, "loading";
    STALE = 9, "stale";
    SKIP_MONITOR = 10, "skip_monitor";
    SKIP_SLOWLOG = 11, "skip_slowlog";
    ASKING = 12, "asking";
    FAST = 13, "fast";
    NO_AUTH = 14, "no_auth";
    MAY_REPLICATE = 15, "may_replicate";
    NO_MANDATORY_KEYS = 16, "no_mandatory_keys";
    NO_ASYNC_LOADING = 17, "no_async_loading";
    NO_MULTI = 18, "no_multi";
    ALLOW_BUSY = 19, "allow_busy";
    MOVABLEKEYS = 20, "movablekeys";
}

/// The bits of Redis's flags (those [`Flags::names`] lists).
const REDIS_BITS: u32 = (1 << 21) - 1;

/// The bits of bitsled's own flags: facts about a command that Redis keeps
/// in its code rather than in its table. `COMMAND INFO` never lists them.
const OWN_BITS: u32 = Flags::NOT_QUEUED.0
    | Flags::SECRET_ARGS.0
    | Flags::SECRET_AUTH_OPTION.0
    | Flags::SECRET_CONFIG_VALUES.0
    | Flags::EMPTIES_DB.0;

impl Flags {
    /// No flag.
    pub const NONE: Flags = Flags(0);

    /// bitsled's own flag: inside MULTI the command runs at once instead
    /// of being queued (EXEC, DISCARD, MULTI, WATCH, QUIT and RESET, the
    /// list Redis 7's `processCommand` spells out).
    pub const NOT_QUEUED: Flags = Flags(1 << 24);
    /// bitsled's own flag: every argument after the name is a secret that
    /// logs show as `(redacted)` (AUTH's user name and password).
    pub const SECRET_ARGS: Flags = Flags(1 << 25);
    /// bitsled's own flag: the user name and password of an `AUTH user
    /// pass` option are secrets that logs show as `(redacted)` (HELLO).
    pub const SECRET_AUTH_OPTION: Flags = Flags(1 << 26);
    /// bitsled's own flag: in `parameter value` pairs, the values of the
    /// password parameters (`requirepass`, `masterauth`) are secrets that
    /// logs show as `(redacted)` (CONFIG SET).
    pub const SECRET_CONFIG_VALUES: Flags = Flags(1 << 27);
    /// bitsled's own flag: the command empties a database (FLUSHDB,
    /// FLUSHALL, SWAPDB): client tracking invalidates every key.
    pub const EMPTIES_DB: Flags = Flags(1 << 28);

    /// The bits of the flags set.
    #[must_use]
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// The flags whose bits are set in `bits` (unknown bits are dropped).
    #[must_use]
    pub const fn from_bits(bits: u32) -> Flags {
        Flags(bits & (REDIS_BITS | OWN_BITS))
    }

    /// Whether every flag of `other` is set.
    #[must_use]
    pub const fn contains(self, other: Flags) -> bool {
        self.0 & other.0 == other.0
    }

    /// The names of Redis's flags set, in Redis's order (bitsled's own
    /// flags have none).
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        Flags::NAMED.iter().filter(move |(f, _)| self.contains(*f)).map(|(_, n)| *n)
    }
}

impl std::ops::BitOr for Flags {
    type Output = Flags;
    fn bitor(self, rhs: Flags) -> Flags {
        Flags(self.0 | rhs.0)
    }
}

/// Where a key spec's keys start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Begin {
    /// At this argument index.
    Index(i32),
    /// After this keyword, searching from this index (negative: from the end).
    Keyword(&'static str, i32),
}

/// How a key spec's keys continue from where they begin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Find {
    /// `(lastkey, keystep, limit)`: up to `lastkey` (negative: from the
    /// end), every `keystep`-th argument.
    Range(i32, i32, i32),
    /// `(keynumidx, firstkey, keystep)`: the number of keys is at
    /// `keynumidx`, the keys start `firstkey` after it.
    Keynum(i32, i32, i32),
}

/// One of Redis 7's key specifications: which arguments are keys and how
/// the command uses them (`RO`, `RW`, `OW`, `RM`, `access`, `update`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeySpec {
    /// Redis's note, or empty.
    pub notes: &'static str,
    /// Redis's key-spec flags.
    pub flags: &'static [&'static str],
    /// Where the keys begin.
    pub begin: Begin,
    /// How they continue.
    pub find: Find,
}

/// What runs a command.
#[derive(Clone, Copy)]
pub(crate) enum Handler {
    /// A data command: it needs only the selected database.
    Data(DataFn),
    /// A connection or server command: it reads or changes the session
    /// (the selected database, the transaction, authentication, the
    /// server behind it).
    Conn(fn(&mut Session, &[Vec<u8>]) -> CmdResult),
    /// A command about the command table itself (`COMMAND`, `EXEC`): it
    /// reads the table, or runs commands, through [`Commands`].
    Tabled(fn(&mut Session, &[Vec<u8>], &dyn Commands) -> CmdResult),
}

/// A data command's handler.
pub(crate) type DataFn = fn(&Db, &[Vec<u8>]) -> CmdResult;

/// What a [`Handler::Tabled`] handler may ask of the command table. The
/// dispatcher, which owns the table, passes it in, so that no handler
/// depends on the table that lists it.
pub(crate) trait Commands {
    /// Every command, in the table's order.
    fn all(&self) -> &'static [Spec];
    /// The command named `name` (any case).
    fn lookup(&self, name: &[u8]) -> Option<&'static Spec>;
    /// Runs `args` as EXEC runs a queued command: resolved again (a refusal
    /// is its error reply), without queueing, counted in the statistics,
    /// with EXEC already holding the server's transaction lock.
    fn run_queued(&self, s: &mut Session, args: &[Vec<u8>]) -> Reply;
}

impl std::fmt::Debug for Handler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Handler::Data(_) => "Data",
            Handler::Conn(_) => "Conn",
            Handler::Tabled(_) => "Tabled",
        })
    }
}

/// One command (or subcommand) of the table.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    /// The lowercase name; a subcommand's is `container|sub`.
    pub name: &'static str,
    /// Redis's arity: positive, exactly that many arguments including the
    /// name; negative, at least that many.
    pub arity: i32,
    /// Redis's flags.
    pub flags: Flags,
    /// Redis's legacy key positions: first key, last key (negative: from
    /// the end), step; `(0, 0, 0)` when the command takes no key.
    pub keys: (i32, i32, i32),
    /// ACL categories.
    pub acl: &'static [&'static str],
    /// Redis's command tips (how a cluster client routes and merges).
    pub tips: &'static [&'static str],
    /// Redis 7's key specifications.
    pub key_specs: &'static [KeySpec],
    /// Subcommands (of `COMMAND`, `CLIENT`, `CONFIG`): when the command
    /// has some and a second argument is given, it names the subcommand
    /// that runs.
    pub subcommands: &'static [Spec],
    /// What runs it.
    pub(crate) run: Handler,
}

impl Spec {
    /// Whether `argc` arguments (the name included) satisfy the arity.
    #[must_use]
    pub fn arity_ok(&self, argc: usize) -> bool {
        match usize::try_from(self.arity) {
            Ok(exact) => argc == exact,
            Err(_) => argc >= self.arity.unsigned_abs() as usize,
        }
    }

    /// Whether the command changes the data set when it succeeds (Redis's
    /// `write` flag).
    #[must_use]
    pub fn is_write(&self) -> bool {
        self.flags.contains(Flags::WRITE)
    }

    /// The positions of the arguments in `args` (a call of this command,
    /// its name first) that logs show as `(redacted)`, as Redis's
    /// `redactClientCommandArgument` calls choose them; the
    /// `SECRET_*` flags say which apply. Costs nothing for a command with
    /// none of them.
    #[must_use]
    pub fn secret_args(&self, args: &[Vec<u8>]) -> Vec<usize> {
        let is = |j: usize, word: &[u8]| args.get(j).is_some_and(|a| a.eq_ignore_ascii_case(word));
        let mut out = Vec::new();
        if self.flags.contains(Flags::SECRET_ARGS) {
            out.extend(1..args.len());
        }
        // Only a call with whole pairs: an odd count is a syntax error
        // before Redis looks at a parameter.
        if self.flags.contains(Flags::SECRET_CONFIG_VALUES) && args.len() % 2 == 0 {
            out.extend(
                (2..args.len()).step_by(2).filter(|&j| is(j, b"requirepass") || is(j, b"masterauth")).map(|j| j + 1),
            );
        }
        if self.name == "migrate" {
            // MIGRATE ... [AUTH password | AUTH2 username password]: the
            // options after the five fixed arguments.
            let mut j = 6;
            while j < args.len() {
                if is(j, b"auth") {
                    out.push(j + 1);
                    j += 1;
                } else if is(j, b"auth2") {
                    out.extend([j + 1, j + 2]);
                    j += 2;
                } else if is(j, b"keys") {
                    break;
                }
                j += 1;
            }
            out.retain(|&i| i < args.len());
        }
        if self.flags.contains(Flags::SECRET_AUTH_OPTION) {
            // HELLO protover [AUTH user pass] [SETNAME name], options in
            // any order, read as Redis reads them: the first word that is
            // neither option ends the options.
            let mut j = 2;
            while j < args.len() {
                if is(j, b"auth") && j + 2 < args.len() {
                    out.extend([j + 1, j + 2]);
                    j += 3;
                } else if is(j, b"setname") && j + 1 < args.len() {
                    j += 2;
                } else {
                    break;
                }
            }
        }
        out
    }

    /// The subcommand named `sub` (any case) of this container.
    #[must_use]
    pub fn subcommand(&self, sub: &[u8]) -> Option<&'static Spec> {
        let short = |s: &Spec| s.name.split_once('|').map_or(s.name, |(_, n)| n);
        self.subcommands.iter().find(|s| short(s).as_bytes().eq_ignore_ascii_case(sub))
    }
}

#[cfg(test)]
mod tests {
    use super::{Flags, Spec};
    use crate::command::table::{lookup, COMMANDS};

    /// bitsled's own flags survive `from_bits` but never reach `COMMAND
    /// INFO`, which lists Redis's 21 alone.
    #[test]
    fn own_flags_are_not_listed() {
        let all = Flags::from_bits(u32::MAX);
        for own in [Flags::NOT_QUEUED, Flags::SECRET_ARGS, Flags::SECRET_AUTH_OPTION, Flags::SECRET_CONFIG_VALUES] {
            assert!(all.contains(own), "{own:?}");
        }
        assert_eq!(all.names().count(), 21);
        let exec = lookup(b"exec").expect("exec");
        assert_eq!(exec.flags.names().collect::<Vec<_>>(), ["noscript", "loading", "stale", "skip_slowlog"]);
    }

    /// The commands MULTI runs at once are the six Redis 7 names.
    #[test]
    fn not_queued_commands() {
        let every = COMMANDS.iter().flat_map(|s| std::iter::once(s).chain(s.subcommands));
        let mut names: Vec<&str> =
            every.filter(|s: &&Spec| s.flags.contains(Flags::NOT_QUEUED)).map(|s| s.name).collect();
        names.sort_unstable();
        assert_eq!(names, ["discard", "exec", "multi", "quit", "reset", "watch"]);
    }
}
