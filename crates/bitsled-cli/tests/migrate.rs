//! `bitsled migrate` moves a Redis dataset: 2,000 monthly sign-in bitmaps
//! (some with TTLs), a bitmap with 10^5 bits up to offset 2^32-1 (a
//! 512 MiB string in Redis), HyperLogLogs, counters, in databases 0 and 2,
//! and a hash it must leave alone. The run is interrupted after one batch
//! and resumed. Afterwards every string key has the same bytes' BITCOUNT
//! and length as in Redis (migrate's own check reports zero mismatches and
//! the test compares again), TTLs survive within a second, the
//! HyperLogLogs count the same, and the hash is reported as left behind.
//!
//! Needs `redis-server`; without it the test prints a notice and passes,
//! unless `BITSLED_REQUIRE_REDIS=1`.

use std::process::Command;

use bitsled::{Config, Expiry};
use bitsled_redis::command::{execute, Reply};
use rand::{Rng, SeedableRng};

use bitsled_testkit::redis_server;

fn bitsled(dir: &std::path::Path, args: &[&str]) -> (i32, String) {
    bitsled_env(dir, args, &[])
}

/// Runs `bitsled --db DIR ARGS` with `env` added to its environment.
fn bitsled_env(dir: &std::path::Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_bitsled"))
        .env_remove("BITSLED_MIGRATE_PASSWORD")
        .envs(env.iter().copied())
        .arg("--db")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out.status.code().unwrap_or(-1), format!("{stdout}{stderr}"))
}

#[test]
fn migrate_copies_a_redis_dataset_and_verifies_it() {
    let Some(server) = redis_server::start() else { return };
    let url = format!("redis://127.0.0.1:{}", server.port);
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut con = client.get_connection().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);

    let mut p = redis::pipe();
    for uid in 0..2000u32 {
        let key = format!("uid:sign:{uid}:202611");
        for _ in 0..rng.gen_range(1..10) {
            p.cmd("SETBIT").arg(&key).arg(rng.gen_range(0..30)).arg(1).ignore();
        }
        if uid % 10 == 0 {
            p.cmd("PEXPIRE").arg(&key).arg(3_600_000).ignore();
        }
    }
    p.cmd("SETBIT").arg("huge").arg(4_294_967_295u64).arg(1).ignore();
    for _ in 0..100_000 {
        p.cmd("SETBIT").arg("huge").arg(rng.gen_range(0..4_294_967_295u64)).arg(1).ignore();
    }
    for h in 0..3 {
        p.cmd("PFADD").arg(format!("uv:{h}"));
        for _ in 0..(h + 1) * 500 {
            p.arg(format!("visitor{}", rng.gen_range(0..100_000)));
        }
        p.ignore();
    }
    p.cmd("SET").arg("counter").arg(42).ignore();
    p.cmd("HSET").arg("profile").arg("name").arg("x").ignore();
    p.cmd("SELECT").arg(2).ignore();
    p.cmd("SET").arg("in-db-2").arg("yes").ignore();
    p.cmd("SETBIT").arg("tags:vip").arg(123_456).arg(1).ignore();
    p.cmd("SELECT").arg(0).ignore();
    p.query::<()>(&mut con).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let (code, first) = bitsled(dir.path(), &["migrate", "--from", &url, "--batch", "500", "--max-batches", "1"]);
    assert_eq!(code, 0, "{first}");
    assert!(first.contains("--resume"), "an interrupted run says how to continue: {first}");
    let (code, out) = bitsled(dir.path(), &["migrate", "--from", &url, "--batch", "500", "--resume"]);
    assert_eq!(code, 0, "{out}");
    // The hash is met in whichever run's batches SCAN puts it.
    assert!((first.clone() + &out).contains("left 1 keys of type hash"), "{first}\n{out}");
    assert!(out.contains(" 0 mismatches"), "{out}");

    let db = Config::new(dir.path()).open().unwrap();
    let redis_count = |db_n: u32, key: &str, con: &mut redis::Connection| -> (u64, u64) {
        redis::cmd("SELECT").arg(db_n).query::<()>(con).unwrap();
        let len: u64 = redis::cmd("STRLEN").arg(key).query(con).unwrap();
        let ones: u64 = redis::cmd("BITCOUNT").arg(key).query(con).unwrap();
        (len, ones)
    };
    for key in ["huge", "counter", "uv:0", "uv:2", "uid:sign:0:202611", "uid:sign:1999:202611"] {
        assert_eq!(
            (db.strlen(key.as_bytes()).unwrap(), db.bitcount(key.as_bytes(), None).unwrap()),
            redis_count(0, key, &mut con),
            "{key}"
        );
    }
    assert_eq!(db.strlen(b"huge").unwrap(), 1 << 29, "the 512 MiB string's length");
    assert!(db.getbit(b"huge", 4_294_967_295).unwrap());
    assert!(db.key_stats(b"huge").unwrap().unwrap().stored_bytes < 4 << 20, "only the pages with bits are stored");
    assert_eq!(db.get(b"counter").unwrap().as_deref(), Some(&b"42"[..]));
    assert_eq!(db.dbsize().unwrap(), 2000 + 1 + 3 + 1, "every string key of db 0, not the hash");
    let two = db.select(2).unwrap();
    assert_eq!(two.get(b"in-db-2").unwrap().as_deref(), Some(&b"yes"[..]));
    assert_eq!(
        (two.strlen(b"tags:vip").unwrap(), two.bitcount(b"tags:vip", None).unwrap()),
        redis_count(2, "tags:vip", &mut con)
    );

    redis::cmd("SELECT").arg(0).query::<()>(&mut con).unwrap();
    let pttl: i64 = redis::cmd("PTTL").arg("uid:sign:0:202611").query(&mut con).unwrap();
    match db.expiry(b"uid:sign:0:202611").unwrap() {
        Expiry::At(at) => {
            let left = i64::try_from(at).unwrap() - i64::try_from(db.now_ms()).unwrap();
            assert!((left - pttl).abs() < 1000, "TTL kept: {left} ms here, {pttl} ms in Redis");
        }
        other => panic!("the TTL was lost: {other:?}"),
    }
    assert_eq!(db.expiry(b"uid:sign:1:202611").unwrap(), Expiry::Never);
    for h in 0..3 {
        let key = format!("uv:{h}");
        let want: i64 = redis::cmd("PFCOUNT").arg(&key).query(&mut con).unwrap();
        let got = execute(&db, &[b"PFCOUNT".to_vec(), key.clone().into_bytes()]);
        assert_eq!(got, Reply::Integer(want), "{key}");
    }
    assert!(db.verify().unwrap().is_ok());
    assert!(!dir.path().join("migrate.state.tmp").exists());
    assert!(!dir.path().join("migrate.state").exists(), "a finished run leaves no state file");
}

