//! Test support shared by bitsled's test suites (the library's, the
//! command layer's and the command-line tool's) and its fuzz targets. Not
//! published and not an API: each module is what the tests need, no more.
//!
//! - [`redis_server`]: a private `redis-server` on a free loopback port, and
//!   what a test does when there is none;
//! - [`ops_check`]: random bitmap operations decoded from bytes and checked
//!   against the naive model, with flushes and reopens (the `ops_model`
//!   fuzz target and the model tests);
//! - [`fault_check`]: the same operations over a store that fails on
//!   command (the `fault_model` fuzz target), and what a reopen must find;
//! - [`sled_damage`]: a store whose sled files are damaged the way a torn
//!   segment damages them;
//! - [`wire`]: speaking to a server over a socket and reading its replies;
//! - [`corpus`]: the checked-in inputs of a fuzz target, for the tests that
//!   replay them on stable.

pub mod fault_check;
pub mod ops_check;
pub mod redis_server;
pub mod sled_damage;
pub mod wire;

/// The files of fuzz target `target`'s checked-in corpus
/// (`fuzz/corpus/TARGET/` of the workspace), sorted.
///
/// # Panics
/// If the directory cannot be read or holds no file (the seeds are
/// tracked, so an empty corpus is a mistake).
#[must_use]
pub fn corpus(target: &str) -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no seeds in {}", dir.display());
    files
}
