//! Page groups: the small pages of [`GROUP_PAGES`] consecutive pages of a
//! bitmap, stored together in one record, so that a sparse bitmap does not
//! pay a store key, a header and a checksum for every few set bits.
//!
//! Which pages join: a page whose smallest encoding has a body of at most
//! [`MEMBER_BODY_MAX`] bytes (56 positions, or 14 EWAH words) is a member of
//! its group's record; any other page is a page record of its own. The
//! layout is therefore a function of the bits alone.
//!
//! # Group record format, version 2 (version 1 is read)
//!
//! ```text
//! offset 0      u8   group format version = 2 (GROUP_FORMAT_VERSION)
//! offset 1      u8   members, 1..=64
//! offset 2..n-4      the members, slots strictly increasing, each:
//!                      u8      slot << 2 | encoding (0 dense, 1 sparse,
//!                              2 ewah, 3 runs; runs only in version 2)
//!                      varint  popcount, 1..=32768
//!                      varint  EWAH only: body words, at least 1;
//!                              runs only: runs, at least 1
//!                      body    as in a page record: dense 4,096 bytes,
//!                              sparse 2 * popcount, EWAH 8 * words,
//!                              runs 4 * runs
//! offset n-4..n u32  crc32 of bytes 0..n-4
//! ```
//!
//! The slot is the page's number within its group (`page % 64`). Varints
//! are unsigned LEB128. Decoding checks length, checksum, version, the
//! member count, each member's slot order, encoding, popcount and body
//! length, then each body as a page record's (see [`super::codec`]).

use super::codec::{self, Parts};
use super::{Encoding, Page, PageError};
use crate::varint;

/// Pages per group: group `g` holds pages `64g ..= 64g + 63`.
pub(crate) const GROUP_PAGES: u64 = 64;

/// A page whose smallest encoding's body is at most this many bytes (56
/// positions, 28 runs or 14 EWAH words) is stored in its group's record. 64 such bodies and their member headers
/// keep a group record under 7.5 KB, the size a page record may reach
/// (see DESIGN.md, page geometry).
pub(crate) const MEMBER_BODY_MAX: usize = 112;

/// The most bytes a page's member form may take to be kept in its
/// bitmap's metadata entry ([`encode_lone`]): 15 positions, 3 EWAH words, or 7 runs
/// (6 once the page holds 16,384 set bits or more, whose popcount varint
/// takes 3 bytes).
pub(crate) const LONE_MAX: usize = 32;

/// The group record format version this build writes. It reads this and
/// version 1, the same layout without run lists.
pub(crate) const GROUP_FORMAT_VERSION: u8 = 2;

/// Bytes of a group record before its members: version, count.
const GROUP_HEADER_LEN: usize = 2;

/// Bytes of a group record besides its members: version, count, checksum.
pub(crate) const GROUP_HEADER_BYTES: usize = GROUP_HEADER_LEN + codec::TRAILER_LEN;

/// Whether the page record `record` (as [`Page::encode`] writes it) is
/// small enough to be stored in its group's record instead.
pub(crate) fn fits_group(record: &[u8]) -> bool {
    record.len().saturating_sub(codec::HEADER_LEN + codec::TRAILER_LEN) <= MEMBER_BODY_MAX
}

/// One member of a group record: a page's encoding, popcount and body, and
/// its slot in the group.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Member<'a> {
    /// The page's number within its group.
    pub(crate) slot: u8,
    parts: Parts<'a>,
}

