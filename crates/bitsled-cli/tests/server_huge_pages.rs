//! `bitsled serve` restarts itself once with glibc's
//! `glibc.malloc.hugetlb=1` tunable (malloc then advises transparent huge
//! pages for its heaps) and `glibc.malloc.arena_max` (malloc's heaps
//! bounded by the number of cores, at least 2) with the heap's trim and
//! mapping thresholds fixed (32 MiB and 128 KiB), keeping its process id and
//! arguments; it adds none when told not to (`--malloc-huge-pages no`,
//! `--malloc-arenas 0`), and leaves a tunable that `GLIBC_TUNABLES`
//! already names (or `MALLOC_ARENA_MAX`, `MALLOC_TRIM_THRESHOLD_`) as the
//! operator set it.

#![cfg(all(target_os = "linux", target_env = "gnu"))]

#[path = "common/server.rs"]
mod server;

use server::Served;

/// The arena bound the server sets by default.
fn arenas() -> String {
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get).max(2);
    format!("glibc.malloc.arena_max={cores}")
}

/// The heap thresholds the server sets with the arena bound.
const KEEP: &str = "glibc.malloc.trim_threshold=33554432:glibc.malloc.mmap_threshold=131072";

/// The value of `GLIBC_TUNABLES` the server's process was started with
/// (its last `exec`). Read from `/proc/PID/environ`, the bytes of the
/// environment as the kernel placed them: glibc's parser may have ended
/// each tunable there with a NUL, so everything up to the next entry that
/// looks like `NAME=` is taken, NULs read as `:`.
fn tunables(served: &Served) -> Option<String> {
    let env = std::fs::read(format!("/proc/{}/environ", served.child.id())).expect("read environ");
    let mut parts = env.split(|&b| b == 0);
    let first = parts.find_map(|kv| kv.strip_prefix(b"GLIBC_TUNABLES="))?;
    let mut value = String::from_utf8_lossy(first).into_owned();
    for more in parts.take_while(|p| p.starts_with(b"glibc.")) {
        value.push(':');
        value.push_str(&String::from_utf8_lossy(more));
    }
    Some(value)
}

/// Invariant: the process started (same id: the restart is an `exec`)
/// answers with the tunable set, and its arguments survived the restart
/// (it serves the database directory it was given).
#[test]
fn serve_runs_with_malloc_huge_pages_by_default() {
    let dir = tempfile::tempdir().expect("tempdir");
    let served = Served::start(dir.path(), &[]);
    let mut con = served.client();
    let pong: String = redis::cmd("PING").query(&mut con).expect("PING");
    assert_eq!(pong, "PONG");
    assert_eq!(tunables(&served), Some(format!("glibc.malloc.hugetlb=1:{}:{KEEP}", arenas())));
    let () = redis::cmd("SET").arg("k").arg("v").query(&mut con).expect("SET");
    let () = redis::cmd("SAVE").query(&mut con).expect("SAVE");
    assert!(std::fs::read_dir(dir.path()).expect("dir").count() > 0, "the store is in the directory given");
}

/// Invariant: `--malloc-huge-pages no` and `--malloc-arenas 0` add
/// nothing to the environment; other tunables the operator set are kept and
/// extended, and one that is already named (or `MALLOC_ARENA_MAX`) is left
/// exactly as it was.
#[test]
fn the_restart_respects_the_operator() {
    let dir = tempfile::tempdir().expect("tempdir");
    let off = Served::start(dir.path(), &["--malloc-huge-pages", "no", "--malloc-arenas", "0"]);
    assert_eq!(tunables(&off), None);
    drop(off);

    let dir = tempfile::tempdir().expect("tempdir");
    let no_huge = Served::start(dir.path(), &["--malloc-huge-pages", "no"]);
    assert_eq!(tunables(&no_huge), Some(format!("{}:{KEEP}", arenas())));
    drop(no_huge);

    let dir = tempfile::tempdir().expect("tempdir");
    let four = Served::start(dir.path(), &["--malloc-arenas", "4"]);
    assert_eq!(tunables(&four), Some(format!("glibc.malloc.hugetlb=1:glibc.malloc.arena_max=4:{KEEP}")));
    drop(four);

    let dir = tempfile::tempdir().expect("tempdir");
    let env = Served::start_with_env(dir.path(), &[], &[("MALLOC_ARENA_MAX", "3")]);
    assert_eq!(tunables(&env), Some(format!("glibc.malloc.hugetlb=1:{KEEP}")));
    drop(env);

    let dir = tempfile::tempdir().expect("tempdir");
    let trim = Served::start_with_env(dir.path(), &[], &[("MALLOC_TRIM_THRESHOLD_", "1048576")]);
    assert_eq!(tunables(&trim), Some(format!("glibc.malloc.hugetlb=1:{}", arenas())));
    drop(trim);

    let dir = tempfile::tempdir().expect("tempdir");
    let other = Served::start_with_env(dir.path(), &[], &[("GLIBC_TUNABLES", "glibc.malloc.arena_max=2")]);
    assert_eq!(tunables(&other), Some(format!("glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1:{KEEP}")));
    drop(other);

    let dir = tempfile::tempdir().expect("tempdir");
    let chosen = Served::start_with_env(dir.path(), &[], &[("GLIBC_TUNABLES", "glibc.malloc.hugetlb=0")]);
    assert_eq!(tunables(&chosen), Some(format!("glibc.malloc.hugetlb=0:{}:{KEEP}", arenas())));
}