/// A source with a password: the password is never written to the state
/// file (which is owner-only) nor printed, whether it comes in the URL,
/// from `BITSLED_MIGRATE_PASSWORD` or from `--password-file`; a symlink at
/// the state file's temporary path is refused, not followed; a finished
/// run removes the state file.
#[test]
#[cfg(unix)]
fn migrate_keeps_the_source_password_secret() {
    use std::os::unix::fs::PermissionsExt;
    let Some(server) = redis_server::start() else { return };
    let pw = "hunter2-Secret";
    let mut con = redis::Client::open(format!("redis://127.0.0.1:{}", server.port)).unwrap().get_connection().unwrap();
    let mut p = redis::pipe();
    for i in 0..50 {
        p.cmd("SETBIT").arg(format!("k{i}")).arg(i).arg(1).ignore();
    }
    p.cmd("CONFIG").arg("SET").arg("requirepass").arg(pw).ignore();
    p.query::<()>(&mut con).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("migrate.state");
    let with_pw = format!("redis://:{pw}@127.0.0.1:{}", server.port);
    let bare = format!("redis://127.0.0.1:{}", server.port);
    let (code, out) = bitsled(dir.path(), &["migrate", "--from", &with_pw, "--batch", "10", "--max-batches", "1"]);
    assert_eq!(code, 0, "{out}");
    assert!(!out.contains(pw), "{out}");
    let text = std::fs::read_to_string(&state).unwrap();
    assert!(!text.contains(pw), "{text}");
    assert!(text.contains(&format!("source {bare}\n")), "{text}");
    let mode = std::fs::metadata(&state).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{mode:o}");

    // Wrong passwords and bad URLs: errors that do not show the password.
    for from in [format!("redis://:wrong-{pw}@127.0.0.1:{}", server.port), format!("redis://:{pw}@127.0.0.1:x")] {
        let (code, out) = bitsled(dir.path(), &["migrate", "--from", &from, "--resume"]);
        assert_ne!(code, 0, "{out}");
        assert!(!out.contains(pw), "{out}");
    }
    let (code, out) =
        bitsled_env(dir.path(), &["migrate", "--from", &bare, "--resume"], &[("BITSLED_MIGRATE_PASSWORD", "nope")]);
    assert_ne!(code, 0, "{out}");

    // A symlink at the temporary path is refused and its target untouched.
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep").unwrap();
    let tmp = dir.path().join("migrate.state.tmp");
    std::os::unix::fs::symlink(&victim, &tmp).unwrap();
    let (code, out) = bitsled_env(
        dir.path(),
        &["migrate", "--from", &bare, "--batch", "10", "--max-batches", "1", "--resume"],
        &[("BITSLED_MIGRATE_PASSWORD", pw)],
    );
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("refusing"), "{out}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    std::fs::remove_file(&tmp).unwrap();

    // The password from the environment, then from a file; resumed to the end.
    let (code, out) = bitsled_env(
        dir.path(),
        &["migrate", "--from", &bare, "--batch", "10", "--max-batches", "1", "--resume"],
        &[("BITSLED_MIGRATE_PASSWORD", pw)],
    );
    assert_eq!(code, 0, "{out}");
    assert!(!std::fs::read_to_string(&state).unwrap().contains(pw));
    let pw_file = dir.path().join("pw");
    std::fs::write(&pw_file, format!("{pw}\n")).unwrap();
    let (code, out) = bitsled(
        dir.path(),
        &["migrate", "--from", &bare, "--batch", "10", "--resume", "--password-file", pw_file.to_str().unwrap()],
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(" 0 mismatches"), "{out}");
    assert!(!out.contains(pw), "{out}");
    assert!(!state.exists(), "a finished run leaves no state file");
    assert!(!tmp.exists());
    let db = bitsled::Config::new(dir.path()).open().unwrap();
    assert_eq!(db.dbsize().unwrap(), 50);
}

