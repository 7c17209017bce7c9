//! Which of a database directory's sled trees is the store: the
//! generation file, and the directories of the generations.
//!
//! A store that has never been rewritten keeps sled's files in the
//! database directory itself (generation 0). The online rewrite
//! (`store.rs`, DESIGN.md section 5, "Store rewrites") copies the live
//! records into a fresh sled tree in `generation-N` and then makes it the
//! store by replacing the generation file, one atomic rename; whatever a
//! crash leaves of the other generations is removed at the next open.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The generation file's name in the database directory.
const FILE: &str = "generation";
/// Its name while it is being written.
const TEMP: &str = "generation.tmp";
/// The prefix of a rewritten generation's directory.
const DIR_PREFIX: &str = "generation-";
/// First 8 bytes of the file.
const MAGIC: [u8; 8] = *b"BSLDGEN1";
/// Bytes of the file: magic, three u64s, a CRC32.
const LEN: usize = 36;

/// The generation in use and what the rewrite that made it knew.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct Generation {
    /// 0: sled's files in the database directory; N: in `generation-N`.
    pub(crate) number: u64,
    /// Added to the tree's own id generator, so ids never go back when a
    /// fresh tree (whose generator starts at 0) takes over.
    pub(crate) id_base: u64,
    /// sled's files of this generation when the rewrite that made it
    /// finished (0 for generation 0): the size of a freshly written tree of
    /// the records, which the next rewrite's trigger compares the files
    /// with.
    pub(crate) base_bytes: u64,
}

impl Generation {
    /// The file's bytes: `BSLDGEN1`, number, id base and live bytes as
    /// little-endian u64s, then the CRC32 of those 32 bytes.
    pub(crate) fn encode(&self) -> [u8; LEN] {
        let mut b = [0u8; LEN];
        b[..8].copy_from_slice(&MAGIC);
        b[8..16].copy_from_slice(&self.number.to_le_bytes());
        b[16..24].copy_from_slice(&self.id_base.to_le_bytes());
        b[24..32].copy_from_slice(&self.base_bytes.to_le_bytes());
        let crc = crc32fast::hash(&b[..32]);
        b[32..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes the file's bytes; `None` if they are not a sound file.
    pub(crate) fn decode(b: &[u8]) -> Option<Generation> {
        let b: &[u8; LEN] = b.try_into().ok()?;
        let u64_at = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]));
        let crc = u32::from_le_bytes([b[32], b[33], b[34], b[35]]);
        (b[..8] == MAGIC && crc32fast::hash(&b[..32]) == crc).then(|| Generation {
            number: u64_at(8),
            id_base: u64_at(16),
            base_bytes: u64_at(24),
        })
    }
}

/// The directory holding sled's files of generation `number` in `root`.
pub(crate) fn sled_dir(root: &Path, number: u64) -> PathBuf {
    if number == 0 {
        root.to_path_buf()
    } else {
        root.join(format!("{DIR_PREFIX}{number}"))
    }
}

