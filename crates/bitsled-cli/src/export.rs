//! `bitsled export --roaring KEY FILE`: write a key's set bits as a
//! serialized Roaring bitmap.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result};
use bitsled::{Db, RoaringFormat};

use crate::ms;

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
