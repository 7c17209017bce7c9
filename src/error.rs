//! The one error type of the crate.

use std::fmt;

/// A specialised `Result` whose error defaults to [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in bitsled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Stored bytes failed validation (checksum, header or structure).
    ///
    /// Recovery: the named key (and page) is damaged; other keys keep working.
    /// Run [`crate::Db::verify`] for the full list, then restore the key from a
    /// backup or delete it.
    #[error("corrupted data in key {key:?}{}: {reason}", PageSuffix(*page))]
    Corrupted {
        /// The key the damaged record belongs to (lossy UTF-8), or a store
        /// record name such as `<superblock>`.
        key: String,
        /// The page number, when the damaged record is a page.
        page: Option<u64>,
        /// What did not validate.
        reason: String,
    },

    /// The store was written by a format version this build cannot read.
    ///
    /// Recovery: open it with the bitsled version that wrote it.
    #[error("unsupported on-disk format version {found} (this build reads version {supported})")]
    UnsupportedVersion {
        /// Version found on disk.
        found: u8,
        /// Version this build reads and writes.
        supported: u8,
    },

    /// The key holds a value of another type.
    ///
    /// Recovery: use a command for that type, or delete the key first.
    #[error("WRONGTYPE Operation against a key holding the wrong kind of value")]
    WrongType,

    /// A bit offset beyond what the operation accepts.
    ///
    /// Recovery: use a smaller offset.
    #[error("bit offset {offset} is out of range")]
    OffsetOutOfRange {
        /// The offset passed in.
        offset: u64,
    },

    /// A value larger than the configured limit would have to be built in memory.
    ///
    /// Recovery: raise [`crate::Config::max_value_bytes`], or read the key in
    /// pieces (ranges, [`crate::Db::ones`]).
    #[error("value of key {key:?} is {len} bytes, above the limit of {limit} bytes")]
    TooLarge {
        /// The key.
        key: String,
        /// Its length in bytes.
        len: u64,
        /// The configured limit.
        limit: u64,
    },

    /// An argument that makes no sense for the operation.
    ///
    /// Recovery: fix the argument; nothing was written.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// The underlying store failed.
    ///
    /// Recovery: check the disk (space, permissions); after a failed write the
    /// handle refuses further writes ([`Error::Poisoned`]) and must be reopened.
    #[error("storage error: {0}")]
    Storage(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),

    /// An I/O error outside the store (syncing or cleaning the directory).
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),

    /// An earlier write to the store failed, so this handle refuses writes:
    /// what is in memory may no longer match what is on disk.
    ///
    /// Recovery: drop every clone of the handle and open the database again;
    /// everything acknowledged by the last successful `flush` is on disk.
    #[error("database refused the write: an earlier write to the store failed ({0}); reopen it")]
    Poisoned(String),

    /// The disk holding the store has less free space than the next
    /// write-back (its changes counted three times: sled's log grows by
    /// about that much) and the reserve need ([`crate::Config::disk_reserve_bytes`]),
    /// so changes stay in memory and writes are refused. Reads go on, and
    /// nothing already accepted is lost: it is written once there is room.
    ///
    /// Recovery: free space on that disk (or lower the reserve with
    /// [`crate::Db::set_disk_reserve`]); the next write or background flush
    /// that finds room lifts the refusal by itself. Keep the handle open
    /// meanwhile: dropping the last one writes what it can, and changes it
    /// cannot write are lost as in a crash (retry [`crate::Db::flush`]
    /// until it succeeds first).
    #[error(
        "not enough free disk space for the store ({free_bytes} bytes free, {needed_bytes} needed): \
         writes are refused until space is freed"
    )]
    DiskFull {
        /// Bytes free when checked.
        free_bytes: u64,
        /// Bytes the pending write-back and the reserve need.
        needed_bytes: u64,
    },

    /// The database follows a master (it is a replica): only the master's
    /// changes are applied to it.
    ///
    /// Recovery: write to the master, or stop following
    /// ([`crate::Db::stop_following`]) to make this database writable.
    #[error("the database is a read-only replica of a master")]
    ReadOnlyReplica,

    /// An invariant of the engine did not hold: a bug in bitsled (or damage
    /// that passed every checksum), never a consequence of the arguments.
    /// The message says which invariant and names the key, as in a key
    /// whose count of set bits would drop below zero.
    ///
    /// Recovery: please report it with the message. Only the operation that
    /// met it failed, possibly after part of its change, as any failed
    /// write; the handle stays usable. [`crate::Db::verify`] lists the keys
    /// whose metadata disagrees with their pages; rewriting or deleting
    /// such a key repairs it.
    #[error("internal error (a bug in bitsled, please report it): {0}")]
    Internal(String),

    /// A HyperLogLog operation met a string that is not a HyperLogLog (its
    /// header is not Redis's `HYLL` header of a known encoding and length).
    ///
    /// Recovery: use another key, or delete this one first; nothing was
    /// written.
    #[error("key {key:?} is not a valid HyperLogLog string value")]
    NotHyperLogLog {
        /// The key (lossy UTF-8).
        key: String,
    },

    /// A HyperLogLog's header is valid but its registers are not (a sparse
    /// body that does not describe exactly 16,384 registers), as after a
    /// SETRANGE or SETBIT into it.
    ///
    /// Recovery: delete the key or SET it from a good copy. A PFADD that
    /// fails this way keeps, like Redis, the changes of the elements before
    /// the one that failed.
    #[error("corrupted HyperLogLog in key {key:?}")]
    InvalidHyperLogLog {
        /// The key (lossy UTF-8).
        key: String,
    },
}

struct PageSuffix(Option<u64>);

impl fmt::Display for PageSuffix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(p) => write!(f, " page {p}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corrupted_display_names_key_and_page() {
        let e = Error::Corrupted { key: "k".into(), page: Some(7), reason: "checksum mismatch".into() };
        assert_eq!(e.to_string(), "corrupted data in key \"k\" page 7: checksum mismatch");
    }
}
