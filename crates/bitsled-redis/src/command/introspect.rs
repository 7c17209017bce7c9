//! `COMMAND`, `COMMAND COUNT`, `COMMAND LIST`, `COMMAND INFO`, `COMMAND DOCS`
//! and `COMMAND HELP`: what the dispatch table knows, in Redis 7's reply
//! shapes.
//!
//! A command's entry is Redis 7's ten-element array: name, arity, flags,
//! first key, last key, key step, ACL categories, tips, key specs and
//! subcommands. The name and the arity come from the dispatch table and are
//! exact. Flags, key positions and ACL categories come from the table
//! below, copied by hand from Redis 7.0's for the commands bitsled
//! implements (they describe Redis, not bitsled's own costs, so treat them as
//! an approximation); a command missing from it gets no flags, no key
//! positions and `@slow`. Tips and key specs are always empty arrays, and
//! `COMMAND DOCS` replies with an empty array.

use super::{commands, wrong_arity, CmdResult, Fail, Reply};
use bitsled::Db;

/// What `COMMAND INFO` says about a command besides its name and arity:
/// flags, first key, last key, key step, ACL categories.
type Traits = (&'static [&'static str], i64, i64, i64, &'static [&'static str]);

const W: &[&str] = &["write"];
const WD: &[&str] = &["write", "denyoom"];
const WF: &[&str] = &["write", "fast"];
const R: &[&str] = &["readonly"];
const RF: &[&str] = &["readonly", "fast"];
const F: &[&str] = &["fast"];
const LS: &[&str] = &["loading", "stale"];

const BITMAP_W: &[&str] = &["@write", "@bitmap", "@slow"];
const BITMAP_R: &[&str] = &["@read", "@bitmap", "@slow"];
const BITMAP_RF: &[&str] = &["@read", "@bitmap", "@fast"];
const STRING_W: &[&str] = &["@write", "@string", "@slow"];
const STRING_WF: &[&str] = &["@write", "@string", "@fast"];
const STRING_R: &[&str] = &["@read", "@string", "@slow"];
const STRING_RF: &[&str] = &["@read", "@string", "@fast"];
const KEY_W: &[&str] = &["@keyspace", "@write", "@slow"];
const KEY_WF: &[&str] = &["@keyspace", "@write", "@fast"];
const KEY_WD: &[&str] = &["@keyspace", "@write", "@slow", "@dangerous"];
const KEY_R: &[&str] = &["@keyspace", "@read", "@slow"];
const KEY_RF: &[&str] = &["@keyspace", "@read", "@fast"];
const KEY_RD: &[&str] = &["@keyspace", "@read", "@slow", "@dangerous"];
const CONN: &[&str] = &["@fast", "@connection"];
const CONN_SLOW: &[&str] = &["@slow", "@connection"];

