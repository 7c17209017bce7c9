//! The Redis command layer: argument parsing, dispatch and replies with
//! Redis 7's exact semantics and error texts. Shared by the `bitsled` CLI
//! and the server. It knows nothing of the server's state: the server
//! commands ask the server behind a session through this layer's `Host`
//! trait, which the server implements for each connection.
//!
//! ```
//! # fn main() -> bitsled::Result<()> {
//! # let dir = tempfile::tempdir()?;
//! use bitsled_redis::command::{execute, Reply};
//! let db = bitsled::Db::open(dir.path())?;
//! let cmd = |s: &str| s.split(' ').map(|a| a.as_bytes().to_vec()).collect::<Vec<_>>();
//! assert_eq!(execute(&db, &cmd("SETBIT k 7 1")), Reply::Integer(0));
//! assert_eq!(execute(&db, &cmd("get k")), Reply::Bulk(Some(vec![1])));
//! assert_eq!(
//!     execute(&db, &cmd("SETBIT k 4294967296 1")),
//!     Reply::Error("ERR bit offset is not an integer or out of range".into())
//! );
//! # Ok(()) }
//! ```

pub mod cli_syntax;
pub mod format;
mod session;
pub mod spec;
pub mod table;

mod admin;
mod args;
mod bitfield;
mod bitmaps;
mod bloom;
mod cluster;
mod connection;
mod dispatch;
mod dump;
mod expiry;
mod hll;
mod host;
mod info;
mod introspect;
mod keyspace;
mod lcs;
mod longdouble;
mod lzf;
mod migrate;
mod notify;
mod object;
mod pubsub;
mod replication;
mod scan;
mod slot_migration;
mod strings;
mod tracking;
mod transaction;
mod values;

pub(crate) use connection::REDIS_VERSION;
pub(crate) use host::{Bgsave, ByKind, ClientAddr, Host, HostMemory, SaveFailed, Setting, SubKind, TrackingOptions};
pub(crate) use info::used_memory;
pub(crate) use notify::{
    format_flags as format_keyspace_events, parse_flags as parse_keyspace_events, Event as KeyEvent, EXPIRED, KEYEVENT,
    KEYSPACE,
};
pub(crate) use pubsub::unsubscribe_all;
pub(crate) use session::{Close, ReplyMode};
pub(crate) use session::{CommandStat, StatKey};
pub use session::{Proto, Session};
pub use spec::{Flags, Spec};
pub use values::{parse_memory, POLICIES};

use bitsled::{Db, Error};

/// A reply to a command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// A status line, such as `OK` or `PONG`.
    Status(String),
    /// An error: the bytes of the line, starting with its code (`ERR`,
    /// `WRONGTYPE`). Bytes, not text: Redis echoes a client's bytes in some
    /// errors, whatever they are.
    Error(Vec<u8>),
    /// An integer.
    Integer(i64),
    /// A boolean: RESP3's `#t` / `#f`, the integer 1 / 0 in RESP2 (what
    /// RedisBloom answers BF.ADD and BF.EXISTS with).
    Bool(bool),
    /// A bulk string; `None` is the nil bulk string.
    Bulk(Option<Vec<u8>>),
    /// An array of replies.
    Array(Vec<Reply>),
    /// The nil array (`*-1`).
    NilArray,
    /// An out-of-band message (pub/sub): a push in RESP3, an array in
    /// RESP2. Sent even while CLIENT REPLY is OFF or SKIP.
    Push(Vec<Reply>),
    /// Several replies to one command, sent one after the other (SUBSCRIBE
    /// confirms each channel with a push of its own). Inside EXEC's array
    /// they count as one element, as in Redis.
    Several(Vec<Reply>),
    /// Field-value pairs: a map in RESP3, a flat array of fields and
    /// values in RESP2 (HELLO, CONFIG GET, BF.INFO).
    Map(Vec<(Reply, Reply)>),
    /// An unordered collection: a set in RESP3, an array in RESP2 (the
    /// flags and categories of COMMAND INFO).
    Set(Vec<Reply>),
}

