//! Compaction: copying every live key into a fresh database, which leaves
//! behind the garbage (reclaimed pages, stale expiry entries, sled's own
//! dead space) that the old store still holds on disk.

use std::path::Path;
use std::sync::Arc;

use crate::config::Config;
use crate::db::Db;
use crate::error::{Error, Result};

/// What [`Db::compact_into`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompactReport {
    /// Keys copied.
    pub keys: u64,
    /// Non-empty stored pages copied (inline values have none).
    pub pages: u64,
    /// Bytes on disk of the source database before compacting.
    pub bytes_before: u64,
    /// Bytes on disk of the new database after compacting.
    pub bytes_after: u64,
}

impl Db {
    /// Copies every live key of every database (value of any type, length,
    /// set-bit count and expiry) into a new store in directory `dest`, which must not
    /// exist or be empty; returns what was copied and the sizes on disk. The new
    /// database is flushed and closed when this returns, ready to replace
    /// this one.
    ///
    /// Values are copied page by page, in page order, as a stream: no value
    /// is built in memory. Keys that expire or are deleted while the copy
    /// runs are left out; keys written meanwhile may or may not be copied,
    /// so stop writers first for an exact copy.
    ///
    /// Cost: one read and one write per stored page, plus one write-back of
    /// this database first (so that everything pending counts in
    /// `bytes_before`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `dest` exists and is not an empty
    /// directory; [`Error::Io`]/[`Error::Storage`] if either store fails;
    /// [`Error::Corrupted`] if a source page does not decode (nothing is
    /// replaced: the source stays as it is); [`Error::Poisoned`].
    pub fn compact_into(&self, dest: &Path) -> Result<CompactReport> {
        match std::fs::read_dir(dest) {
            Ok(mut entries) => {
                if entries.next().is_some() {
                    return Err(Error::InvalidArgument(format!(
                        "compaction target {} exists and is not empty",
                        dest.display()
                    )));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::Io(e)),
        }
        self.flush()?;
        let mut report = CompactReport { bytes_before: self.size_on_disk()?, ..CompactReport::default() };
        let out = Config::new(dest).databases(u16::try_from(self.databases()).unwrap_or(u16::MAX)).open()?;
        for index in 0..self.databases() {
            let (src, dst) = (self.select(index)?, out.select(index)?);
            for name in src.keys(b"*")? {
                let Some((meta, mut stream)) = src.meta_and_all_pages(&name)? else { continue };
                let mut build = dst.engine.begin_build(index)?;
                let mut pages = 0;
                while let Some((page, p)) = stream.next_page()? {
                    build.put(page, Arc::unwrap_or_clone(p))?;
                    pages += 1;
                }
                // The copy keeps the expiry, which publishing indexes.
                let copy = build.adopt(&meta);
                build.publish(&name, Some(&copy))?;
                // Publishing keeps an inline value, and a string's one
                // small page, in the entry: those are no stored pages.
                let stored =
                    dst.engine.read_untouched(index, &[&name[..]], |tx| tx.meta(&name))?.is_some_and(|m| m.is_paged());
                report.pages += if stored { pages } else { 0 };
                report.keys += 1;
            }
        }
        out.flush()?;
        report.bytes_after = out.size_on_disk()?;
        Ok(report)
    }
}
