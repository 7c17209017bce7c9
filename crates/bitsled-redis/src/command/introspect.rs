//! `COMMAND` and its subcommands (`COUNT`, `LIST`, `INFO`, `DOCS`, `HELP`):
//! the command table in Redis 7's reply shapes.
//!
//! An entry is Redis 7's ten-element array: name, arity, flags, first key,
//! last key, key step, ACL categories, tips, key specs and subcommands,
//! all from the command table (given as [`super::spec::Commands`]). `COMMAND DOCS` replies with an empty array.

use super::session::Session;
use super::spec::{Begin, Commands, Find, KeySpec, Spec};
use super::{CmdResult, Fail, Reply};

fn statuses(list: impl IntoIterator<Item = &'static str>) -> Reply {
    Reply::Set(list.into_iter().map(|s| Reply::Status(s.into())).collect())
}

fn pair(field: &str, value: Reply) -> (Reply, Reply) {
    (Reply::bulk(field), value)
}

/// One key spec as Redis 7 describes it.
fn key_spec(ks: &KeySpec) -> Reply {
    let mut fields = Vec::new();
    if !ks.notes.is_empty() {
        fields.push(pair("notes", Reply::bulk(ks.notes)));
    }
    fields.push(pair("flags", statuses(ks.flags.iter().copied())));
    let (kind, spec) = match ks.begin {
        Begin::Index(i) => ("index", vec![pair("index", Reply::Integer(i64::from(i)))]),
        Begin::Keyword(word, from) => {
            ("keyword", vec![pair("keyword", Reply::bulk(word)), pair("startfrom", Reply::Integer(i64::from(from)))])
        }
    };
    fields
        .push(pair("begin_search", Reply::Map(vec![pair("type", Reply::bulk(kind)), pair("spec", Reply::Map(spec))])));
    let (kind, spec) = match ks.find {
        Find::Range(last, step, limit) => (
            "range",
            vec![
                pair("lastkey", Reply::Integer(i64::from(last))),
                pair("keystep", Reply::Integer(i64::from(step))),
                pair("limit", Reply::Integer(i64::from(limit))),
            ],
        ),
        Find::Keynum(idx, first, step) => (
            "keynum",
            vec![
                pair("keynumidx", Reply::Integer(i64::from(idx))),
                pair("firstkey", Reply::Integer(i64::from(first))),
                pair("keystep", Reply::Integer(i64::from(step))),
            ],
        ),
    };
    fields.push(pair("find_keys", Reply::Map(vec![pair("type", Reply::bulk(kind)), pair("spec", Reply::Map(spec))])));
    Reply::Map(fields)
}

/// Redis 7's ten-element `COMMAND INFO` entry of `spec`.
pub(crate) fn entry(spec: &Spec) -> Reply {
    let (first, last, step) = spec.keys;
    Reply::Array(vec![
        Reply::bulk(spec.name),
        Reply::Integer(i64::from(spec.arity)),
        statuses(spec.flags.names()),
        Reply::Integer(i64::from(first)),
        Reply::Integer(i64::from(last)),
        Reply::Integer(i64::from(step)),
        statuses(spec.acl.iter().copied()),
        statuses(spec.tips.iter().copied()),
        Reply::Set(spec.key_specs.iter().map(key_spec).collect()),
        Reply::Set(spec.subcommands.iter().map(entry).collect()),
    ])
}

/// `COMMAND`: every command's entry.
pub(crate) fn all(_s: &mut Session, _a: &[Vec<u8>], c: &dyn Commands) -> CmdResult {
    Ok(Reply::Array(c.all().iter().map(entry).collect()))
}

/// `COMMAND COUNT`.
pub(crate) fn count(_s: &mut Session, _a: &[Vec<u8>], c: &dyn Commands) -> CmdResult {
    Ok(Reply::Integer(i64::try_from(c.all().len()).unwrap_or(i64::MAX)))
}

/// `COMMAND LIST`: every command's name. Redis's `FILTERBY` is not
/// supported (a syntax error).
pub(crate) fn list(_s: &mut Session, a: &[Vec<u8>], c: &dyn Commands) -> CmdResult {
    if a.len() > 2 {
        return Err(Fail::new(super::args::ERR_SYNTAX));
    }
    Ok(Reply::Array(c.all().iter().map(|s| Reply::bulk(s.name)).collect()))
}

/// `COMMAND INFO [name...]`: the entries of the named commands (all without
/// names; `container|sub` names a subcommand), nil for unknown ones.
pub(crate) fn info(s: &mut Session, a: &[Vec<u8>], c: &dyn Commands) -> CmdResult {
    if a.len() == 2 {
        return all(s, a, c);
    }
    Ok(Reply::Array(a[2..].iter().map(|n| find(c, n).map_or(Reply::Bulk(None), entry)).collect()))
}