/// Flags, key positions and ACL categories of `name` (lowercase), as Redis
/// 7 gives them; an approximation for commands it does not list.
fn traits(name: &str) -> Traits {
    match name {
        "setbit" | "bitfield" => (WD, 1, 1, 1, BITMAP_W),
        "getbit" => (RF, 1, 1, 1, BITMAP_RF),
        "bitfield_ro" => (RF, 1, 1, 1, BITMAP_RF),
        "bitcount" | "bitpos" => (R, 1, 1, 1, BITMAP_R),
        "bitop" => (WD, 2, -1, 1, BITMAP_W),
        "get" | "strlen" => (RF, 1, 1, 1, STRING_RF),
        "mget" => (RF, 1, -1, 1, STRING_RF),
        "set" | "setrange" => (WD, 1, 1, 1, STRING_W),
        "getdel" => (WF, 1, 1, 1, STRING_WF),
        "append" => (&["write", "denyoom", "fast"], 1, 1, 1, STRING_WF),
        "getrange" | "substr" => (R, 1, 1, 1, STRING_R),
        "del" => (W, 1, -1, 1, KEY_W),
        "unlink" => (WF, 1, -1, 1, KEY_WF),
        "exists" => (RF, 1, -1, 1, KEY_RF),
        "type" | "ttl" | "pttl" | "expiretime" | "pexpiretime" => (RF, 1, 1, 1, KEY_RF),
        "keys" => (R, 0, 0, 0, KEY_RD),
        "scan" => (R, 0, 0, 0, KEY_R),
        "dbsize" => (RF, 0, 0, 0, KEY_RF),
        "ping" => (F, 0, 0, 0, CONN),
        "echo" => (&["loading", "stale", "fast"], 0, 0, 0, CONN),
        "rename" => (W, 1, 2, 1, KEY_W),
        "renamenx" => (WF, 1, 2, 1, KEY_WF),
        "copy" => (WD, 1, 2, 1, KEY_W),
        "flushall" | "flushdb" => (W, 0, 0, 0, KEY_WD),
        "expire" | "pexpire" | "expireat" | "pexpireat" | "persist" => (WF, 1, 1, 1, KEY_WF),
        "command" => (LS, 0, 0, 0, CONN_SLOW),
        "pfadd" => (&["write", "denyoom", "fast"], 1, 1, 1, &["@write", "@hyperloglog", "@fast"]),
        "pfcount" => (R, 1, -1, 1, &["@read", "@hyperloglog", "@slow"]),
        "pfmerge" => (WD, 1, -1, 1, &["@write", "@hyperloglog", "@slow"]),
        "bf.reserve" | "bf.add" | "bf.madd" | "bf.insert" => (WD, 1, 1, 1, &["@write", "@bloom"]),
        "bf.exists" | "bf.mexists" | "bf.info" | "bf.card" => (RF, 1, 1, 1, &["@read", "@bloom"]),
        _ => (&[], 0, 0, 0, &["@slow"]),
    }
}

/// Whether command `name` (lowercase) has Redis's `write` flag.
pub(super) fn is_write(name: &str) -> bool {
    traits(name).0.contains(&"write")
}

/// The subcommands of COMMAND: name and Redis's arity.
const SUBCOMMANDS: &[(&str, i64)] = &[("count", 2), ("docs", -2), ("help", 2), ("info", -2), ("list", -2)];

/// `COMMAND [COUNT | LIST | INFO name... | DOCS name... | HELP]`.
pub(crate) fn command(_db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let Some(sub) = a.get(1) else {
        return Ok(Reply::Array(commands().map(|(name, arity)| info(name, arity)).collect()));
    };
    let Some(&(sub_name, arity)) = SUBCOMMANDS.iter().find(|(n, _)| n.as_bytes().eq_ignore_ascii_case(sub)) else {
        return Err(unknown_subcommand(&a[0], sub));
    };
    let argc = a.len() as i64;
    if (arity >= 0 && argc != arity) || argc < arity.abs() {
        return Err(Fail(wrong_arity(&format!("command|{sub_name}"))));
    }
    Ok(match sub_name {
        "count" => Reply::Integer(commands().count() as i64),
        "list" => list(&a[2..])?,
        "info" if a.len() == 2 => Reply::Array(commands().map(|(name, arity)| info(name, arity)).collect()),
        "info" => Reply::Array(a[2..].iter().map(|n| lookup(n).unwrap_or(Reply::Bulk(None))).collect()),
        "docs" => Reply::Array(Vec::new()),
        _ => help(),
    })
}

/// `COMMAND LIST`: every command's name. Redis's `FILTERBY` is not
/// supported (a syntax error).
fn list(rest: &[Vec<u8>]) -> Result<Reply, Fail> {
    if !rest.is_empty() {
        return Err(Fail::new(super::args::ERR_SYNTAX));
    }
    Ok(Reply::Array(commands().map(|(name, _)| Reply::bulk(name)).collect()))
}

/// The `COMMAND INFO` entry of `name` (any case; `command|sub` names a
/// subcommand), or `None` when no such command exists.
fn lookup(name: &[u8]) -> Option<Reply> {
    let (parent, sub) = match name.iter().position(|&c| c == b'|') {
        Some(i) => (&name[..i], Some(&name[i + 1..])),
        None => (name, None),
    };
    let (found, arity) = commands().find(|(n, _)| n.as_bytes().eq_ignore_ascii_case(parent))?;
    match sub {
        None => Some(info(found, arity)),
        Some(sub) if found == "command" => SUBCOMMANDS
            .iter()
            .find(|(n, _)| n.as_bytes().eq_ignore_ascii_case(sub))
            .map(|&(n, arity)| entry(&format!("command|{n}"), arity, traits("command"), Vec::new())),
        Some(_) => None,
    }
}