impl<'a> Member<'a> {
    /// The member form of the page record `record` (as [`Page::encode`]
    /// writes it) in slot `slot`, if its body is small enough to join a
    /// group.
    ///
    /// # Errors
    /// If `record` does not validate as a page record.
    pub(crate) fn of_record(slot: u8, record: &'a [u8]) -> Result<Option<Member<'a>>, PageError> {
        let parts = codec::split(record)?;
        Ok((parts.body.len() <= MEMBER_BODY_MAX).then_some(Member { slot, parts }))
    }

    /// Decodes and fully validates the member's page.
    ///
    /// # Errors
    /// As a page record's body ([`Page::decode`]).
    pub(crate) fn page(&self) -> Result<Page, PageError> {
        codec::decode_parts(&self.parts)
    }

    /// The member's encoding.
    pub(crate) fn encoding(&self) -> Encoding {
        self.parts.encoding
    }

    /// Bytes the member takes in a group record.
    pub(crate) fn encoded_len(&self) -> usize {
        let mut head = Vec::with_capacity(8);
        self.put_head(&mut head);
        head.len() + self.parts.body.len()
    }

    /// The slot and encoding byte, the popcount and, for EWAH, the body's
    /// words.
    fn put_head(&self, out: &mut Vec<u8>) {
        out.push(self.slot << 2 | codec::encoding_byte(self.parts.encoding));
        varint::put(out, u64::from(self.parts.popcount));
        match self.parts.encoding {
            Encoding::Ewah => varint::put(out, (self.parts.body.len() / 8) as u64),
            Encoding::Runs => varint::put(out, (self.parts.body.len() / 4) as u64),
            Encoding::Dense | Encoding::Sparse => {}
        }
    }
}

/// The group record holding `members`, which must be 1 to 64 with slots
/// strictly increasing and below 64 (checked in debug builds).
pub(crate) fn encode_group(members: &[Member<'_>]) -> Vec<u8> {
    debug_assert!(!members.is_empty() && members.len() as u64 <= GROUP_PAGES, "1 to 64 members");
    debug_assert!(members.windows(2).all(|w| w[0].slot < w[1].slot), "slots strictly increasing");
    debug_assert!(members.iter().all(|m| u64::from(m.slot) < GROUP_PAGES), "slots below 64");
    let body: usize = members.iter().map(|m| m.parts.body.len() + 8).sum();
    let mut out = Vec::with_capacity(GROUP_HEADER_LEN + body + codec::TRAILER_LEN);
    out.push(GROUP_FORMAT_VERSION);
    // At most 64 members (the caller's contract).
    out.push(u8::try_from(members.len()).unwrap_or(u8::MAX));
    for m in members {
        m.put_head(&mut out);
        out.extend_from_slice(m.parts.body);
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn err(msg: impl std::fmt::Display) -> PageError {
    PageError(format!("page group: {msg}"))
}

/// The members of a group record. Validates the length, checksum, version,
/// member count, and each member's slot order, encoding byte, popcount
/// range and body length; does not parse the bodies ([`Member::page`]
/// does).
///
/// # Errors
/// The first check that fails.
pub(crate) fn split_group(bytes: &[u8]) -> Result<Vec<Member<'_>>, PageError> {
    let min = GROUP_HEADER_LEN + codec::TRAILER_LEN;
    if bytes.len() < min {
        return Err(err(format!("truncated: {} bytes, header and checksum need {min}", bytes.len())));
    }
    let (content, trailer) = bytes.split_at(bytes.len() - codec::TRAILER_LEN);
    let stored = crate::le::read_u32(trailer, 0);
    let computed = crc32fast::hash(content);
    if stored != computed {
        return Err(err(format!("checksum mismatch: stored 0x{stored:08x}, computed 0x{computed:08x}")));
    }
    let version = content[0];
    if version != GROUP_FORMAT_VERSION && version != 1 {
        return Err(err(format!(
            "unsupported group format version {version} (this build reads versions 1 and {GROUP_FORMAT_VERSION})"
        )));
    }
    let count = usize::from(content[1]);
    if count == 0 || count as u64 > GROUP_PAGES {
        return Err(err(format!("{count} members, expected 1 to {GROUP_PAGES}")));
    }
    let mut members: Vec<Member<'_>> = Vec::with_capacity(count);
    let mut at = GROUP_HEADER_LEN;
    for i in 0..count {
        let member = read_member(version, content, &mut at).map_err(|e| err(format!("member {i}: {e}")))?;
        if let Some(prev) = members.last().map(|m| m.slot) {
            if member.slot <= prev {
                return Err(err(format!("member {i}: slots not increasing: {} after {prev}", member.slot)));
            }
        }
        members.push(member);
    }
    if at != content.len() {
        return Err(err(format!("{} bytes after the last member", content.len() - at)));
    }
    Ok(members)
}

/// One member at `at` of `content` (a record of group format `version`),
/// moving `at` past it: validates the slot's range, the encoding byte, the
/// popcount's range and the body's length, not the body.
fn read_member<'a>(version: u8, content: &'a [u8], at: &mut usize) -> Result<Member<'a>, String> {
    let head = *content.get(*at).ok_or("truncated")?;
    *at += 1;
    let slot = head >> 2;
    if u64::from(slot) >= GROUP_PAGES {
        return Err(format!("slot {slot} is outside the group"));
    }
    let encoding = codec::encoding_in(version, head & 3).map_err(|e| e.0)?;
    let popcount = varint::read(content, at).map_err(|e| e.to_string())?;
    let popcount = u32::try_from(popcount).map_err(|_| format!("popcount {popcount} is too large"))?;
    let body_len = match encoding {
        Encoding::Dense => crate::geometry::PAGE_WORDS * 8,
        // A popcount past the page's bits is refused by `check_body`;
        // 2 * u32::MAX fits in a u64-sized usize and is refused below.
        Encoding::Sparse => 2 * popcount as usize,
        Encoding::Ewah | Encoding::Runs => {
            let (unit, what) = if encoding == Encoding::Ewah { (8, "EWAH body of") } else { (4, "run list of") };
            let elements = varint::read(content, at).map_err(|e| e.to_string())?;
            usize::try_from(elements)
                .ok()
                .and_then(|w| w.checked_mul(unit))
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("{what} {elements} elements"))?
        }
    };
    let end = at.checked_add(body_len).filter(|&e| e <= content.len()).ok_or_else(|| {
        format!("body of {body_len} bytes passes the end of the record ({} bytes left)", content.len() - *at)
    })?;
    let body = &content[*at..end];
    codec::check_body(encoding, popcount, body).map_err(|e| e.0)?;
    *at = end;
    Ok(Member { slot, parts: Parts { encoding, popcount, body } })
}

