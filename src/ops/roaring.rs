//! Roaring interop: a string bitmap from and to the portable serialization
//! of a Roaring bitmap (32-bit `RoaringBitmap`) or of a 64-bit
//! `RoaringTreemap`, as the `roaring` crate 0.10 writes them.
//!
//! Roaring value `v` is bit offset `v` in Redis's numbering (offset 0 is
//! the most significant bit of byte 0), so the set of roaring values is
//! exactly the set of offsets whose bit is 1.
//!
//! An import parses the input lazily (one 32-bit bitmap in memory at a
//! time), groups the ascending values by page and builds the new value
//! under a fresh bitmap id, page by page, like SET; one transaction
//! publishes it. Nothing is written for input that does not parse.

use std::io;

use roaring::{RoaringBitmap, RoaringTreemap};

use crate::db::Db;
use crate::engine::{Kind, INLINE_MAX};
use crate::error::{Error, Result};
use crate::geometry::{locate, position, MAX_OFFSET};
use crate::page::Page;

/// Which Roaring serialization [`Db::import_roaring`] reads and
/// [`Db::export_roaring`] writes. Both are little-endian throughout.
///
/// ```
/// # fn main() -> bitsled::Result<()> {
/// # let dir = tempfile::tempdir()?;
/// use bitsled::RoaringFormat;
///
/// let db = bitsled::Db::open(dir.path())?;
/// db.setbit(b"k", 9, true)?;
/// let bits32 = db.export_roaring(b"k", RoaringFormat::Bits32)?;
/// assert_eq!(bits32[..4], 12_346u32.to_le_bytes()); // the portable cookie
/// let bits64 = db.export_roaring(b"k", RoaringFormat::Bits64)?;
/// assert_eq!(bits64[..8], 1u64.to_le_bytes()); // one 32-bit bitmap,
/// assert_eq!(bits64[8..12], 0u32.to_le_bytes()); // for high bits 0:
/// assert_eq!(bits64[12..], bits32[..]); // the same bytes
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RoaringFormat {
    /// A 32-bit Roaring bitmap in the portable format of the Roaring format
    /// specification (RoaringFormatSpec): a cookie (12346, or 12347 in the
    /// low 16 bits when run containers are present), the container
    /// descriptions, then the containers. This is what roaring-rs's
    /// `RoaringBitmap::serialize_into` writes, and what the C, Java and Go
    /// implementations call their portable format. Holds offsets below
    /// 2^32, the range the Redis commands accept.
    Bits32,
    /// A 64-bit Roaring bitmap as roaring-rs's `RoaringTreemap::serialize_into`
    /// writes it: a `u64` count of 32-bit bitmaps, then for each, in
    /// ascending order, a `u32` holding the high 32 bits of its values and
    /// the bitmap of their low 32 bits in the 32-bit portable format. Holds
    /// any offset up to [`crate::MAX_OFFSET`].
    Bits64,
}

/// The first four bytes of a portable bitmap without run containers.
const COOKIE_NO_RUNS: u32 = 12_346;
/// The low 16 bits of the first four bytes of a portable bitmap with run
/// containers; the high 16 bits hold the number of containers less one.
const COOKIE_RUNS: u32 = 12_347;

/// The error for input that is not a serialized bitmap of the format.
fn malformed(what: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("malformed roaring bitmap: {what}"))
}

/// The error for a parse failure of the `roaring` crate.
fn parse_error(e: &io::Error) -> Error {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        malformed("truncated input")
    } else {
        malformed(e)
    }
}

/// The 32-bit bitmaps of a serialized bitmap, each with the high 32 bits
/// of its values (0 in the 32-bit format), read lazily: at most one is
/// deserialized at a time. Yields one error and then ends if the input
/// does not parse, including when bytes are left after the last bitmap.
struct Bitmaps<'a> {
    format: RoaringFormat,
    /// The input not read yet.
    input: &'a [u8],
    /// Bitmaps not read yet.
    left: u64,
}

