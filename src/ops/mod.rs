//! Bitmap operations with Redis semantics, as methods of [`crate::Db`].

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
pub(crate) mod range;
pub(crate) mod scan;
pub(crate) mod stats;
pub(crate) mod stream;
pub(crate) mod strings;
pub(crate) mod value;
pub(crate) mod verify;

pub use bitfield::{BitfieldOp, BitfieldType, Overflow};
pub use bitop::BitOp;
pub use bloom::Bloom;
pub use compact::CompactReport;
pub use expiry::{ExpireCondition, Expiry, SetExpiry};
pub use hll::Hll;
pub use iter::Ones;
pub use range::{Span, Unit};
pub use stats::KeyStats;
pub use verify::{Problem, VerifyReport};