/// The command or subcommand (`container|sub`) named `name`, in any case.
fn find(c: &dyn Commands, name: &[u8]) -> Option<&'static Spec> {
    match name.iter().position(|&b| b == b'|') {
        None => c.lookup(name),
        Some(i) => c.lookup(&name[..i])?.subcommand(&name[i + 1..]),
    }
}

/// `COMMAND DOCS [name...]`: bitsled has no command documentation to give.
pub(crate) fn docs(_s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Array(Vec::new()))
}

/// `COMMAND HELP`, for the subcommands bitsled has.
pub(crate) fn help(_s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
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
    Ok(Reply::Array(LINES.iter().map(|l| Reply::Status((*l).into())).collect()))
}

#[cfg(test)]
mod tests {
    use super::super::execute;
    use super::super::table::{lookup, COMMANDS};
    use super::*;
    use bitsled::Db;

    fn run(db: &Db, s: &[&str]) -> Reply {
        execute(db, &s.iter().map(|x| x.as_bytes().to_vec()).collect::<Vec<_>>())
    }

    fn db() -> (tempfile::TempDir, Db) {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path()).unwrap();
        (dir, db)
    }

    fn set(list: &[&str]) -> Reply {
        Reply::Set(list.iter().map(|s| Reply::Status((*s).into())).collect())
    }

    /// COUNT, LIST and INFO without names all describe exactly the table.
    #[test]
    fn count_is_the_dispatch_table() {
        let (_dir, db) = db();
        let n = COMMANDS.len();
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

    /// An entry is Redis 7.0.15's, byte for byte in RESP2 (captured from
    /// `COMMAND INFO pfcount`).
    #[test]
    fn info_is_redis_7_entry() {
        let (_dir, db) = db();
        let got = run(&db, &["COMMAND", "INFO", "PFCOUNT", "nosuch"]).to_resp();
        let want = b"*2\r\n*10\r\n$7\r\npfcount\r\n:-2\r\n*1\r\n+readonly\r\n:1\r\n:-1\r\n:1\r\n*3\r\n+@read\r\n\
+@hyperloglog\r\n+@slow\r\n*0\r\n*1\r\n*8\r\n$5\r\nnotes\r\n$90\r\nRW because it may change the internal \
representation of the key, and propagate to replicas\r\n$5\r\nflags\r\n*2\r\n+RW\r\n+access\r\n$12\r\n\
begin_search\r\n*4\r\n$4\r\ntype\r\n$5\r\nindex\r\n$4\r\nspec\r\n*2\r\n$5\r\nindex\r\n:1\r\n$9\r\nfind_keys\r\n\
*4\r\n$4\r\ntype\r\n$5\r\nrange\r\n$4\r\nspec\r\n*6\r\n$7\r\nlastkey\r\n:-1\r\n$7\r\nkeystep\r\n:1\r\n$5\r\n\
limit\r\n:0\r\n*0\r\n$-1\r\n";
        assert_eq!(got.escape_ascii().to_string(), want.escape_ascii().to_string());
        let Reply::Array(e) = run(&db, &["COMMAND", "INFO", "setbit"]) else { panic!() };
        let Reply::Array(setbit) = &e[0] else { panic!() };
        assert_eq!(setbit[2], set(&["write", "denyoom"]));
        assert_eq!(setbit[6], set(&["@write", "@bitmap", "@slow"]));
        // Every entry has ten elements and the table's arity.
        for spec in COMMANDS {
            let Reply::Array(e) = entry(spec) else { panic!() };
            assert_eq!(e.len(), 10);
            assert_eq!(e[1], Reply::Integer(i64::from(spec.arity)));
        }
    }

    #[test]
    fn command_has_subcommands() {
        let (_dir, db) = db();
        let Reply::Array(e) = run(&db, &["COMMAND", "INFO", "command"]) else { panic!() };
        let Reply::Array(entry) = &e[0] else { panic!() };
        let Reply::Set(subs) = &entry[9] else { panic!() };
        assert_eq!(subs.len(), lookup(b"command").unwrap().subcommands.len());
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
        assert_eq!(run(&db, &["command", "foo"]), Reply::error("ERR unknown subcommand 'foo'. Try COMMAND HELP."));
        assert_eq!(run(&db, &["Command", "x\r\ny"]), Reply::error("ERR unknown subcommand 'x  y'. Try COMMAND HELP."));
        let long = "z".repeat(200);
        let Reply::Error(e) = run(&db, &["COMMAND", &long]) else { panic!() };
        assert!(String::from_utf8(e).unwrap().contains(&format!("'{}'", "z".repeat(128))));
        assert_eq!(
            run(&db, &["COMMAND", "COUNT", "x"]),
            Reply::error("ERR wrong number of arguments for 'command|count' command")
        );
        assert_eq!(
            run(&db, &["COMMAND", "HELP", "x"]),
            Reply::error("ERR wrong number of arguments for 'command|help' command")
        );
        assert_eq!(run(&db, &["COMMAND", "LIST", "FILTERBY"]), Reply::error("ERR syntax error"));
    }
}
