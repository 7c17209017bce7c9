//! `COMMAND` and its subcommands (`COUNT`, `LIST`, `INFO`, `DOCS`, `GETKEYS`,
//! `GETKEYSANDFLAGS`, `HELP`):
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

/// Every command of `c`'s table and every subcommand, each after its
/// container.
fn every(c: &dyn Commands) -> impl Iterator<Item = &'static Spec> {
    c.all().iter().flat_map(|s| std::iter::once(s).chain(s.subcommands))
}

/// `COMMAND LIST [FILTERBY MODULE name|ACLCAT category|PATTERN pattern]`:
/// the names of every command and subcommand (`container|sub`), as Redis
/// 7 lists them, or those the filter keeps: none for a module (bitsled's
/// commands are its own, the BF.* ones included), those in an ACL
/// category, those whose name matches a glob pattern (any case).
pub(crate) fn list(_s: &mut Session, a: &[Vec<u8>], c: &dyn Commands) -> CmdResult {
    let keep: Box<dyn Fn(&Spec) -> bool> = match a.len() {
        2 => Box::new(|_| true),
        5 if a[2].eq_ignore_ascii_case(b"FILTERBY") => {
            let value = a[4].to_ascii_lowercase();
            if a[3].eq_ignore_ascii_case(b"MODULE") {
                Box::new(|_| false)
            } else if a[3].eq_ignore_ascii_case(b"ACLCAT") {
                let category = [b"@".as_slice(), &value].concat();
                Box::new(move |s| s.acl.iter().any(|cat| cat.as_bytes() == category.as_slice()))
            } else if a[3].eq_ignore_ascii_case(b"PATTERN") {
                Box::new(move |s| bitsled::glob::glob_match(&value, s.name.as_bytes()))
            } else {
                return Err(Fail::new(super::args::ERR_SYNTAX));
            }
        }
        _ => return Err(Fail::new(super::args::ERR_SYNTAX)),
    };
    Ok(Reply::Array(every(c).filter(|s| keep(s)).map(|s| Reply::bulk(s.name)).collect()))
}

/// The positions in `args` (a call, its name first) of the keys `spec`'s
/// key specs find, each with its spec's flags, by Redis 7's rules
/// (`getKeysUsingKeySpecs`): a spec whose keyword is absent finds nothing;
/// positions past the arguments are dropped; a key count that does not
/// parse makes the whole call invalid (`None`).
pub(super) fn key_positions(spec: &Spec, args: &[Vec<u8>]) -> Option<Vec<(usize, KeyFlags)>> {
    let argc = i64::try_from(args.len()).ok()?;
    let mut out = Vec::new();
    for ks in spec.key_specs {
        let first = match ks.begin {
            Begin::Index(i) => i64::from(i),
            Begin::Keyword(word, from) => {
                let from = i64::from(from);
                let start = if from > 0 { from } else { argc + from };
                let step = if from > 0 { 1 } else { -1 };
                let mut i = start;
                let mut found = None;
                while (1..argc).contains(&i) {
                    if args[usize::try_from(i).ok()?].eq_ignore_ascii_case(word.as_bytes()) {
                        found = Some(i + 1);
                        break;
                    }
                    i += step;
                }
                match found {
                    Some(f) => f,
                    None => continue,
                }
            }
        };
        let (first, last, step) = match ks.find {
            Find::Range(last, step, limit) => {
                let last = match (last, limit) {
                    (l, _) if l >= 0 => first + i64::from(l),
                    (l, 0) => argc + i64::from(l),
                    (l, limit) => first + (argc - first) / i64::from(limit) + i64::from(l),
                };
                (first, last, i64::from(step))
            }
            Find::Keynum(idx, key1, step) => {
                let at = usize::try_from(first + i64::from(idx)).ok().filter(|&i| i < args.len())?;
                let n: i64 = std::str::from_utf8(&args[at]).ok()?.parse().ok().filter(|&n| n >= 0)?;
                let first = first + i64::from(key1);
                (first, first + n - 1, i64::from(step))
            }
        };
        let mut i = first;
        while i <= last && step > 0 {
            if (first..argc).contains(&i) {
                out.push((usize::try_from(i).ok()?, ks.flags));
            }
            i += step;
        }
    }
    Some(out)
}

/// The flags of a key spec, as the table spells them.
type KeyFlags = &'static [&'static str];

/// The flags of the key of a call of `spec` whose key spec says
/// `variable_flags`: they depend on the arguments, as Redis's SET and
/// BITFIELD decide them (SET with GET reads the key, BITFIELD with only
/// GET and OVERFLOW writes nothing).
fn variable_flags(spec: &Spec, call: &[Vec<u8>]) -> Option<KeyFlags> {
    const WRITTEN: &[&str] = &["OW", "update"];
    const READ_AND_WRITTEN: &[&str] = &["RW", "access", "update"];
    const READ: &[&str] = &["RO", "access"];
    let is = |a: &[u8], w: &str| a.eq_ignore_ascii_case(w.as_bytes());
    match spec.name {
        "set" => Some(if call.iter().skip(3).any(|a| is(a, "get")) { READ_AND_WRITTEN } else { WRITTEN }),
        "bitfield" => {
            let mut i = 2;
            while i < call.len() {
                let left = call.len() - i - 1;
                if is(&call[i], "get") && left >= 2 {
                    i += 3;
                } else if is(&call[i], "overflow") && left >= 1 {
                    i += 2;
                } else {
                    // A write, or a syntax error (taken as a write).
                    return Some(READ_AND_WRITTEN);
                }
            }
            Some(READ)
        }
        _ => None,
    }
}

