//! Invariant: every subcommand that opens a database whose sled files are
//! damaged so that sled panics while opening them (see
//! `bitsled_testkit::sled_damage`) exits with code 1 and prints one error
//! naming the directory and what to do: no panic message, no backtrace
//! (even with `RUST_BACKTRACE=1`), never code 101.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bitsled_testkit::sled_damage;

/// Runs `bitsled --db DIR ARGS`, killing it if it has not exited after
/// 60 seconds (a server that opened the store would run forever); returns
/// its exit code and stderr.
fn bitsled(dir: &std::path::Path, args: &[&str]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_bitsled"))
        .arg("--db")
        .arg(dir)
        .args(args)
        // Errors never come with a backtrace, even when one is asked for.
        .env("RUST_BACKTRACE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn damaged_sled_files_exit_with_code_1_and_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    sled_damage::fill(dir.path());
    sled_damage::duplicate_segment_header(dir.path());
    let shown = dir.path().display().to_string();
    for args in [&["verify"][..], &["GET", "k1"], &["stats"], &["compact"], &["serve", "--port", "0"]] {
        let (code, err) = bitsled(dir.path(), args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(err.contains(&shown) && err.contains("backup") && err.contains("bitsled verify"), "{args:?}: {err}");
        // What the default panic hook would print.
        assert!(!err.contains("panicked at") && !err.to_lowercase().contains("backtrace"), "{args:?}: {err}");
    }
}