impl<'a> Bitmaps<'a> {
    /// Starts reading `input` as `format`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the treemap's count is truncated.
    fn new(format: RoaringFormat, mut input: &'a [u8]) -> Result<Bitmaps<'a>> {
        let left = match format {
            RoaringFormat::Bits32 => 1,
            RoaringFormat::Bits64 => {
                let Some((count, rest)) = input.split_first_chunk::<8>() else {
                    return Err(malformed("truncated input"));
                };
                input = rest;
                u64::from_le_bytes(*count)
            }
        };
        Ok(Bitmaps { format, input, left })
    }

    /// Reads the next bitmap and, in the 64-bit format, the high bits
    /// before it.
    fn read(&mut self) -> Result<(u64, RoaringBitmap)> {
        let mut high = 0;
        if self.format == RoaringFormat::Bits64 {
            let Some((bits, rest)) = self.input.split_first_chunk::<4>() else {
                return Err(malformed("truncated input"));
            };
            self.input = rest;
            high = u64::from(u32::from_le_bytes(*bits)) << 32;
        }
        let declared = check_header(self.input)?;
        // Validating: containers must hold sorted, distinct values and
        // bitset containers their stated cardinality.
        let bitmap = RoaringBitmap::deserialize_from(&mut self.input).map_err(|e| parse_error(&e))?;
        // The crate does not compare a run container's runs with its
        // declared cardinality (it accepts one with no runs at all).
        if declared.is_some_and(|d| d != bitmap.len()) {
            return Err(malformed("container cardinalities differ from their contents"));
        }
        Ok((high, bitmap))
    }
}

impl Iterator for Bitmaps<'_> {
    type Item = Result<(u64, RoaringBitmap)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            if self.input.is_empty() {
                return None;
            }
            let extra = std::mem::take(&mut self.input).len();
            return Some(Err(malformed(format!("unexpected bytes after the end of the bitmap ({extra})"))));
        }
        self.left -= 1;
        let bitmap = self.read();
        if bitmap.is_err() {
            self.left = 0;
            self.input = &[];
        }
        Some(bitmap)
    }
}

/// Checks that the container keys in the descriptive header of the 32-bit
/// portable bitmap at the start of `input` strictly ascend, as the format
/// requires and the `roaring` crate does not check (it would accept two
/// containers for the same 2^16 values), and returns the total of the
/// cardinalities the header declares (`None` if the header is cut short).
/// Leaves everything else, a truncated header included, to the crate.
fn check_header(input: &[u8]) -> Result<Option<u64>> {
    let Some((cookie, rest)) = input.split_first_chunk::<4>() else { return Ok(None) };
    let count = |n: u32| usize::try_from(n).unwrap_or(usize::MAX);
    let cookie = u32::from_le_bytes(*cookie);
    let (size, descriptions) = if cookie == COOKIE_NO_RUNS {
        let Some((size, rest)) = rest.split_first_chunk::<4>() else { return Ok(None) };
        (count(u32::from_le_bytes(*size)), rest)
    } else if cookie & 0xFFFF == COOKIE_RUNS {
        // The run-container flags, one bit per container, come first.
        let size = count(cookie >> 16) + 1;
        (size, rest.get(size.div_ceil(8)..).unwrap_or_default())
    } else {
        return Ok(None);
    };
    let mut previous: Option<u16> = None;
    let (mut declared, mut seen) = (0u64, 0usize);
    for description in descriptions.chunks_exact(4).take(size) {
        let key = u16::from_le_bytes([description[0], description[1]]);
        if previous.is_some_and(|p| key <= p) {
            return Err(malformed("container keys are not in ascending order"));
        }
        previous = Some(key);
        declared += u64::from(u16::from_le_bytes([description[2], description[3]])) + 1;
        seen += 1;
    }
    Ok((seen == size).then_some(declared))
}

