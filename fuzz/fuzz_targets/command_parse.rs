//! Arbitrary bytes as command input: never a panic, and replies stay
//! well-formed.
//!
//! The first byte picks the mode. Even: the rest is redis-cli text, split
//! into lines and each line into arguments with
//! `bitsled_redis::command::cli_syntax::split_args`; every split must survive a
//! round trip (quoting each argument and splitting again gives the same
//! arguments). Odd: the rest is raw arguments (0xFF separates arguments,
//! 0xFE commands). Every command runs through `bitsled_redis::command::execute`
//! against one database (flushed before each input); an error or status
//! reply must be one line, as RESP requires.
#![no_main]

use std::sync::OnceLock;

use bitsled_redis::command::cli_syntax::split_args;
use bitsled_redis::command::{execute, Reply};
use bitsled::{Config, Db};
use libfuzzer_sys::fuzz_target;

fn db() -> &'static Db {
    static DB: OnceLock<(tempfile::TempDir, Db)> = OnceLock::new();
    &DB.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        // Small budgets: evictions and write-backs happen; GET of a huge
        // bitmap is refused instead of building it in memory.
        let db = Config::new(dir.path())
            .cache_bytes(256 << 10)
            .dirty_bytes(64 << 10)
            .max_value_bytes(1 << 20)
            .flush_interval(None)
            .open()
            .expect("open the database");
        (dir, db)
    })
    .1
}

/// `arg` in double quotes with every byte but letters and digits escaped.
fn quote(arg: &[u8]) -> Vec<u8> {
    let mut out = b"\"".to_vec();
    for &b in arg {
        if b.is_ascii_alphanumeric() {
            out.push(b);
        } else {
            out.extend_from_slice(format!("\\x{b:02x}").as_bytes());
        }
    }
    out.push(b'"');
    out
}

fn check_reply(r: &Reply) {
    match r {
        Reply::Error(t) => assert!(!t.contains(&b'\r') && !t.contains(&b'\n'), "multi-line reply {t:?}"),
        Reply::Status(t) => assert!(!t.contains(['\r', '\n']), "multi-line reply {t:?}"),
        Reply::Array(items) | Reply::Set(items) => items.iter().for_each(check_reply),
        Reply::Map(pairs) => pairs.iter().for_each(|(k, v)| {
            check_reply(k);
            check_reply(v);
        }),
        _ => {}
    }
}

fn run(args: &[Vec<u8>]) {
    if args.is_empty() {
        return;
    }
    let reply = execute(db(), args);
    check_reply(&reply);
    assert!(!reply.to_resp().is_empty());
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else { return };
    let _ = execute(db(), &[b"FLUSHALL".to_vec()]);
    if mode % 2 == 0 {
        for line in rest.split(|&b| b == b'\n') {
            let Some(args) = split_args(line) else { continue };
            let quoted: Vec<Vec<u8>> = args.iter().map(|a| quote(a)).collect();
            assert_eq!(split_args(&quoted.join(&b' ')).as_ref(), Some(&args), "round trip of {line:?}");
            run(&args);
        }
    } else {
        for command in rest.split(|&b| b == 0xfe) {
            run(&command.split(|&b| b == 0xff).map(<[u8]>::to_vec).collect::<Vec<_>>());
        }
    }
});