impl Reply {
    /// The `OK` status.
    #[must_use]
    pub fn ok() -> Reply {
        Reply::Status("OK".into())
    }

    /// A bulk string.
    #[must_use]
    pub fn bulk(bytes: impl Into<Vec<u8>>) -> Reply {
        Reply::Bulk(Some(bytes.into()))
    }

    /// An error reply with `text`.
    #[must_use]
    pub fn error(text: impl Into<Vec<u8>>) -> Reply {
        Reply::Error(text.into())
    }

    /// What of the reply goes out while CLIENT REPLY is OFF or SKIP: its
    /// pushes, if any.
    #[must_use]
    pub fn pushes_only(self) -> Option<Reply> {
        match self {
            Reply::Push(_) => Some(self),
            Reply::Several(replies) => {
                let pushes: Vec<Reply> = replies.into_iter().filter_map(Reply::pushes_only).collect();
                (!pushes.is_empty()).then_some(Reply::Several(pushes))
            }
            _ => None,
        }
    }

    /// The reply in the RESP2 wire format.
    #[must_use]
    pub fn to_resp(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write(Proto::Resp2, &mut out);
        out
    }

    /// Appends the reply to `out` in protocol `proto`. RESP3 differs from
    /// RESP2 for nils (`_`), maps (`%`), sets (`~`) and booleans (`#`);
    /// RESP2 sends maps as flat arrays of fields and values, sets as arrays
    /// and booleans as the integers 1 and 0.
    pub fn write(&self, proto: Proto, out: &mut Vec<u8>) {
        let resp3 = proto == Proto::Resp3;
        match self {
            Reply::Status(s) => line(out, b'+', s.as_bytes()),
            Reply::Error(e) => write_error(e, out),
            Reply::Integer(n) => line(out, b':', itoa::Buffer::new().format(*n).as_bytes()),
            Reply::Bool(b) if resp3 => line(out, b'#', if *b { b"t" } else { b"f" }),
            Reply::Bool(b) => line(out, b':', if *b { b"1" } else { b"0" }),
            Reply::Bulk(Some(b)) => write_bulk(b, out),
            Reply::Bulk(None) | Reply::NilArray if resp3 => out.extend_from_slice(b"_\r\n"),
            Reply::Bulk(None) => out.extend_from_slice(b"$-1\r\n"),
            Reply::NilArray => out.extend_from_slice(b"*-1\r\n"),
            Reply::Array(items) | Reply::Set(items) => {
                let tag = if resp3 && matches!(self, Reply::Set(_)) { b'~' } else { b'*' };
                line(out, tag, itoa::Buffer::new().format(items.len()).as_bytes());
                for i in items {
                    i.write(proto, out);
                }
            }
            Reply::Push(items) => {
                line(out, if resp3 { b'>' } else { b'*' }, itoa::Buffer::new().format(items.len()).as_bytes());
                for i in items {
                    i.write(proto, out);
                }
            }
            Reply::Several(replies) => {
                for r in replies {
                    r.write(proto, out);
                }
            }
            Reply::Map(pairs) => {
                if resp3 {
                    line(out, b'%', itoa::Buffer::new().format(pairs.len()).as_bytes());
                } else {
                    line(out, b'*', itoa::Buffer::new().format(2 * pairs.len()).as_bytes());
                }
                for (k, v) in pairs {
                    k.write(proto, out);
                    v.write(proto, out);
                }
            }
        }
    }
}

fn line(out: &mut Vec<u8>, tag: u8, body: &[u8]) {
    out.push(tag);
    out.extend_from_slice(body);
    out.extend_from_slice(b"\r\n");
}

/// Appends the RESP bulk string `b` (the same in RESP2 and RESP3; requests
/// are arrays of them).
pub(crate) fn write_bulk(b: &[u8], out: &mut Vec<u8>) {
    line(out, b'$', itoa::Buffer::new().format(b.len()).as_bytes());
    out.extend_from_slice(b);
    out.extend_from_slice(b"\r\n");
}

