//! `bitsled import`: bulk-load `key,offset[,bit]` CSV lines, or replace a
//! key with a serialized Roaring bitmap (`--roaring`) or a file's bytes
//! (`--raw`).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use bitsled::{Db, RoaringFormat};
use indicatif::ProgressBar;

use crate::{ms, style};

/// Lines between progress updates of an import.
const IMPORT_GROUP: usize = 1 << 20;

/// Applies the CSV lines of `file` (stdin for `-`) to `db`'s database, in
/// order, and flushes. A bad line stops the import.
pub(crate) fn import(db: &Db, file: &PathBuf) -> Result<()> {
    let (reader, len): (Box<dyn Read>, Option<u64>) = if file.as_os_str() == "-" {
        (Box::new(std::io::stdin()), None)
    } else {
        let f = std::fs::File::open(file).with_context(|| format!("opening {}", file.display()))?;
        let len = f.metadata().ok().map(|m| m.len());
        (Box::new(f), len)
    };
    let bar = match len {
        Some(n) => ProgressBar::new(n).with_style(style("{bar:40} {bytes}/{total_bytes} {msg} ({eta})")),
        None => ProgressBar::new_spinner().with_style(style("{spinner} {bytes} {msg}")),
    };
    let t = Instant::now();
    let mut pending = Pending::default();
    let (mut lines, mut changed) = (0u64, 0u64);
    for (i, line) in BufReader::new(reader).split(b'\n').enumerate() {
        let line = line?;
        bar.inc(line.len() as u64 + 1);
        let line = line.strip_suffix(b"\r").unwrap_or(&line);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let (key, offset, bit) = parse_csv(line).with_context(|| format!("line {}", i + 1))?;
        changed += pending.push(db, key, offset, bit)?;
        lines += 1;
        if pending.offsets >= IMPORT_GROUP {
            changed += pending.apply(db)?;
            bar.set_message(format!("{lines} lines"));
        }
    }
    changed += pending.apply(db)?;
    db.flush()?;
    bar.finish_and_clear();
    println!("imported {lines} lines, {changed} bits changed, in {:.1} ms", ms(t));
    Ok(())
}

/// Replaces `key` with the Roaring bitmap in `file` (stdin for `-`),
/// serialized in `format`, and flushes. A file that is not such a bitmap
/// changes nothing.
pub(crate) fn import_roaring(db: &Db, file: &Path, key: &[u8], format: RoaringFormat) -> Result<()> {
    let t = Instant::now();
    let bytes = if file.as_os_str() == "-" {
        let mut bytes = Vec::new();
        std::io::stdin().lock().read_to_end(&mut bytes).context("reading stdin")?;
        bytes
    } else {
        std::fs::read(file).with_context(|| format!("reading {}", file.display()))?
    };
    let name = String::from_utf8_lossy(key);
    let what = match format {
        RoaringFormat::Bits32 => "a 32-bit Roaring bitmap (--bits64 reads a 64-bit RoaringTreemap)",
        _ => "a 64-bit RoaringTreemap",
    };
    let bits = db
        .import_roaring(key, format, &bytes)
        .with_context(|| format!("importing {} into key {name:?} as {what}", file.display()))?;
    db.flush()?;
    println!("imported {bits} bits into {name:?} from {} bytes in {:.1} ms", bytes.len(), ms(t));
    Ok(())
}

/// Replaces `key` with the bytes of `file` (stdin for `-`), streamed a
/// page at a time with a progress bar, and flushes. A read error part way
/// leaves the key as it was.
pub(crate) fn import_raw(db: &Db, file: &Path, key: &[u8]) -> Result<()> {
    let t = Instant::now();
    let (reader, bar): (Box<dyn Read>, ProgressBar) = if file.as_os_str() == "-" {
        (
            Box::new(std::io::stdin().lock()),
            ProgressBar::new_spinner().with_style(style("{spinner} {bytes} ({bytes_per_sec})")),
        )
    } else {
        let f = std::fs::File::open(file).with_context(|| format!("opening {}", file.display()))?;
        let len = f.metadata().map_or(0, |m| m.len());
        (
            Box::new(f),
            ProgressBar::new(len).with_style(style("{bar:40} {bytes}/{total_bytes} ({bytes_per_sec}, {eta})")),
        )
    };
    let name = String::from_utf8_lossy(key);
    let len = db
        .set_from_reader(key, bar.wrap_read(std::io::BufReader::with_capacity(1 << 16, reader)))
        .with_context(|| format!("importing {} into key {name:?}", file.display()))?;
    db.flush()?;
    bar.finish_and_clear();
    println!("imported {len} bytes into {name:?} in {:.1} ms", ms(t));
    Ok(())
}

/// Offsets waiting to be applied with `Db::set_bits`, one group per key.
/// A key's group holds one bit value; a line with the other value for the
/// same key applies everything pending first, so lines take effect in order.
#[derive(Default)]
struct Pending {
    groups: Vec<(Vec<u8>, bool, Vec<u64>)>,
    index: HashMap<Vec<u8>, usize>,
    offsets: usize,
}

impl Pending {
    /// Adds one line; returns the bits changed by a flush it forced.
    fn push(&mut self, db: &Db, key: Vec<u8>, offset: u64, bit: bool) -> Result<u64> {
        let mut changed = 0;
        if let Some(&i) = self.index.get(&key) {
            if self.groups[i].1 != bit {
                changed = self.apply(db)?;
            }
        }
        let i = if let Some(&i) = self.index.get(&key) {
            i
        } else {
            self.groups.push((key.clone(), bit, Vec::new()));
            self.index.insert(key, self.groups.len() - 1);
            self.groups.len() - 1
        };
        self.groups[i].2.push(offset);
        self.offsets += 1;
        Ok(changed)
    }

    fn apply(&mut self, db: &Db) -> Result<u64> {
        let mut changed = 0;
        for (key, bit, offsets) in self.groups.drain(..) {
            changed += db.set_bits(&key, &offsets, bit)?;
        }
        self.index.clear();
        self.offsets = 0;
        Ok(changed)
    }
}

fn parse_csv(line: &[u8]) -> Result<(Vec<u8>, u64, bool)> {
    let mut fields = line.splitn(3, |&c| c == b',');
    let key = fields.next().unwrap_or_default();
    let num = |f: Option<&[u8]>, what: &str| -> Result<u64> {
        let f = f.with_context(|| format!("missing {what}"))?;
        let s = std::str::from_utf8(f)?.trim();
        s.parse::<u64>().with_context(|| format!("bad {what} {s:?}"))
    };
    let offset = num(fields.next(), "offset")?;
    let bit = match fields.next() {
        None => true,
        Some(f) => match num(Some(f), "bit")? {
            0 => false,
            1 => true,
            other => bail!("bit must be 0 or 1, not {other}"),
        },
    };
    Ok((key.to_vec(), offset, bit))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_lines() {
        assert_eq!(parse_csv(b"k,5").unwrap(), (b"k".to_vec(), 5, true));
        assert_eq!(parse_csv(b"k, 5 ,0").unwrap(), (b"k".to_vec(), 5, false));
        assert!(parse_csv(b"k").is_err());
        assert!(parse_csv(b"k,x").is_err());
        assert!(parse_csv(b"k,1,2").is_err());
    }
}