/// The `COMMAND INFO` entry of command `name` from the dispatch table.
fn info(name: &str, arity: i32) -> Reply {
    let subcommands = if name == "command" {
        SUBCOMMANDS.iter().map(|&(n, a)| entry(&format!("command|{n}"), a, traits("command"), Vec::new())).collect()
    } else {
        Vec::new()
    };
    entry(name, i64::from(arity), traits(name), subcommands)
}

/// Redis 7's ten-element command entry.
fn entry(name: &str, arity: i64, traits: Traits, subcommands: Vec<Reply>) -> Reply {
    let (flags, first, last, step, categories) = traits;
    let statuses = |list: &[&str]| Reply::Array(list.iter().map(|s| Reply::Status((*s).into())).collect());
    Reply::Array(vec![
        Reply::bulk(name),
        Reply::Integer(arity),
        statuses(flags),
        Reply::Integer(first),
        Reply::Integer(last),
        Reply::Integer(step),
        statuses(categories),
        Reply::Array(Vec::new()),
        Reply::Array(Vec::new()),
        Reply::Array(subcommands),
    ])
}

/// `COMMAND HELP`, for the subcommands bitsled has.
fn help() -> Reply {
    const LINES: &[&str] = &[
        "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "(no subcommand)",
        "    Return details about all commands.",
        "COUNT",
        "    Return the total number of commands.",
        "LIST",
        "    Return a list of all commands.",
        "INFO [<command-name> ...]",
        "    Return details about multiple commands.",
        "    If no command names are given, details for all commands are returned.",
        "DOCS [<command-name> ...]",
        "    Return documentation details about multiple commands (always empty in bitsled).",
        "HELP",
        "    Print this help.",
    ];
    Reply::Array(LINES.iter().map(|l| Reply::Status((*l).into())).collect())
}

/// Redis 7's error for an unknown subcommand: the subcommand as given (at
/// most 128 bytes, up to a NUL byte, like C's `%.128s`) and the command's
/// name in upper case.
fn unknown_subcommand(cmd: &[u8], sub: &[u8]) -> Fail {
    let c_str = |s: &[u8]| s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())].to_vec();
    let mut sub = c_str(sub);
    sub.truncate(128);
    let cmd = c_str(cmd).to_ascii_uppercase();
    Fail(format!(
        "ERR unknown subcommand '{}'. Try {} HELP.",
        String::from_utf8_lossy(&sub),
        String::from_utf8_lossy(&cmd)
    ))
}

#[cfg(test)]
mod tests {
    use super::super::execute;
    use super::*;

    fn run(db: &Db, s: &[&str]) -> Reply {
        execute(db, &s.iter().map(|x| x.as_bytes().to_vec()).collect::<Vec<_>>())
    }

