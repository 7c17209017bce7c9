//! npm packages for the Node.js client tests.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A `node_modules` directory holding npm package `spec` (such as
/// `redis@4`), installing it under `dir` in Cargo's target directory if
/// needed; `None`, with a notice, without node, npm or the registry.
pub fn node_modules(dir: &str, spec: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(dir);
    let name = spec.rsplit_once('@').map_or(spec, |(n, _)| n);
    if dir.join("node_modules").join(name).join("package.json").exists() {
        return Some(dir.join("node_modules"));
    }
    let have = |tool: &str| Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success());
    if !have("node") || !have("npm") {
        eprintln!("NOTICE: node or npm not found; skipping the {spec} test");
        return None;
    }
    std::fs::create_dir_all(&dir).ok()?;
    let out = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--prefix"])
        .arg(&dir)
        .arg(spec)
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "NOTICE: npm install {spec} failed; skipping the {spec} test:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        return None;
    }
    Some(dir.join("node_modules"))
}