/// The generation in use in `root`: generation 0 if there is no file.
///
/// # Errors
/// [`Error::Corrupted`] for a file that does not decode; I/O errors.
pub(crate) fn read(root: &Path) -> Result<Generation> {
    match fs::read(root.join(FILE)) {
        Ok(bytes) => Generation::decode(&bytes).ok_or_else(|| Error::Corrupted {
            key: "<store>".into(),
            page: None,
            reason: format!(
                "the generation file {} is damaged (it names which sled tree of the directory is the store): \
                 restore the directory from a backup",
                root.join(FILE).display()
            ),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Generation::default()),
        Err(e) => Err(e.into()),
    }
}

/// Makes `g` the generation in use in `root`, durably: the new file is
/// written and synced beside the old one, renamed over it, and the
/// directory synced.
///
/// # Errors
/// I/O errors; the generation in use is then the old one or `g`, whole.
pub(crate) fn write(root: &Path, g: &Generation) -> Result<()> {
    let temp = root.join(TEMP);
    let mut f = fs::File::create(&temp)?;
    f.write_all(&g.encode())?;
    f.sync_all()?;
    drop(f);
    fs::rename(&temp, root.join(FILE))?;
    fs::File::open(root)?.sync_all()?;
    Ok(())
}

/// Whether `name` is one of sled's own files or directories at the top of
/// a tree's directory.
fn is_sled_file(name: &str) -> bool {
    matches!(name, "db" | "conf" | "blobs") || name.starts_with("snap.")
}

/// Removes from `root` every generation but `keep`: the directories of
/// other generations (an unfinished rewrite, or the one `keep` replaced)
/// and, if `keep` is not 0, sled's files of generation 0.
///
/// # Errors
/// I/O errors.
pub(crate) fn remove_others(root: &Path, keep: u64) -> Result<()> {
    for entry in fs::read_dir(root)? {
        let entry = entry?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let path = entry.path();
        if let Some(n) = name.strip_prefix(DIR_PREFIX) {
            if n.parse::<u64>().is_ok_and(|n| n != keep) {
                fs::remove_dir_all(&path)?;
            }
        } else if keep != 0 && is_sled_file(&name) {
            remove_entry(&entry)?;
        }
    }
    Ok(())
}

/// Removes a directory entry, a file or a directory with its contents.
fn remove_entry(entry: &fs::DirEntry) -> Result<()> {
    if entry.file_type()?.is_dir() {
        fs::remove_dir_all(entry.path())?;
    } else {
        fs::remove_file(entry.path())?;
    }
    Ok(())
}

/// Removes the files of generation `number` only.
///
/// # Errors
/// I/O errors.
pub(crate) fn remove(root: &Path, number: u64) -> Result<()> {
    if number != 0 {
        return match fs::remove_dir_all(sled_dir(root, number)) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            r => r.map_err(Error::from),
        };
    }
    for entry in fs::read_dir(root)? {
        let entry = entry?;
        if is_sled_file(&entry.file_name().to_string_lossy()) {
            remove_entry(&entry)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file's bytes are fixed (golden) and round-trip; any flipped
    /// byte is refused.
    #[test]
    fn file_bytes_are_fixed_and_checked() {
        let g = Generation { number: 2, id_base: 0x0102, base_bytes: 1 << 20 };
        let b = g.encode();
        assert_eq!(&b[..8], b"BSLDGEN1");
        assert_eq!(&b[8..32], &[2, 0, 0, 0, 0, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0]);
        assert_eq!(b[32..], crc32fast::hash(&b[..32]).to_le_bytes());
        assert_eq!(Generation::decode(&b), Some(g));
        for i in 0..LEN {
            let mut d = b;
            d[i] ^= 0x10;
            assert_eq!(Generation::decode(&d), None, "byte {i}");
        }
        assert_eq!(Generation::decode(&b[..35]), None);
    }

    /// No file is generation 0; a written file is read back; a damaged
    /// one is an error naming it.
    #[test]
    fn read_and_write() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), Generation::default());
        let g = Generation { number: 3, id_base: 9, base_bytes: 7 };
        write(dir.path(), &g).unwrap();
        assert_eq!(read(dir.path()).unwrap(), g);
        assert!(!dir.path().join(TEMP).exists());
        fs::write(dir.path().join(FILE), b"junk").unwrap();
        let e = read(dir.path()).unwrap_err();
        assert!(matches!(&e, Error::Corrupted { reason, .. } if reason.contains("generation file")), "{e}");
    }

    /// Cleanup keeps the named generation and bitsled's own files, and
    /// removes the other generations and, past generation 0, sled's files
    /// at the top.
    #[test]
    fn remove_others_keeps_the_named_generation() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for f in ["db", "conf", "snap.0001", "bitsled.seq", "generation"] {
            fs::write(root.join(f), b"x").unwrap();
        }
        fs::create_dir(root.join("blobs")).unwrap();
        for n in [1, 2, 3] {
            fs::create_dir(sled_dir(root, n)).unwrap();
            fs::write(sled_dir(root, n).join("db"), b"x").unwrap();
        }
        fs::create_dir(root.join("generation-x")).unwrap();
        remove_others(root, 0).unwrap();
        assert!(root.join("db").exists() && root.join("blobs").exists());
        assert!(!sled_dir(root, 1).exists() && !sled_dir(root, 3).exists());
        assert!(root.join("generation-x").exists(), "not a generation's name");
        fs::create_dir(sled_dir(root, 2)).unwrap();
        remove_others(root, 2).unwrap();
        let mut left: Vec<String> =
            fs::read_dir(root).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        left.sort();
        assert_eq!(left, ["bitsled.seq", "generation", "generation-2", "generation-x"]);
        remove(root, 2).unwrap();
        assert!(!sled_dir(root, 2).exists());
        remove(root, 2).unwrap();
    }
}