/// A source that cannot be reached: whether the password comes in the URL
/// (plain or percent-encoded), from `BITSLED_MIGRATE_PASSWORD` or from
/// `--password-file`, the connection error names the source without the
/// password, the run fails, and no state file is left (nothing was
/// copied). Needs no `redis-server`: the port is one nothing listens on.
#[test]
fn unreachable_source_errors_never_show_the_password() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let pw = "s3cret-Pass";
    let dir = tempfile::tempdir().unwrap();
    let pw_file = dir.path().join("pw");
    std::fs::write(&pw_file, format!("{pw}\n")).unwrap();
    let bare = format!("redis://127.0.0.1:{port}");
    let file_arg = pw_file.display().to_string();
    let env = [("BITSLED_MIGRATE_PASSWORD", pw)];
    // (--from, further arguments, environment)
    let runs = [
        (format!("redis://:{pw}@127.0.0.1:{port}"), &[][..], &[][..]),
        (format!("redis://me:s3cret%2DPass@127.0.0.1:{port}"), &[], &[]),
        (bare.clone(), &[], &env[..]),
        (bare.clone(), &["--password-file", file_arg.as_str()][..], &[]),
    ];
    for (from, extra, env) in runs {
        let mut args = vec!["migrate", "--from", from.as_str()];
        args.extend_from_slice(extra);
        let (code, out) = bitsled_env(dir.path(), &args, env);
        assert_ne!(code, 0, "{from}: {out}");
        assert!(out.contains("connecting to redis://"), "{from}: the error names the source: {out}");
        assert!(out.contains(&format!("127.0.0.1:{port}")), "{from}: {out}");
        assert!(!out.contains(pw) && !out.contains("s3cret"), "{from}: {out}");
        assert!(!dir.path().join("migrate.state").exists(), "{from}");
        assert!(!dir.path().join("migrate.state.tmp").exists(), "{from}");
    }
}
