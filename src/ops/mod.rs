//! Bitmap operations with Redis semantics, as methods of [`crate::Db`].

#![deny(clippy::cast_possible_truncation)]

pub(crate) mod bitfield;
pub(crate) mod bitop;
pub(crate) mod bits;
pub(crate) mod bloom;
pub(crate) mod compact;
pub(crate) mod count;
pub(crate) mod expiry;
pub(crate) mod hll;
pub(crate) mod iter;
pub(crate) mod keys;
pub(crate) mod loaded;
pub(crate) mod positions;
pub(crate) mod range;
pub(crate) mod rank;
#[cfg(feature = "roaring")]
pub(crate) mod roaring;
pub(crate) mod set;
pub(crate) mod strings;
pub(crate) mod value;
pub(crate) mod value_io;

pub use bitfield::{BitfieldOp, BitfieldType, Overflow};
pub use bitop::BitOp;
pub use bloom::Bloom;
pub use compact::CompactReport;
pub use expiry::{ExpireCondition, Expiry, SetExpiry};
pub use hll::Hll;
pub use iter::Ones;
pub use loaded::Bitmap;
pub use range::{Span, Unit};
pub use set::{parse_integer, Current, GetExpiry, SetCondition, SetOptions, SetOutcome};

use crate::db::Db;
use crate::engine::{Meta, PageStream, Reading};
use crate::error::Result;

impl Db {
    /// The metadata of string key `key` and, when `pages(&meta)` names a
    /// page range, a stream over it; both taken in one read transaction, so
    /// the stream reads the value the metadata describes.
    ///
    /// # Errors
    /// [`crate::Error::WrongType`]; a store error.
    pub(crate) fn string_and_stream(
        &self,
        key: &[u8],
        pages: impl FnOnce(&Meta) -> Option<(u64, u64)>,
        reading: Reading,
    ) -> Result<(Option<Meta>, Option<PageStream>)> {
        self.engine.read(self.index, &[key], |tx| {
            let Some(meta) = tx.string(key)? else { return Ok((None, None)) };
            let stream = match pages(&meta) {
                Some(range) => Some(tx.stream(key, &meta, range, reading)?),
                None => None,
            };
            Ok((Some(meta), stream))
        })
    }
}