/// Appends the RESP error line `text` (the same in RESP2 and RESP3); a byte
/// that would end the line becomes a space, as [`sanitize`] makes it.
pub(crate) fn write_error(text: &[u8], out: &mut Vec<u8>) {
    out.push(b'-');
    out.extend(text.iter().map(|&c| if matches!(c, b'\r' | b'\n') { b' ' } else { c }));
    out.extend_from_slice(b"\r\n");
}

/// An error reply on its way out of a command: the full error line.
#[derive(Debug)]
pub(crate) struct Fail(pub(crate) Vec<u8>);

impl Fail {
    pub(crate) fn new(text: impl Into<Vec<u8>>) -> Fail {
        Fail(text.into())
    }
}

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        Fail(error_text(&e).into_bytes())
    }
}

/// Redis's refusal of a write on a replica.
pub(crate) const READONLY_REPLICA: &str = "READONLY You can't write against a read only replica.";

/// What a command handler returns.
pub(crate) type CmdResult = Result<Reply, Fail>;

/// The Redis error text for a library error.
///
/// [`Error::WrongType`] is Redis's `WRONGTYPE` error; an
/// [`Error::InvalidArgument`] carries Redis's own text and gets the `ERR`
/// code; [`Error::DiskFull`] gets Redis's `MISCONF`; everything else is `ERR` followed by the error's description.
#[must_use]
pub fn error_text(e: &Error) -> String {
    match e {
        Error::WrongType => "WRONGTYPE Operation against a key holding the wrong kind of value".into(),
        Error::InvalidArgument(t) => format!("ERR {t}"),
        Error::OffsetOutOfRange { .. } => args::ERR_OFFSET.into(),
        // Redis's code for writes refused because the server cannot
        // persist (`stop-writes-on-bgsave-error`, a failing AOF).
        Error::DiskFull { .. } => format!("MISCONF Errors writing to the store: {e}"),
        Error::ReadOnlyReplica => READONLY_REPLICA.into(),
        other => format!("ERR {other}"),
    }
}

/// Runs one command (`args[0]` is its name, in any case) against `db` in a
/// fresh session and returns Redis's reply, errors included: this function
/// never fails and never panics on any input. Connection state (SELECT,
/// MULTI) does not outlive the call; use a [`Session`] for that.
///
/// An unknown command gets Redis 7's `ERR unknown command '...', with args
/// beginning with: ...` and a wrong argument count `ERR wrong number of
/// arguments for '...' command`, both checked before anything else.
#[must_use]
pub fn execute(db: &Db, args: &[Vec<u8>]) -> Reply {
    Session::new(db.clone()).execute(args)
}

/// The positions of the secrets in `args` that logs redact
/// ([`Spec::secret_args`] of the command or subcommand they call); none
/// for a call the table refuses.
pub(crate) fn secret_args(args: &[Vec<u8>]) -> Vec<usize> {
    if args.is_empty() {
        return Vec::new();
    }
    dispatch::resolve(args).map_or_else(|_| Vec::new(), |spec| spec.secret_args(args))
}

/// Redis's arity error for command `name` (lowercase; `container|sub` for a
/// subcommand).
pub(crate) fn wrong_arity(name: &str) -> String {
    format!("ERR wrong number of arguments for '{name}' command")
}

/// The bytes of `a` up to its first NUL, at most `max` of them: what C's
/// `%.*s` prints.
pub(crate) fn c_str(a: &[u8], max: usize) -> &[u8] {
    let a = &a[..a.iter().position(|&c| c == 0).unwrap_or(a.len())];
    &a[..a.len().min(max)]
}

/// Redis 7's unknown-command error: the name (at most 128 bytes) and the
/// first arguments, each quoted and followed by a space, until 128 bytes of
/// them are listed. Like Redis's `%s`, each stops at a NUL byte.
pub(crate) fn unknown_command(args: &[Vec<u8>]) -> Vec<u8> {
    let mut listed: Vec<u8> = Vec::new();
    for a in &args[1..] {
        if listed.len() >= 128 {
            break;
        }
        listed.push(b'\'');
        listed.extend_from_slice(c_str(a, 128 - listed.len() + 1));
        listed.extend_from_slice(b"' ");
    }
    let mut text = b"ERR unknown command '".to_vec();
    text.extend_from_slice(c_str(&args[0], 128));
    text.extend_from_slice(b"', with args beginning with: ");
    text.extend(listed);
    sanitize(text)
}

