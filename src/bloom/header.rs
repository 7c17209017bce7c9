//! The filter header: the chain's parameters and each sub-filter's place
//! and counts, stored as bytes at the start of page 0 of the key's bitmap
//! (DESIGN.md, "Bloom filters", has the byte layout).

use super::{sizing, MAX_EXPANSION, MAX_FILTERS, TIGHTENING};
use crate::geometry::PAGE_BITS;
use crate::le::{read_u32, read_u64};

/// The page of a filter's bitmap that holds the header.
pub(crate) const HEADER_PAGE: u64 = 0;

/// The header layout version this build writes and reads.
const LAYOUT_VERSION: u8 = 1;
/// Flag bit: the chain never grows.
const FLAG_NONSCALING: u8 = 1;

/// Byte offsets of the fixed part.
mod layout {
    pub(super) const VERSION: usize = 0;
    pub(super) const FLAGS: usize = 1;
    pub(super) const COUNT: usize = 2;
    pub(super) const EXPANSION: usize = 4;
    pub(super) const FILTERS: usize = 8;
    /// Bytes of one sub-filter record.
    pub(super) const RECORD: usize = 48;
    // Offsets inside a record.
    pub(super) const CAPACITY: usize = 0;
    pub(super) const ERROR: usize = 8;
    pub(super) const HASHES: usize = 16;
    // 20..24: reserved, zero.
    pub(super) const BITS: usize = 24;
    pub(super) const FIRST_PAGE: usize = 32;
    pub(super) const ITEMS: usize = 40;
    /// Bytes of the CRC-32 trailer.
    pub(super) const CRC: usize = 4;
}

/// Bytes of a header with `n` sub-filters.
pub(crate) const fn header_len(n: usize) -> usize {
    layout::FILTERS + n * layout::RECORD + layout::CRC
}

/// One sub-filter of the chain.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct SubFilter {
    /// Items it was sized for; the chain grows when it holds this many.
    pub(crate) capacity: u64,
    /// Its false-positive rate.
    pub(crate) error: f64,
    /// Hash functions.
    pub(crate) hashes: u32,
    /// Bits in its array (a multiple of 64).
    pub(crate) bits: u64,
    /// Page of the key's bitmap where its array starts (bit 0 of the array
    /// is bit 0 of that page).
    pub(crate) first_page: u64,
    /// Items added to it.
    pub(crate) items: u64,
}

impl SubFilter {
    /// Bitmap pages its array spans.
    pub(crate) fn pages(&self) -> u64 {
        self.bits.div_ceil(PAGE_BITS)
    }

    /// The bitmap offset of bit `pos` of its array.
    pub(crate) fn offset(&self, pos: u64) -> u64 {
        self.first_page * PAGE_BITS + pos
    }

    pub(super) fn new(capacity: u64, error: f64, first_page: u64) -> Result<SubFilter, String> {
        let s = sizing(capacity, error)
            .ok_or_else(|| format!("no sub-filter can hold {capacity} items at error rate {error}"))?;
        Ok(SubFilter { capacity, error, hashes: s.hashes, bits: s.bits, first_page, items: 0 })
    }

    /// The page after its last one.
    fn end_page(&self) -> Option<u64> {
        self.first_page.checked_add(self.pages())
    }
}

/// The chain's parameters and sub-filters.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Header {
    /// Capacity factor of each new sub-filter.
    pub(crate) expansion: u32,
    /// Whether the chain never grows.
    pub(crate) nonscaling: bool,
    /// Sub-filters, oldest first; never empty.
    pub(crate) filters: Vec<SubFilter>,
}

impl Header {
    /// A new chain of one empty sub-filter for `capacity` items. A scaling
    /// chain's first sub-filter gets `error * 0.5`, so the whole chain stays
    /// below `error`; a non-scaling one gets `error` itself.
    ///
    /// # Errors
    /// A description if the arguments give no valid sub-filter.
    pub(crate) fn new(error: f64, capacity: u64, expansion: u32, nonscaling: bool) -> Result<Header, String> {
        if expansion > MAX_EXPANSION {
            return Err(format!("expansion {expansion} is above {MAX_EXPANSION}"));
        }
        let nonscaling = nonscaling || expansion == 0;
        let first_error = if nonscaling { error } else { error * TIGHTENING };
        let first = SubFilter::new(capacity, first_error, HEADER_PAGE + 1)?;
        Ok(Header { expansion, nonscaling, filters: vec![first] })
    }