impl Db {
    /// Replaces `key` with a string bitmap whose set bits are exactly the
    /// values of the serialized Roaring bitmap `bytes` (value `v` is bit
    /// offset `v`, Redis's numbering), and returns how many bits are set.
    ///
    /// The new value is `max / 8 + 1` bytes long, `max` being the largest
    /// value; it has no expiry. Whatever the key held, of any type, is
    /// replaced atomically, as SET does. An empty Roaring bitmap deletes the
    /// key, as a BITOP with an empty result does: a string takes its length
    /// from its highest bit, and an empty set has none (so a missing key,
    /// which [`Db::export_roaring`] exports as an empty bitmap, stays
    /// missing through a round trip).
    ///
    /// Both formats are read strictly: values must ascend (containers and
    /// the treemap's 32-bit bitmaps in order), containers must be valid,
    /// and no byte may follow the bitmap. Run containers (cookie 12347,
    /// written by the C and Java implementations after `runOptimize`) are
    /// accepted.
    ///
    /// Cost: O(set bits); pages are built from the values without reading
    /// the old value, and all-zero pages are not stored. Memory: one
    /// deserialized 32-bit bitmap (for [`RoaringFormat::Bits64`], one of its
    /// 32-bit bitmaps at a time, so up to 512 MiB for a full 2^32 range
    /// given as runs) and one page.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `bytes` is not a bitmap of `format`
    /// (truncated, a bad cookie, invalid containers, values out of order,
    /// trailing bytes); [`Error::OffsetOutOfRange`] for a value above
    /// [`crate::MAX_OFFSET`] (possible in a treemap); [`Error::Poisoned`].
    /// On an error the key keeps its old value.
    ///
    /// ```
    /// # fn main() -> bitsled::Result<()> {
    /// # let dir = tempfile::tempdir()?;
    /// use bitsled::RoaringFormat;
    /// use roaring::RoaringBitmap;
    ///
    /// let db = bitsled::Db::open(dir.path())?;
    /// let users: RoaringBitmap = [7, 70_000, 4_000_000_000].into_iter().collect();
    /// let mut bytes = Vec::new();
    /// users.serialize_into(&mut bytes)?;
    ///
    /// assert_eq!(db.import_roaring(b"active", RoaringFormat::Bits32, &bytes)?, 3);
    /// assert!(db.getbit(b"active", 70_000)?);
    /// assert_eq!(db.strlen(b"active")?, 4_000_000_000 / 8 + 1);
    /// assert!(db.import_roaring(b"active", RoaringFormat::Bits32, b"junk").is_err());
    /// assert_eq!(db.bitcount(b"active", None)?, 3); // unchanged
    /// # Ok(()) }
    /// ```
    pub fn import_roaring(&self, key: &[u8], format: RoaringFormat, bytes: &[u8]) -> Result<u64> {
        let mut build = None;
        // Puts a page into the build, which starts with the first page.
        let mut put = |page: u64, positions: &[u16]| -> Result<()> {
            if build.is_none() {
                build = Some(self.engine.begin_build(self.index)?);
            }
            if let Some(b) = &mut build {
                b.put(page, Page::from_positions(positions))?;
            }
            Ok(())
        };
        // The set bits of page `page` not put yet.
        let mut positions: Vec<u16> = Vec::new();
        let mut page = 0u64;
        let mut ones = 0u64;
        let mut last: Option<u64> = None;
        for bitmap in Bitmaps::new(format, bytes)? {
            let (high, bitmap) = bitmap?;
            for low in bitmap {
                let v = high | u64::from(low);
                if last.is_some_and(|l| v <= l) {
                    return Err(malformed("values are not in ascending order"));
                }
                if v > MAX_OFFSET {
                    return Err(Error::OffsetOutOfRange { offset: v });
                }
                let at = locate(v);
                if at.page != page && !positions.is_empty() {
                    put(page, &positions)?;
                    positions.clear();
                }
                page = at.page;
                positions.push(position(at.bit));
                ones += 1;
                last = Some(v);
            }
        }
        // A value of at most INLINE_MAX bytes has all its bits in page 0,
        // never put: it takes SET's inline path below.
        if last.is_some_and(|l| l / 8 >= INLINE_MAX) {
            put(page, &positions)?;
        }
        let Some(last) = last else {
            self.delete(key)?;
            return Ok(0);
        };
        let len = last / 8 + 1;
        match build {
            // Nothing put: at most INLINE_MAX bytes, the path SET takes.
            None => {
                // `len` bytes: the last position is the last value.
                let mut bytes = vec![0u8; positions.last().map_or(0, |&p| usize::from(p) / 8 + 1)];
                Page::from_positions(&positions).write_bytes(&mut bytes);
                self.set(key, &bytes)?;
            }
            Some(build) => {
                let meta = build.meta(Kind::String, len, 0);
                build.publish(key, Some(&meta))?;
            }
        }
        Ok(ones)
    }