/// Redis 7's error for an unknown subcommand of `cmd`: the subcommand as
/// given (at most 128 bytes, up to a NUL byte) and the command's name in
/// upper case.
pub(crate) fn unknown_subcommand(cmd: &[u8], sub: &[u8]) -> Vec<u8> {
    let mut text = b"ERR unknown subcommand '".to_vec();
    text.extend_from_slice(c_str(sub, 128));
    text.extend_from_slice(b"'. Try ");
    text.extend(c_str(cmd, usize::MAX).to_ascii_uppercase());
    text.extend_from_slice(b" HELP.");
    sanitize(text)
}

/// Redis replaces CR and LF in error texts with spaces (a RESP error is
/// one line).
pub(crate) fn sanitize(mut text: Vec<u8>) -> Vec<u8> {
    for c in &mut text {
        if matches!(*c, b'\r' | b'\n') {
            *c = b' ';
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &[&str]) -> Vec<Vec<u8>> {
        s.iter().map(|x| x.as_bytes().to_vec()).collect()
    }

    /// The unknown-command text keeps Redis's quoting and trailing space.
    #[test]
    fn unknown_command_text() {
        assert_eq!(
            unknown_command(&a(&["foo", "a", "b"])),
            b"ERR unknown command 'foo', with args beginning with: 'a' 'b' "
        );
        assert_eq!(unknown_command(&a(&["FOO"])), b"ERR unknown command 'FOO', with args beginning with: ");
        assert_eq!(
            unknown_command(&a(&["x", "a\r\nb"])),
            b"ERR unknown command 'x', with args beginning with: 'a  b' "
        );
    }

    /// Arguments are listed until 128 bytes are reached; an argument is cut
    /// so that the listed text stays within that budget.
    #[test]
    fn unknown_command_limits_length() {
        let long = "y".repeat(300);
        let text = String::from_utf8(unknown_command(&a(&["x", &long, "z"]))).unwrap();
        let listed = text.split_once("with: ").unwrap().1;
        assert_eq!(listed, format!("'{}' ", "y".repeat(128)));
    }

    /// RESP3 differs for nils, maps and sets; RESP2 flattens maps.
    #[test]
    fn encodes_resp2_and_resp3() {
        let r = Reply::Array(vec![Reply::Bulk(None), Reply::NilArray, Reply::Integer(5)]);
        let mut three = Vec::new();
        r.write(Proto::Resp3, &mut three);
        assert_eq!(three, b"*3\r\n_\r\n_\r\n:5\r\n");
        let map = Reply::Map(vec![(Reply::bulk("a"), Reply::Integer(1))]);
        let mut out = Vec::new();
        map.write(Proto::Resp3, &mut out);
        assert_eq!(out, b"%1\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(map.to_resp(), b"*2\r\n$1\r\na\r\n:1\r\n");
        let set = Reply::Set(vec![Reply::Status("x".into())]);
        let mut out = Vec::new();
        set.write(Proto::Resp3, &mut out);
        assert_eq!(out, b"~1\r\n+x\r\n");
        assert_eq!(set.to_resp(), b"*1\r\n+x\r\n");
    }

    /// The RESP encoding of every reply kind.
    #[test]
    fn resp_encoding() {
        let r = Reply::Array(vec![
            Reply::ok(),
            Reply::Error("ERR x".into()),
            Reply::Integer(-1),
            Reply::bulk(&b"ab"[..]),
            Reply::Bulk(None),
            Reply::NilArray,
        ]);
        assert_eq!(r.to_resp(), b"*6\r\n+OK\r\n-ERR x\r\n:-1\r\n$2\r\nab\r\n$-1\r\n*-1\r\n".to_vec());
    }
}