/// A small page's member form (slot 0, as in a group record of the current
/// version) if it takes at most [`LONE_MAX`] bytes: how a bitmap of one
/// small page keeps it in its metadata entry. `None` for a larger page or
/// an empty one.
pub(crate) fn encode_lone(page: &Page) -> Option<Vec<u8>> {
    if page.is_empty() {
        return None;
    }
    let record = page.encode();
    let member = Member::of_record(0, &record).ok().flatten()?;
    let mut out = Vec::with_capacity(member.encoded_len());
    member.put_head(&mut out);
    out.extend_from_slice(member.parts.body);
    (out.len() <= LONE_MAX).then_some(out)
}

/// The page of a member form [`encode_lone`] wrote, fully validated: the
/// bytes must be exactly one member in slot 0.
///
/// # Errors
/// The first check that fails.
pub(crate) fn decode_lone(bytes: &[u8]) -> Result<Page, PageError> {
    let lone = |e: String| PageError(format!("page kept in its entry: {e}"));
    let mut at = 0;
    let member = read_member(GROUP_FORMAT_VERSION, bytes, &mut at).map_err(lone)?;
    if member.slot != 0 || at != bytes.len() {
        return Err(lone(format!("slot {} and {} bytes after the member", member.slot, bytes.len() - at)));
    }
    member.page().map_err(|e| lone(e.0))
}