    /// The set bits of string `key` as a serialized Roaring bitmap of
    /// `format` (bit offset `v` becomes value `v`); a missing key gives an
    /// empty bitmap. See [`Db::write_roaring`].
    ///
    /// The bytes equal what roaring-rs 0.10's `serialize_into` writes for
    /// the same set (that version writes no run containers), so a round
    /// trip through [`Db::import_roaring`] gives the bytes back.
    ///
    /// # Errors
    /// As [`Db::write_roaring`].
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir()?;
    /// use bitsled::RoaringFormat;
    /// use roaring::RoaringTreemap;
    ///
    /// let db = bitsled::Db::open(dir.path())?;
    /// db.set_bits(b"seen", &[3, 1 << 40], true)?;
    /// let bytes = db.export_roaring(b"seen", RoaringFormat::Bits64)?;
    /// let seen = RoaringTreemap::deserialize_from(&bytes[..])?;
    /// assert_eq!(seen.iter().collect::<Vec<u64>>(), vec![3, 1 << 40]);
    /// // 2^40 does not fit a 32-bit bitmap.
    /// assert!(db.export_roaring(b"seen", RoaringFormat::Bits32).is_err());
    /// # Ok(()) }
    /// ```
    pub fn export_roaring(&self, key: &[u8], format: RoaringFormat) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        self.write_roaring(key, format, &mut out)?;
        Ok(out)
    }

    /// Writes the set bits of string `key` to `out` as a serialized Roaring
    /// bitmap of `format` and returns how many there are; a missing key
    /// writes an empty bitmap.
    ///
    /// The bits are read from one consistent value of the key (as
    /// [`Db::ones`] reads them, a page at a time) into an in-memory Roaring
    /// bitmap, which is then serialized: memory is about the size of the
    /// output. Nothing is written to `out` before all bits are read.
    ///
    /// # Errors
    /// [`Error::WrongType`] if `key` is not a string;
    /// [`Error::OffsetOutOfRange`] for a set bit at 2^32 or above with
    /// [`RoaringFormat::Bits32`]; [`Error::Corrupted`] for a page that does
    /// not decode; [`Error::Io`] if writing to `out` fails.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let dir = tempfile::tempdir()?;
    /// use bitsled::RoaringFormat;
    ///
    /// let db = bitsled::Db::open(dir.path())?;
    /// db.set(b"k", b"\x81")?; // offsets 0 and 7
    /// let mut file = Vec::new();
    /// assert_eq!(db.write_roaring(b"k", RoaringFormat::Bits32, &mut file)?, 2);
    /// let bits = roaring::RoaringBitmap::deserialize_from(&file[..])?;
    /// assert_eq!(bits.iter().collect::<Vec<u32>>(), vec![0, 7]);
    /// # Ok(()) }
    /// ```
    pub fn write_roaring(&self, key: &[u8], format: RoaringFormat, out: impl io::Write) -> Result<u64> {
        let offsets = self.ones(key, ..)?;
        // `from_sorted_iter` appends each value in O(1) (`push` would look
        // for the last container's maximum first); offsets ascend, so it
        // cannot refuse them.
        let out_of_order = |_| Error::Corrupted {
            key: String::from_utf8_lossy(key).into_owned(),
            page: None,
            reason: "set bits listed out of order".into(),
        };
        let mut failed = None;
        match format {
            RoaringFormat::Bits32 => {
                let values = offsets.map(|r| {
                    r.and_then(|offset| u32::try_from(offset).map_err(|_| Error::OffsetOutOfRange { offset }))
                });
                let bitmap = RoaringBitmap::from_sorted_iter(until_error(values, &mut failed)).map_err(out_of_order)?;
                if let Some(e) = failed {
                    return Err(e);
                }
                bitmap.serialize_into(out)?;
                Ok(bitmap.len())
            }
            RoaringFormat::Bits64 => {
                let treemap =
                    RoaringTreemap::from_sorted_iter(until_error(offsets, &mut failed)).map_err(out_of_order)?;
                if let Some(e) = failed {
                    return Err(e);
                }
                treemap.serialize_into(out)?;
                Ok(treemap.len())
            }
        }
    }
}

