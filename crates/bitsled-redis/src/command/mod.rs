//! The Redis command layer: argument parsing, dispatch and replies with
//! Redis 7's exact semantics and error texts. Shared by the `bitsled` CLI
//! and (later) a network server.
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

mod args;
mod bitfield;
mod bitmaps;
mod bloom;
mod expiry;
mod hll;
mod introspect;
mod keyspace;
mod scan;
mod strings;

use bitsled::Db;
use bitsled::Error;

/// A reply to a command, as RESP2 knows them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// A status line, such as `OK` or `PONG`.
    Status(String),
    /// An error; the text starts with its code (`ERR`, `WRONGTYPE`).
    Error(String),
    /// An integer.
    Integer(i64),
    /// A bulk string; `None` is the nil bulk string.
    Bulk(Option<Vec<u8>>),
    /// An array of replies.
    Array(Vec<Reply>),
    /// The nil array (`*-1`).
    NilArray,
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

    /// The reply in the RESP2 wire format.
    #[must_use]
    pub fn to_resp(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_resp(&mut out);
        out
    }

    fn write_resp(&self, out: &mut Vec<u8>) {
        match self {
            Reply::Status(s) => out.extend_from_slice(format!("+{s}\r\n").as_bytes()),
            Reply::Error(e) => out.extend_from_slice(format!("-{e}\r\n").as_bytes()),
            Reply::Integer(n) => out.extend_from_slice(format!(":{n}\r\n").as_bytes()),
            Reply::Bulk(None) => out.extend_from_slice(b"$-1\r\n"),
            Reply::Bulk(Some(b)) => {
                out.extend_from_slice(format!("${}\r\n", b.len()).as_bytes());
                out.extend_from_slice(b);
                out.extend_from_slice(b"\r\n");
            }
            Reply::NilArray => out.extend_from_slice(b"*-1\r\n"),
            Reply::Array(items) => {
                out.extend_from_slice(format!("*{}\r\n", items.len()).as_bytes());
                for i in items {
                    i.write_resp(out);
                }
            }
        }
    }
}

/// An error reply on its way out of a command: the full error text.
#[derive(Debug)]
pub(crate) struct Fail(pub(crate) String);

impl Fail {
    pub(crate) fn new(text: impl Into<String>) -> Fail {
        Fail(text.into())
    }
}

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        Fail(error_text(&e))
    }
}

/// What a command handler returns.
pub(crate) type CmdResult = Result<Reply, Fail>;

/// The Redis error text for a library error.
///
/// [`Error::WrongType`] is Redis's `WRONGTYPE` error; an
/// [`Error::InvalidArgument`] carries Redis's own text and gets the `ERR`
/// code; everything else is `ERR` followed by the error's description.
#[must_use]
pub fn error_text(e: &Error) -> String {
    match e {
        Error::WrongType => "WRONGTYPE Operation against a key holding the wrong kind of value".into(),
        Error::InvalidArgument(t) => format!("ERR {t}"),
        Error::OffsetOutOfRange { .. } => args::ERR_OFFSET.into(),
        other => format!("ERR {other}"),
    }
}

/// One command: its lowercase name, Redis's arity (positive: exactly that
/// many arguments including the name; negative: at least that many) and
/// its handler.
struct Spec {
    name: &'static str,
    arity: i32,
    run: fn(&Db, &[Vec<u8>]) -> CmdResult,
}

const fn spec(name: &'static str, arity: i32, run: fn(&Db, &[Vec<u8>]) -> CmdResult) -> Spec {
    Spec { name, arity, run }
}

/// Every command this layer knows.
static COMMANDS: &[Spec] = &[
    spec("setbit", 4, bitmaps::setbit),
    spec("getbit", 3, bitmaps::getbit),
    spec("bitcount", -2, bitmaps::bitcount),
    spec("bitpos", -3, bitmaps::bitpos),
    spec("bitop", -4, bitmaps::bitop),
    spec("bitfield", -2, bitfield::bitfield),
    spec("bitfield_ro", -2, bitfield::bitfield_ro),
    spec("get", 2, strings::get),
    spec("set", -3, strings::set),
    spec("strlen", 2, strings::strlen),
    spec("mget", -2, strings::mget),
    spec("getdel", 2, strings::getdel),
    spec("getrange", 4, strings::getrange),
    spec("substr", 4, strings::getrange),
    spec("setrange", 4, strings::setrange),
    spec("append", 3, strings::append),
    spec("del", -2, keyspace::del),
    spec("unlink", -2, keyspace::del),
    spec("exists", -2, keyspace::exists),
    spec("type", 2, keyspace::type_of),
    spec("keys", 2, keyspace::keys),
    spec("scan", -2, scan::scan),
    spec("dbsize", 1, keyspace::dbsize),
    spec("ping", -1, keyspace::ping),
    spec("echo", 2, keyspace::echo),
    spec("rename", 3, keyspace::rename_cmd),
    spec("renamenx", 3, keyspace::renamenx),
    spec("copy", -3, keyspace::copy),
    spec("flushall", -1, keyspace::flushall),
    spec("flushdb", -1, keyspace::flushall),
    spec("expire", -3, expiry::expire),
    spec("pexpire", -3, expiry::pexpire),
    spec("expireat", -3, expiry::expireat),
    spec("pexpireat", -3, expiry::pexpireat),
    spec("ttl", 2, expiry::ttl),
    spec("pttl", 2, expiry::pttl),
    spec("expiretime", 2, expiry::expiretime),
    spec("pexpiretime", 2, expiry::pexpiretime),
    spec("persist", 2, expiry::persist),
    spec("pfadd", -2, hll::pfadd),
    spec("pfcount", -2, hll::pfcount),
    spec("pfmerge", -2, hll::pfmerge),
    spec("bf.reserve", -4, bloom::reserve),
    spec("bf.add", 3, bloom::add),
    spec("bf.madd", -3, bloom::madd),
    spec("bf.exists", 3, bloom::exists),
    spec("bf.mexists", -3, bloom::mexists),
    spec("bf.insert", -4, bloom::insert),
    spec("bf.info", -2, bloom::info),
    spec("bf.card", 2, bloom::card),
    spec("command", -1, introspect::command),
];