    fn db() -> (tempfile::TempDir, Db) {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path()).unwrap();
        (dir, db)
    }

    fn statuses(list: &[&str]) -> Reply {
        Reply::Array(list.iter().map(|s| Reply::Status((*s).into())).collect())
    }

    #[test]
    fn count_is_the_dispatch_table() {
        let (_dir, db) = db();
        let n = commands().count();
        assert!(n > 30);
        assert_eq!(run(&db, &["COMMAND", "COUNT"]), Reply::Integer(n as i64));
        assert_eq!(run(&db, &["command", "count"]), Reply::Integer(n as i64));
        let Reply::Array(all) = run(&db, &["COMMAND"]) else { panic!() };
        assert_eq!(all.len(), n);
        let Reply::Array(names) = run(&db, &["COMMAND", "LIST"]) else { panic!() };
        assert_eq!(names.len(), n);
        assert!(names.contains(&Reply::bulk("command")) && names.contains(&Reply::bulk("setbit")));
        let Reply::Array(infos) = run(&db, &["COMMAND", "INFO"]) else { panic!() };
        assert_eq!(infos, all);
    }

    #[test]
    fn info_has_redis_7_shape() {
        let (_dir, db) = db();
        let empty = Reply::Array(Vec::new());
        assert_eq!(
            run(&db, &["COMMAND", "INFO", "SETBIT", "nosuch", "bitop", "mget"]),
            Reply::Array(vec![
                Reply::Array(vec![
                    Reply::bulk("setbit"),
                    Reply::Integer(4),
                    statuses(&["write", "denyoom"]),
                    Reply::Integer(1),
                    Reply::Integer(1),
                    Reply::Integer(1),
                    statuses(&["@write", "@bitmap", "@slow"]),
                    empty.clone(),
                    empty.clone(),
                    empty.clone(),
                ]),
                Reply::Bulk(None),
                Reply::Array(vec![
                    Reply::bulk("bitop"),
                    Reply::Integer(-4),
                    statuses(&["write", "denyoom"]),
                    Reply::Integer(2),
                    Reply::Integer(-1),
                    Reply::Integer(1),
                    statuses(&["@write", "@bitmap", "@slow"]),
                    empty.clone(),
                    empty.clone(),
                    empty.clone(),
                ]),
                Reply::Array(vec![
                    Reply::bulk("mget"),
                    Reply::Integer(-2),
                    statuses(&["readonly", "fast"]),
                    Reply::Integer(1),
                    Reply::Integer(-1),
                    Reply::Integer(1),
                    statuses(&["@read", "@string", "@fast"]),
                    empty.clone(),
                    empty.clone(),
                    empty.clone(),
                ]),
            ])
        );
        // Every entry has ten elements and the table's arity.
        for (name, arity) in commands() {
            let Reply::Array(e) = info(name, arity) else { panic!() };
            assert_eq!(e.len(), 10);
            assert_eq!(e[1], Reply::Integer(i64::from(arity)));
        }
    }

    #[test]
    fn command_has_subcommands() {
        let (_dir, db) = db();
        let Reply::Array(e) = run(&db, &["COMMAND", "INFO", "command"]) else { panic!() };
        let Reply::Array(entry) = &e[0] else { panic!() };
        let Reply::Array(subs) = &entry[9] else { panic!() };
        assert_eq!(subs.len(), SUBCOMMANDS.len());
        let Reply::Array(one) = run(&db, &["COMMAND", "INFO", "COMMAND|COUNT", "get|x"]) else { panic!() };
        let Reply::Array(count) = &one[0] else { panic!() };
        assert_eq!(count[0], Reply::bulk("command|count"));
        assert_eq!(count[1], Reply::Integer(2));
        assert_eq!(one[1], Reply::Bulk(None));
    }

    #[test]
    fn docs_help_and_errors() {
        let (_dir, db) = db();
        assert_eq!(run(&db, &["COMMAND", "DOCS"]), Reply::Array(Vec::new()));
        assert_eq!(run(&db, &["COMMAND", "DOCS", "get"]), Reply::Array(Vec::new()));
        assert!(matches!(run(&db, &["COMMAND", "HELP"]), Reply::Array(l) if l.len() > 5));
        assert_eq!(
            run(&db, &["command", "foo"]),
            Reply::Error("ERR unknown subcommand 'foo'. Try COMMAND HELP.".into())
        );
        assert_eq!(
            run(&db, &["Command", "x\r\ny"]),
            Reply::Error("ERR unknown subcommand 'x  y'. Try COMMAND HELP.".into())
        );
        let long = "z".repeat(200);
        let Reply::Error(e) = run(&db, &["COMMAND", &long]) else { panic!() };
        assert!(e.contains(&format!("'{}'", "z".repeat(128))));
        assert_eq!(
            run(&db, &["COMMAND", "COUNT", "x"]),
            Reply::Error("ERR wrong number of arguments for 'command|count' command".into())
        );
        assert_eq!(
            run(&db, &["COMMAND", "HELP", "x"]),
            Reply::Error("ERR wrong number of arguments for 'command|help' command".into())
        );
        assert_eq!(run(&db, &["COMMAND", "LIST", "FILTERBY"]), Reply::Error("ERR syntax error".into()));
    }
}