/// The values of `items` up to its first error, which is left in `failed`.
fn until_error<'a, T>(
    items: impl Iterator<Item = Result<T>> + 'a,
    failed: &'a mut Option<Error>,
) -> impl Iterator<Item = T> + 'a {
    items.map_while(move |r| r.map_err(|e| *failed = Some(e)).ok())
}

/// Fuzzing support: reads arbitrary bytes as both formats. Each read must
/// end in `Ok` or an `InvalidArgument` error without panicking, and a
/// 32-bit bitmap it accepts must be the one the `roaring` crate reads. (A
/// round trip through the crate's serialization is not checked: for some
/// malformed run containers the crate keeps a bitset of at most 4,096
/// values and writes it where the format expects an array.)
#[cfg(feature = "testing")]
pub(crate) fn check_parse(data: &[u8]) {
    for format in [RoaringFormat::Bits32, RoaringFormat::Bits64] {
        let Ok(bitmaps) = Bitmaps::new(format, data) else { continue };
        let mut accepted = Vec::new();
        for bitmap in bitmaps {
            match bitmap {
                Ok((high, b)) => accepted.push((high, b)),
                Err(Error::InvalidArgument(_)) => {
                    accepted.clear();
                    break;
                }
                Err(e) => panic!("a parse failure must be InvalidArgument, not {e:?}"),
            }
        }
        if format == RoaringFormat::Bits32 {
            if let [(_, ours)] = &accepted[..] {
                let theirs = RoaringBitmap::deserialize_from(data).expect("the crate reads what bitsled accepts");
                assert_eq!(ours, &theirs, "bitsled and the crate read the same bitmap");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serialized(values: &[u32]) -> Vec<u8> {
        let bitmap: RoaringBitmap = values.iter().copied().collect();
        let mut out = Vec::new();
        bitmap.serialize_into(&mut out).unwrap();
        out
    }

    fn parse(format: RoaringFormat, bytes: &[u8]) -> Result<Vec<u64>> {
        let mut values = Vec::new();
        for bitmap in Bitmaps::new(format, bytes)? {
            let (high, bitmap) = bitmap?;
            values.extend(bitmap.iter().map(|low| high | u64::from(low)));
        }
        Ok(values)
    }

    /// The parser yields the stored bitmaps, and an error for trailing
    /// bytes or a truncated treemap.
    #[test]
    fn values_parse_and_refuse_extra_or_missing_bytes() {
        let bytes = serialized(&[1, 5, 70_000]);
        assert_eq!(parse(RoaringFormat::Bits32, &bytes).unwrap(), vec![1, 5, 70_000]);

        let mut extra = bytes.clone();
        extra.push(0);
        let r = parse(RoaringFormat::Bits32, &extra);
        assert!(matches!(&r, Err(Error::InvalidArgument(t)) if t.contains("after the end of the bitmap (1)")), "{r:?}");

        let mut treemap = 2u64.to_le_bytes().to_vec();
        treemap.extend_from_slice(&3u32.to_le_bytes());
        treemap.extend_from_slice(&bytes);
        let r = parse(RoaringFormat::Bits64, &treemap);
        assert!(matches!(&r, Err(Error::InvalidArgument(t)) if t.contains("truncated")), "{r:?}");
        treemap[0] = 1;
        let base = 3u64 << 32;
        assert_eq!(parse(RoaringFormat::Bits64, &treemap).unwrap(), vec![base | 1, base | 5, base | 70_000]);

        let r = parse(RoaringFormat::Bits64, &[1, 0, 0]);
        assert!(matches!(&r, Err(Error::InvalidArgument(t)) if t.contains("truncated")), "{r:?}");
    }
}
