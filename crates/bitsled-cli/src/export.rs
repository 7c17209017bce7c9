//! `bitsled export`: write a key's set bits as a serialized Roaring bitmap
//! (`--roaring`), or its bytes (`--raw`).

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use bitsled::{Db, RoaringFormat};

use indicatif::ProgressBar;

use crate::{ms, style};

/// Writes the set bits of `key` to `file` (stdout for `-`) in `format`.
/// The file is written only once the whole bitmap is built, so a failed
/// export (a wrong type, a bit beyond 2^32 for the 32-bit format) leaves
/// an existing file as it was.
pub(crate) fn export_roaring(db: &Db, key: &[u8], file: &Path, format: RoaringFormat) -> Result<()> {
    let t = Instant::now();
    let name = String::from_utf8_lossy(key);
    let mut bytes = Vec::new();
    let bits = db.write_roaring(key, format, &mut bytes).with_context(|| match format {
        RoaringFormat::Bits32 => {
            format!("exporting key {name:?} as a 32-bit Roaring bitmap (--bits64 takes any offset)")
        }
        _ => format!("exporting key {name:?} as a Roaring bitmap"),
    })?;
    if file.as_os_str() == "-" {
        let mut out = std::io::stdout().lock();
        out.write_all(&bytes).and_then(|()| out.flush()).context("writing to stdout")?;
        eprintln!("exported {bits} bits of {name:?} ({} bytes) in {:.1} ms", bytes.len(), ms(t));
    } else {
        std::fs::write(file, &bytes).with_context(|| format!("writing {}", file.display()))?;
        println!("exported {bits} bits of {name:?} to {} ({} bytes) in {:.1} ms", file.display(), bytes.len(), ms(t));
    }
    Ok(())
}

/// Writes the bytes of string `key` to `file` (stdout for `-`), streamed a
/// page at a time with a progress bar. A file is written as
/// `FILE.export-tmp` beside it and renamed over it once whole, so a failed
/// export (a missing key, a wrong type, a full disk) leaves an existing
/// file as it was.
pub(crate) fn export_raw(db: &Db, key: &[u8], file: &Path) -> Result<()> {
    let t = Instant::now();
    let name = String::from_utf8_lossy(key);
    let len = db.strlen(key).with_context(|| format!("exporting key {name:?}"))?;
    let bar = ProgressBar::new(len).with_style(style("{bar:40} {bytes}/{total_bytes} ({bytes_per_sec}, {eta})"));
    let missing = || anyhow::anyhow!("exporting key {name:?}: no such key");
    if file.as_os_str() == "-" {
        let out = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
        let len = db.write_value(key, bar.wrap_write(out)).with_context(|| format!("exporting key {name:?}"))?;
        bar.finish_and_clear();
        let len = len.ok_or_else(missing)?;
        eprintln!("exported {len} bytes of {name:?} in {:.1} ms", ms(t));
        return Ok(());
    }
    let mut tmp = file.as_os_str().to_owned();
    tmp.push(".export-tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let written = (|| {
        let f = std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        let mut out = std::io::BufWriter::with_capacity(1 << 16, f);
        let len = db.write_value(key, bar.wrap_write(&mut out)).with_context(|| format!("exporting key {name:?}"))?;
        let f = out
            .into_inner()
            .map_err(std::io::IntoInnerError::into_error)
            .with_context(|| format!("writing {}", tmp.display()))?;
        f.sync_all().with_context(|| format!("writing {}", tmp.display()))?;
        len.ok_or_else(missing)
    })();
    bar.finish_and_clear();
    let len = match written {
        Ok(len) => len,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    std::fs::rename(&tmp, file).with_context(|| format!("renaming {} to {}", tmp.display(), file.display()))?;
    println!("exported {len} bytes of {name:?} to {} in {:.1} ms", file.display(), ms(t));
    Ok(())
}