    /// The newest sub-filter.
    pub(crate) fn newest(&self) -> &SubFilter {
        // `filters` is never empty: `new` makes one, `decode` requires one.
        &self.filters[self.filters.len() - 1]
    }

    fn newest_mut(&mut self) -> &mut SubFilter {
        let n = self.filters.len() - 1;
        &mut self.filters[n]
    }

    /// Counts one item added to the newest sub-filter.
    pub(crate) fn count_added(&mut self) {
        self.newest_mut().items += 1;
    }

    /// Whether the newest sub-filter holds its capacity.
    pub(crate) fn is_full(&self) -> bool {
        let n = self.newest();
        n.items >= n.capacity
    }

    /// Appends a sub-filter with `expansion` times the newest one's
    /// capacity and half its error rate, starting at the page after it.
    ///
    /// # Errors
    /// A description if the chain has [`MAX_FILTERS`] sub-filters or the
    /// new one would be too large.
    pub(crate) fn grow(&mut self) -> Result<(), String> {
        if self.filters.len() >= MAX_FILTERS {
            return Err(format!("the chain has the maximum of {MAX_FILTERS} sub-filters"));
        }
        let last = *self.newest();
        let capacity =
            last.capacity.checked_mul(u64::from(self.expansion)).ok_or("the next sub-filter's capacity overflows")?;
        let first_page = last.end_page().ok_or("the next sub-filter's place overflows")?;
        let next = SubFilter::new(capacity, last.error * TIGHTENING, first_page)?;
        next.end_page().ok_or("the next sub-filter's place overflows")?;
        self.filters.push(next);
        Ok(())
    }

    /// The page after the last sub-filter's last page: the filter spans
    /// pages `0 .. end_page()`.
    pub(crate) fn end_page(&self) -> u64 {
        // Checked when each sub-filter was made or decoded.
        self.newest().end_page().unwrap_or(u64::MAX)
    }

    /// Sum of the sub-filters' capacities.
    pub(crate) fn capacity(&self) -> u64 {
        self.filters.iter().fold(0u64, |a, f| a.saturating_add(f.capacity))
    }

    /// Items added, over all sub-filters.
    pub(crate) fn items(&self) -> u64 {
        self.filters.iter().fold(0u64, |a, f| a.saturating_add(f.items))
    }

    /// Memory as RedisBloom's BF.INFO counts it: the chain struct (32
    /// bytes), one link struct per sub-filter (64 bytes) and the bit arrays.
    pub(crate) fn redis_size(&self) -> u64 {
        self.filters.iter().fold(32u64, |a, f| a.saturating_add(64).saturating_add(f.bits / 8))
    }