/// Decodes and fully validates a group record: its members' slots and
/// pages.
///
/// # Errors
/// As [`split_group`], then the first member whose body does not decode.
pub(crate) fn decode_group(bytes: &[u8]) -> Result<Vec<(u8, Page)>, PageError> {
    split_group(bytes)?
        .iter()
        .map(|m| m.page().map(|p| (m.slot, p)).map_err(|e| err(format!("member in slot {}: {e}", m.slot))))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(positions: &[u16]) -> Vec<u8> {
        Page::from_positions(positions).encode()
    }

    /// Members of every small encoding round trip through a group record,
    /// byte for byte the bodies of their page records; a large page does
    /// not join.
    #[test]
    fn round_trip_and_membership() {
        let sparse = record(&[1, 5, 32_767]);
        // 300 full words, then a word of 32 one-bit runs: one EWAH marker
        // with a literal, where a run list takes 33 runs.
        let ewah = Page::from_words(&{
            let mut w = [0u64; crate::geometry::PAGE_WORDS];
            w[..300].fill(u64::MAX);
            w[300] = 0xAAAA_AAAA_AAAA_AAAA;
            w
        })
        .encode();
        let runs = record(&(100..200).chain(300..302).collect::<Vec<_>>());
        let dense = Page::from_positions(&(0..32_768u16).step_by(3).collect::<Vec<_>>()).encode();
        assert!(Member::of_record(0, &dense).unwrap().is_none(), "a dense page is a record of its own");
        let a = Member::of_record(3, &sparse).unwrap().unwrap();
        let r = Member::of_record(40, &runs).unwrap().unwrap();
        let b = Member::of_record(63, &ewah).unwrap().unwrap();
        assert_eq!(b.encoding(), Encoding::Ewah);
        assert_eq!(r.encoding(), Encoding::Runs);
        let bytes = encode_group(&[a, r, b]);
        assert_eq!(bytes.len(), 2 + a.encoded_len() + r.encoded_len() + b.encoded_len() + 4);
        let pages = decode_group(&bytes).unwrap();
        assert_eq!(pages.len(), 3);
        assert_eq!((pages[0].0, &pages[0].1), (3, &Page::decode(&sparse).unwrap()));
        assert_eq!((pages[1].0, &pages[1].1), (40, &Page::decode(&runs).unwrap()));
        assert_eq!((pages[2].0, &pages[2].1), (63, &Page::decode(&ewah).unwrap()));
        // Three sparse positions: a 2-byte member head and 6 bytes of body.
        assert_eq!(a.encoded_len(), 8);
        // Two runs: head, popcount 102, run count, 8 bytes of body.
        assert_eq!(r.encoded_len(), 11);
    }

    /// The largest body that joins still fits 64 members in 7.5 KB.
    #[test]
    fn a_full_group_stays_small() {
        let half = u16::try_from(MEMBER_BODY_MAX / 2).unwrap();
        let positions: Vec<u16> = (0..half).map(|i| i * 500).collect();
        let rec = record(&positions);
        let members: Vec<Member<'_>> = (0..u8::try_from(GROUP_PAGES).unwrap())
            .map(|slot| Member::of_record(slot, &rec).unwrap().unwrap())
            .collect();
        let bytes = encode_group(&members);
        assert!(bytes.len() <= 7_680, "{} bytes", bytes.len());
        assert_eq!(decode_group(&bytes).unwrap().len(), 64);
        let one_more: Vec<u16> = (0..=half).map(|i| i * 500).collect();
        assert!(Member::of_record(0, &record(&one_more)).unwrap().is_none(), "57 positions do not join");
    }

    /// Each malformed record is refused with its own reason, and no
    /// truncation or byte flip panics or decodes to something else.
    #[test]
    fn malformed_records_are_refused() {
        let one = record(&[9]);
        let two = record(&[1, 2]);
        let good =
            encode_group(&[Member::of_record(2, &one).unwrap().unwrap(), Member::of_record(5, &two).unwrap().unwrap()]);
        let reseal = |mut b: Vec<u8>| {
            let n = b.len() - 4;
            let crc = crc32fast::hash(&b[..n]);
            b[n..].copy_from_slice(&crc.to_le_bytes());
            b
        };
        let expect = |bytes: Vec<u8>, reason: &str| {
            let e = split_group(&bytes).map(|_| ()).and_then(|()| decode_group(&bytes).map(|_| ())).unwrap_err();
            assert!(e.0.contains(reason), "got {:?}, expected {reason:?}", e.0);
        };
        expect(good[..good.len() - 1].to_vec(), "checksum mismatch");
        expect(vec![1, 1, 0], "truncated");
        let mut v = good.clone();
        v[0] = 3;
        expect(reseal(v), "unsupported group format version 3");
        let mut v = good.clone();
        v[1] = 0;
        expect(reseal(v), "0 members");
        let mut v = good.clone();
        v[1] = 3;
        expect(reseal(v), "member 2: truncated");
        let mut v = good.clone();
        v[1] = 1;
        expect(reseal(v), "bytes after the last member");
        // Second member's slot byte: after the first (head, popcount 1, 2 body bytes).
        let mut v = good.clone();
        v[2 + 4] = 2 << 2 | 1;
        expect(reseal(v), "slots not increasing");
        let mut v = good.clone();
        v[0] = 1;
        v[2] = 2 << 2 | 3;
        expect(reseal(v), "run list (encoding byte 3) in a format version 1 record");
        let mut v = good.clone();
        v[3] = 0;
        expect(reseal(v), "popcount 0");
        // Position 9 -> 40,000: outside the page.
        let mut v = good.clone();
        v[4..6].copy_from_slice(&40_000u16.to_le_bytes());
        expect(reseal(v), "outside the page");
        for n in 0..good.len() {
            assert!(decode_group(&good[..n]).is_err(), "truncated to {n}");
        }
        for i in 0..good.len() {
            for bit in 0..8 {
                let mut v = good.clone();
                v[i] ^= 1 << bit;
                assert!(decode_group(&v).is_err(), "byte {i} bit {bit} flipped");
                let _ = decode_group(&reseal(v));
            }
        }
    }
}
