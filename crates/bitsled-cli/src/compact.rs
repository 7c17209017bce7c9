//! `bitsled compact`: copy the live keys into a fresh database and swap it
//! in place.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::{ms, open};

/// `dir` with `suffix` appended to its last component.
fn sibling(dir: &Path, suffix: &str) -> PathBuf {
    let mut s = dir.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// Compacts the database in `dir` into `dir.compact-tmp` and swaps the
/// directories.
pub(crate) fn compact(dir: &Path) -> Result<()> {
    if !dir.is_dir() {
        bail!("no database in {}", dir.display());
    }
    // The canonical path has no trailing `/` or `.`, so the siblings are
    // really next to the directory.
    let dir = dir.canonicalize().with_context(|| format!("resolving {}", dir.display()))?;
    let tmp = sibling(&dir, ".compact-tmp");
    let old = sibling(&dir, ".compact-old");
    for p in [&tmp, &old] {
        if p.symlink_metadata().is_ok() {
            bail!("{} exists (left by an interrupted compaction?); remove it first", p.display());
        }
    }
    let t = Instant::now();
    let db = open(&dir)?;
    let report = match db.compact_into(&tmp) {
        Ok(r) => r,
        Err(e) => {
            // Only what this run created; the database itself is untouched.
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e).context("compacting");
        }
    };
    // Close the database (and its background thread) before moving it.
    drop(db);
    std::fs::rename(&dir, &old).with_context(|| format!("renaming {} to {}", dir.display(), old.display()))?;
    if let Err(e) = std::fs::rename(&tmp, &dir) {
        let undo = std::fs::rename(&old, &dir);
        return Err(e).with_context(|| {
            format!(
                "renaming {} to {} (the old database was {})",
                tmp.display(),
                dir.display(),
                if undo.is_ok() { "put back".to_string() } else { format!("left in {}", old.display()) }
            )
        });
    }
    std::fs::remove_dir_all(&old).with_context(|| format!("removing {}", old.display()))?;
    println!("compacted {} keys, {} pages in {:.1} ms", report.keys, report.pages, ms(t));
    println!("size on disk: {} bytes before, {} bytes after", report.bytes_before, report.bytes_after);
    Ok(())
}