    /// The header's bytes (see DESIGN.md).
    pub(crate) fn encode(&self) -> Vec<u8> {
        use layout::{
            BITS, CAPACITY, COUNT, CRC, ERROR, EXPANSION, FILTERS, FIRST_PAGE, FLAGS, HASHES, ITEMS, RECORD, VERSION,
        };
        let n = self.filters.len();
        let mut b = vec![0u8; header_len(n)];
        b[VERSION] = LAYOUT_VERSION;
        b[FLAGS] = if self.nonscaling { FLAG_NONSCALING } else { 0 };
        // At most MAX_FILTERS (64), so it fits in u16.
        let count = u16::try_from(n).unwrap_or(u16::MAX);
        b[COUNT..COUNT + 2].copy_from_slice(&count.to_le_bytes());
        b[EXPANSION..EXPANSION + 4].copy_from_slice(&self.expansion.to_le_bytes());
        for (i, f) in self.filters.iter().enumerate() {
            let r = FILTERS + i * RECORD;
            b[r + CAPACITY..r + CAPACITY + 8].copy_from_slice(&f.capacity.to_le_bytes());
            b[r + ERROR..r + ERROR + 8].copy_from_slice(&f.error.to_bits().to_le_bytes());
            b[r + HASHES..r + HASHES + 4].copy_from_slice(&f.hashes.to_le_bytes());
            b[r + BITS..r + BITS + 8].copy_from_slice(&f.bits.to_le_bytes());
            b[r + FIRST_PAGE..r + FIRST_PAGE + 8].copy_from_slice(&f.first_page.to_le_bytes());
            b[r + ITEMS..r + ITEMS + 8].copy_from_slice(&f.items.to_le_bytes());
        }
        let end = b.len() - CRC;
        let crc = crc32fast::hash(&b[..end]);
        b[end..].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parses and validates a header from the bytes of the header page
    /// (trailing bytes must be zero).
    ///
    /// Checks the version, flags, count, checksum, and that every
    /// sub-filter is the one the chain's rules make: its sizing follows
    /// from its capacity and error rate, each follows the previous one
    /// (capacity times the expansion, half the error rate, the next page),
    /// and none holds more items than its capacity.
    ///
    /// # Errors
    /// A description of the first check that failed; never panics.
    pub(crate) fn decode(b: &[u8]) -> Result<Header, String> {
        use layout::{
            BITS, CAPACITY, COUNT, CRC, ERROR, EXPANSION, FILTERS, FIRST_PAGE, FLAGS, HASHES, ITEMS, RECORD, VERSION,
        };
        if b.len() < header_len(1) {
            return Err(format!("{} bytes are too few for a header", b.len()));
        }
        if b[VERSION] != LAYOUT_VERSION {
            return Err(format!("unknown header layout version {}", b[VERSION]));
        }
        let flags = b[FLAGS];
        if flags & !FLAG_NONSCALING != 0 {
            return Err(format!("unknown flags {flags:#04x}"));
        }
        let n = usize::from(u16::from_le_bytes([b[COUNT], b[COUNT + 1]]));
        if n == 0 || n > MAX_FILTERS {
            return Err(format!("{n} sub-filters, expected 1 ..= {MAX_FILTERS}"));
        }
        let len = header_len(n);
        if b.len() < len {
            return Err(format!("{n} sub-filters need {len} bytes, have {}", b.len()));
        }
        let stored = read_u32(b, len - CRC);
        let computed = crc32fast::hash(&b[..len - CRC]);
        if stored != computed {
            return Err(format!("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"));
        }
        if b[len..].iter().any(|&x| x != 0) {
            return Err("bytes after the header are not zero".into());
        }
        let nonscaling = flags & FLAG_NONSCALING != 0;
        let expansion = read_u32(b, EXPANSION);
        if expansion > MAX_EXPANSION {
            return Err(format!("expansion {expansion} is above {MAX_EXPANSION}"));
        }
        if nonscaling && n != 1 {
            return Err(format!("a non-scaling filter has {n} sub-filters"));
        }
        let mut filters: Vec<SubFilter> = Vec::with_capacity(n);
        for i in 0..n {
            let r = FILTERS + i * RECORD;
            let f = SubFilter {
                capacity: read_u64(b, r + CAPACITY),
                error: f64::from_bits(read_u64(b, r + ERROR)),
                hashes: read_u32(b, r + HASHES),
                bits: read_u64(b, r + BITS),
                first_page: read_u64(b, r + FIRST_PAGE),
                items: read_u64(b, r + ITEMS),
            };
            let bad = |what: String| format!("sub-filter {i}: {what}");
            if read_u32(b, r + HASHES + 4) != 0 {
                return Err(bad("reserved bytes are not zero".into()));
            }
            let Some(s) = sizing(f.capacity, f.error) else {
                return Err(bad(format!("capacity {} at error rate {} is not a valid filter", f.capacity, f.error)));
            };
            if (s.bits, s.hashes) != (f.bits, f.hashes) {
                return Err(bad(format!(
                    "{} bits and {} hashes, the sizing gives {} and {}",
                    f.bits, f.hashes, s.bits, s.hashes
                )));
            }
            if f.items > f.capacity {
                return Err(bad(format!("{} items exceed the capacity {}", f.items, f.capacity)));
            }
            let (want_page, chained) = match filters.last() {
                None => (Some(HEADER_PAGE + 1), true),
                Some(prev) => (
                    prev.end_page(),
                    prev.capacity.checked_mul(u64::from(expansion)) == Some(f.capacity)
                        && prev.error * TIGHTENING == f.error
                        && prev.items == prev.capacity,
                ),
            };
            if want_page != Some(f.first_page) || f.end_page().is_none() {
                return Err(bad(format!("starts at page {}, expected {want_page:?}", f.first_page)));
            }
            if !chained {
                return Err(bad("does not follow from the previous sub-filter".into()));
            }
            filters.push(f);
        }
        Ok(Header { expansion, nonscaling, filters })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grown() -> Header {
        let mut h = Header::new(0.01, 100, 2, false).unwrap();
        for _ in 0..3 {
            while !h.is_full() {
                h.count_added();
            }
            h.grow().unwrap();
        }
        h.count_added();
        h
    }

    /// A scaling chain starts at half the error rate, each sub-filter
    /// doubles the capacity, halves the error and starts on the page after
    /// the previous one.
    #[test]
    fn chain_follows_the_scaling_rules() {
        let h = grown();
        assert_eq!(h.filters.len(), 4);
        assert_eq!(h.filters[0].error, 0.005);
        assert_eq!(h.filters[0].first_page, 1);
        for w in h.filters.windows(2) {
            assert_eq!(w[1].capacity, w[0].capacity * 2);
            assert_eq!(w[1].error, w[0].error * 0.5);
            assert_eq!(w[1].first_page, w[0].first_page + w[0].pages());
        }
        assert_eq!(h.capacity(), 100 + 200 + 400 + 800);
        assert_eq!(h.items(), 100 + 200 + 400 + 1);
        let n = Header::new(0.01, 100, 2, true).unwrap();
        assert_eq!(n.filters[0].error, 0.01, "a non-scaling filter keeps the requested rate");
        let z = Header::new(0.01, 100, 0, false).unwrap();
        assert!(z.nonscaling, "expansion 0 means non-scaling");
    }

    /// encode then decode gives the same header.
    #[test]
    fn header_round_trips() {
        for h in [grown(), Header::new(0.001, 1 << 30, 32_768, false).unwrap(), Header::new(0.2, 1, 1, true).unwrap()] {
            assert_eq!(Header::decode(&h.encode()).unwrap(), h);
            let mut page = h.encode();
            page.resize(4096, 0);
            assert_eq!(Header::decode(&page).unwrap(), h, "trailing zeros are accepted");
        }
    }

    /// Every flipped bit, every truncation and garbage after the header is
    /// an error, never a panic.
    #[test]
    fn damage_is_detected() {
        let enc = grown().encode();
        for i in 0..enc.len() {
            for bit in [0x01u8, 0x80] {
                let mut b = enc.clone();
                b[i] ^= bit;
                assert!(Header::decode(&b).is_err(), "flip {bit:#x} at {i} accepted");
            }
        }
        for n in 0..enc.len() {
            assert!(Header::decode(&enc[..n]).is_err(), "truncation to {n} accepted");
        }
        let mut b = enc.clone();
        b.extend_from_slice(&[0, 0, 1]);
        assert!(Header::decode(&b).is_err());
        assert!(Header::decode(&[0u8; 4096]).is_err());
        assert!(Header::decode(&[0xffu8; 4096]).is_err());
    }

    /// A header that passes its checksum but breaks the chain's rules is
    /// refused: the checks do not rely on the checksum alone.
    #[test]
    fn inconsistent_headers_are_refused() {
        let reseal = |mut h: Header, f: &dyn Fn(&mut Header)| {
            f(&mut h);
            Header::decode(&h.encode())
        };
        let cases: [&dyn Fn(&mut Header); 7] = [
            &|h| h.filters[1].bits += 64,
            &|h| h.filters[1].hashes += 1,
            &|h| h.filters[2].first_page += 1,
            &|h| h.filters[0].items -= 1,
            &|h| h.filters[3].items = h.filters[3].capacity + 1,
            &|h| h.filters[2].error *= 0.9,
            &|h| h.nonscaling = true,
        ];
        for (i, f) in cases.iter().enumerate() {
            let r = reseal(grown(), f);
            assert!(r.is_err(), "case {i} accepted: {r:?}");
        }
    }

    /// Growth stops at MAX_FILTERS and on capacity overflow, with an error.
    #[test]
    fn growth_limits() {
        let mut h = Header::new(0.01, 1, 1, false).unwrap();
        for _ in 1..MAX_FILTERS {
            h.grow().unwrap();
        }
        assert!(h.grow().is_err());
        let mut h = Header::new(0.01, 1 << 30, 32_768, false).unwrap();
        let r = (0..10).try_for_each(|_| h.grow());
        assert!(r.is_err(), "capacity must overflow or the array grow too large");
        assert!(header_len(MAX_FILTERS) <= 4096, "the largest header fits in one page");
    }
}