/// The positions of the keys of a call (`args`, its name first) of
/// `spec`, with their key specs' flags: [`key_positions`], but MIGRATE's
/// keys move with its KEYS option (Redis's `migrateGetKeys`).
fn call_positions(spec: &Spec, args: &[Vec<u8>]) -> Option<Vec<(usize, KeyFlags)>> {
    if spec.name == "migrate" {
        let flags = spec.key_specs.first()?.flags;
        Some(super::migrate::key_positions(args).into_iter().map(|i| (i, flags)).collect())
    } else {
        key_positions(spec, args)
    }
}

/// The keys of a call (`args`, its name first) of `spec`; none for a call
/// whose key count does not parse (it fails when it runs).
pub(super) fn call_keys<'a>(spec: &Spec, args: &'a [Vec<u8>]) -> Vec<&'a [u8]> {
    if spec.key_specs.is_empty() {
        return Vec::new();
    }
    call_positions(spec, args)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(i, _)| args.get(i).map(Vec::as_slice))
        .collect()
}

/// The keys of the call `a[2..]` for COMMAND GETKEYS and GETKEYSANDFLAGS,
/// with Redis 7's errors.
fn keys_of<'a>(a: &'a [Vec<u8>], c: &dyn Commands) -> Result<Vec<(&'a [u8], KeyFlags)>, Fail> {
    let call = &a[2..];
    let spec = c.lookup(&call[0]).and_then(|s| match call.get(1) {
        Some(sub) if !s.subcommands.is_empty() => s.subcommand(sub),
        _ => Some(s),
    });
    let Some(spec) = spec else { return Err(Fail::new("ERR Invalid command specified")) };
    if spec.key_specs.is_empty() {
        return Err(Fail::new("ERR The command has no key arguments"));
    }
    if !spec.arity_ok(call.len()) {
        return Err(Fail::new("ERR Invalid number of arguments specified for command"));
    }
    match call_positions(spec, call) {
        Some(keys) if !keys.is_empty() => {
            let flags = |f: KeyFlags| {
                if f.contains(&"variable_flags") {
                    variable_flags(spec, call).unwrap_or(f)
                } else {
                    f
                }
            };
            Ok(keys.into_iter().map(|(i, f)| (call[i].as_slice(), flags(f))).collect())
        }
        _ if spec.flags.contains(super::spec::Flags::NO_MANDATORY_KEYS) => Ok(Vec::new()),
        _ => Err(Fail::new("ERR Invalid arguments specified for command")),
    }
}

/// `COMMAND GETKEYS command [arg ...]`: the keys the call would use.
pub(crate) fn getkeys(_s: &mut Session, a: &[Vec<u8>], c: &dyn Commands) -> CmdResult {
    Ok(Reply::Array(keys_of(a, c)?.into_iter().map(|(k, _)| Reply::bulk(k)).collect()))
}

/// `COMMAND GETKEYSANDFLAGS command [arg ...]`: each key with its key
/// spec's flags.
pub(crate) fn getkeysandflags(_s: &mut Session, a: &[Vec<u8>], c: &dyn Commands) -> CmdResult {
    Ok(Reply::Array(
        keys_of(a, c)?
            .into_iter()
            .map(|(k, flags)| Reply::Array(vec![Reply::bulk(k), statuses(flags.iter().copied())]))
            .collect(),
    ))
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
        "LIST [FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)]",
        "    Return a list of all commands and subcommands, or those the filter keeps.",
        "INFO [<command-name> ...]",
        "    Return details about multiple commands.",
        "    If no command names are given, details for all commands are returned.",
        "DOCS [<command-name> ...]",
        "    Return documentation details about multiple commands (always empty in bitsled).",
        "GETKEYS <full-command>",
        "    Return the keys a full command would use.",
        "GETKEYSANDFLAGS <full-command>",
        "    Return those keys with the flags of their key specs.",
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

    /// COUNT and INFO without names describe exactly the table's commands,
    /// LIST its commands and their subcommands (as Redis 7 lists them).
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
        let subs: usize = COMMANDS.iter().map(|s| s.subcommands.len()).sum();
        assert!(subs > 10);
        assert_eq!(names.len(), n + subs);
        for name in ["command", "setbit", "command|getkeys", "config|get", "client|list"] {
            assert!(names.contains(&Reply::bulk(name)), "{name}");
        }
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
        assert_eq!(run(&db, &["COMMAND", "LIST", "FILTERBY", "FOO", "x"]), Reply::error("ERR syntax error"));
    }
}