/// Name and arity of every command in the dispatch table, in its order.
pub(crate) fn commands() -> impl Iterator<Item = (&'static str, i32)> {
    COMMANDS.iter().map(|s| (s.name, s.arity))
}

/// Runs one command (`args[0]` is its name, in any case) against `db` and
/// returns Redis's reply, errors included: this function never fails and
/// never panics on any input.
///
/// An unknown command gets Redis 7's `ERR unknown command '...', with args
/// beginning with: ...` and a wrong argument count `ERR wrong number of
/// arguments for '...' command`, both checked before anything else.
#[must_use]
pub fn execute(db: &Db, args: &[Vec<u8>]) -> Reply {
    let Some(name) = args.first() else { return Reply::Error("ERR empty command".into()) };
    let Some(spec) = COMMANDS.iter().find(|s| s.name.as_bytes().eq_ignore_ascii_case(name)) else {
        return Reply::Error(unknown_command(args));
    };
    let argc = args.len();
    let arity_ok = match usize::try_from(spec.arity) {
        Ok(exact) => argc == exact,
        Err(_) => argc >= spec.arity.unsigned_abs() as usize,
    };
    if !arity_ok {
        return Reply::Error(wrong_arity(spec.name));
    }
    match (spec.run)(db, args) {
        Ok(r) => r,
        Err(Fail(text)) => Reply::Error(sanitize(&text)),
    }
}

/// Whether `name` is a command [`execute`] knows (in any case).
#[must_use]
pub fn is_known(name: &[u8]) -> bool {
    COMMANDS.iter().any(|s| s.name.as_bytes().eq_ignore_ascii_case(name))
}

/// Whether `name` (in any case) changes the data set when it succeeds:
/// Redis's `write` command flag. A server uses it to decide which replies
/// must wait for durability.
#[must_use]
pub fn is_write(name: &[u8]) -> bool {
    let lower = name.to_ascii_lowercase();
    std::str::from_utf8(&lower).is_ok_and(|n| is_known(name) && introspect::is_write(n))
}

/// Redis's arity error for command `name` (lowercase).
pub(crate) fn wrong_arity(name: &str) -> String {
    format!("ERR wrong number of arguments for '{name}' command")
}

/// Redis 7's unknown-command error: the name (at most 128 bytes) and the
/// first arguments, each quoted and followed by a space, until 128 bytes of
/// them are listed. Like Redis's `%s`, each stops at a NUL byte.
fn unknown_command(args: &[Vec<u8>]) -> String {
    let c_str = |a: &[u8], max: usize| -> Vec<u8> {
        let a = &a[..a.iter().position(|&c| c == 0).unwrap_or(a.len())];
        a[..a.len().min(max)].to_vec()
    };
    let mut listed: Vec<u8> = Vec::new();
    for a in &args[1..] {
        if listed.len() >= 128 {
            break;
        }
        listed.push(b'\'');
        listed.extend(c_str(a, 128 - listed.len() + 1));
        listed.extend_from_slice(b"' ");
    }
    let mut text = b"ERR unknown command '".to_vec();
    text.extend(c_str(&args[0], 128));
    text.extend_from_slice(b"', with args beginning with: ");
    text.extend(listed);
    sanitize(&String::from_utf8_lossy(&text))
}

/// Redis replaces CR and LF in error texts with spaces (a RESP error is
/// one line).
fn sanitize(text: &str) -> String {
    text.replace(['\r', '\n'], " ")
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
            "ERR unknown command 'foo', with args beginning with: 'a' 'b' "
        );
        assert_eq!(unknown_command(&a(&["FOO"])), "ERR unknown command 'FOO', with args beginning with: ");
        assert_eq!(unknown_command(&a(&["x", "a\r\nb"])), "ERR unknown command 'x', with args beginning with: 'a  b' ");
    }

    /// Arguments are listed until 128 bytes are reached; an argument is cut
    /// so that the listed text stays within that budget.
    #[test]
    fn unknown_command_limits_length() {
        let long = "y".repeat(300);
        let text = unknown_command(&a(&["x", &long, "z"]));
        let listed = text.split_once("with: ").unwrap().1;
        assert_eq!(listed, format!("'{}' ", "y".repeat(128)));
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
