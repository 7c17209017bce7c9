//! bitsled: durable, compressed bitmaps with Redis semantics, stored in sled.
//!
//! A bitmap is cut into pages of 32,768 bits; each stored page is encoded as
//! a dense block, a sorted position list or EWAH runs, whichever is smallest,
//! and all-zero pages are not stored at all. Operations follow Redis's
//! SETBIT/GETBIT/BITCOUNT/BITPOS/BITOP semantics exactly, and BITOP streams
//! page by page, so bitmaps larger than memory work.
//!
//! ```
//! # fn main() -> bitsled::Result<()> {
//! # let dir = tempfile::tempdir()?;
//! use bitsled::{BitOp, Db};
//!
//! let db = Db::open(dir.path())?;
//! // Users 7 and 1,000,000,000 checked in on both days.
//! db.set_bits(b"checkin:20260101", &[3, 7, 1_000_000_000], true)?;
//! db.set_bits(b"checkin:20260102", &[7, 9, 1_000_000_000], true)?;
//! db.bitop(BitOp::And, b"both", &[b"checkin:20260101", b"checkin:20260102"])?;
//! assert_eq!(db.bitcount(b"both", None)?, 2);
//! db.flush()?; // durable from here on
//! # Ok(()) }
//! ```
#![deny(missing_docs, unsafe_code)]

pub mod bloom;
mod config;
mod db;
mod engine;
pub mod error;
mod geometry;
pub mod glob;
mod heap;

/// A function told of each key deleted because it expired: (database
/// index, key name). See [`Db::set_expired_listener`].
pub type ExpiredListener = std::sync::Arc<dyn Fn(u32, &[u8]) + Send + Sync>;
mod hll;
mod le;
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod model;
mod murmur;
mod ops;
pub(crate) mod page;
pub mod replication;
mod search;
pub mod slot;
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod testing;
mod varint;

pub use bloom::{BloomAdd, BloomInfo, BloomOptions};
pub use config::{
    Config, Durability, DEFAULT_CACHE_BYTES, DEFAULT_DATABASES, DEFAULT_DIRTY_BYTES, DEFAULT_DISK_RESERVE_BYTES,
    DEFAULT_FLUSH_INTERVAL, DEFAULT_MAX_VALUE_BYTES, DEFAULT_STORE_CACHE_BYTES, LAZY_FLUSH_INTERVAL,
};
pub use db::{Db, IndexHint, Watch};
pub use engine::{DbCounts, DiskShortage, KeyStats, MemoryStats, Problem, Sweep, VerifyReport};
pub use error::{Error, Result};
pub use geometry::MAX_OFFSET;
pub use heap::{heap_stats, resident_bytes, HeapStats};
#[cfg(feature = "roaring")]
pub use ops::roaring::RoaringFormat;
pub use ops::CompactReport;
pub use ops::{
    parse_integer, BitOp, BitfieldOp, BitfieldType, Bitmap, Bloom, Current, ExpireCondition, Expiry, GetExpiry, Hll,
    Ones, Overflow, SetCondition, SetExpiry, SetOptions, SetOutcome, Span, Unit,
};

#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
