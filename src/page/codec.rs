//! On-disk page format, version 2 (version 1 is read): header, body and
//! CRC-32 trailer.
//!
//! See the module documentation of [`crate::page`] for the layout. Input is
//! read through zerocopy's unaligned little-endian types, never by casting
//! pointers: stored bytes carry no alignment guarantee.

use zerocopy::byteorder::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use super::{choose, dense, ewah, runs, sparse, Census, Encoding, Page, PageError, Repr, BITS};
use crate::geometry::PAGE_WORDS;

/// The page format version this build writes. It reads this and
/// [`PAGE_FORMAT_V1`].
pub(crate) const PAGE_FORMAT_VERSION: u8 = 2;
/// The page format before run lists: the same layout without encoding 3.
pub(crate) const PAGE_FORMAT_V1: u8 = 1;
/// Bytes before the body: version, encoding, popcount.
pub(crate) const HEADER_LEN: usize = 4;
/// Bytes after the body: the CRC-32.
pub(crate) const TRAILER_LEN: usize = 4;

/// Encoding byte of a dense page.
const DENSE: u8 = 0;
/// Encoding byte of a sparse page.
const SPARSE: u8 = 1;
/// Encoding byte of an EWAH page.
const EWAH: u8 = 2;
/// Encoding byte of a run list (format version 2).
const RUNS: u8 = 3;

/// Total encoded length of a page in `encoding` whose body holds `elements`
/// elements: 64-bit words for dense and EWAH, 16-bit positions for sparse,
/// runs of two 16-bit numbers for runs.
pub(crate) const fn encoded_len(encoding: Encoding, elements: usize) -> usize {
    let element = match encoding {
        Encoding::Dense | Encoding::Ewah => 8,
        Encoding::Sparse => 2,
        Encoding::Runs => 4,
    };
    HEADER_LEN + element * elements + TRAILER_LEN
}

/// The fixed header at offset 0.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct Header {
    version: u8,
    encoding: u8,
    popcount: U16,
}

/// A stored page whose header and checksum validated.
#[derive(Clone, Copy, Debug)]
pub(super) struct Parts<'a> {
    pub(super) encoding: Encoding,
    pub(super) popcount: u32,
    /// The body, its length already checked against the encoding.
    pub(super) body: &'a [u8],
}

fn err(msg: String) -> PageError {
    PageError(msg)
}

/// Validates length, version, checksum, encoding byte, popcount range and the
/// body length for the encoding; does not parse the body.
pub(super) fn split(bytes: &[u8]) -> Result<Parts<'_>, PageError> {
    let min = HEADER_LEN + TRAILER_LEN;
    if bytes.len() < min {
        return Err(err(format!("truncated: {} bytes, header and checksum need {min}", bytes.len())));
    }
    let Ok((header, _)) = Header::ref_from_prefix(bytes) else {
        return Err(err(format!("truncated: {} bytes, header needs {HEADER_LEN}", bytes.len())));
    };
    if header.version != PAGE_FORMAT_VERSION && header.version != PAGE_FORMAT_V1 {
        return Err(err(format!(
            "unsupported page format version {} (this build reads versions {PAGE_FORMAT_V1} and \
             {PAGE_FORMAT_VERSION})",
            header.version
        )));
    }
    let (content, trailer) = bytes.split_at(bytes.len() - TRAILER_LEN);
    let stored = U32::read_from_bytes(trailer).map_err(|_| err("unreadable checksum trailer".to_owned()))?.get();
    let computed = crc32fast::hash(content);
    if stored != computed {
        return Err(err(format!("checksum mismatch: stored 0x{stored:08x}, computed 0x{computed:08x}")));
    }
    let encoding = encoding_in(header.version, header.encoding)?;
    let body = &content[HEADER_LEN..];
    let popcount = u32::from(header.popcount.get());
    check_body(encoding, popcount, body)?;
    Ok(Parts { encoding, popcount, body })
}

/// The encoding an encoding byte names in a record of format `version`
/// (page or group: both added runs in their version 2).
pub(super) fn encoding_in(version: u8, byte: u8) -> Result<Encoding, PageError> {
    match byte {
        DENSE => Ok(Encoding::Dense),
        SPARSE => Ok(Encoding::Sparse),
        EWAH => Ok(Encoding::Ewah),
        RUNS if version >= 2 => Ok(Encoding::Runs),
        RUNS => Err(err(format!("run list (encoding byte {RUNS}) in a format version {version} record"))),
        other => Err(err(format!("unknown page encoding byte {other}"))),
    }
}

/// The encoding byte of `encoding`.
pub(super) fn encoding_byte(encoding: Encoding) -> u8 {
    match encoding {
        Encoding::Dense => DENSE,
        Encoding::Sparse => SPARSE,
        Encoding::Ewah => EWAH,
        Encoding::Runs => RUNS,
    }
}

/// Checks a popcount's range and that a body's length fits its encoding
/// (and popcount, for sparse); does not parse the body.
pub(super) fn check_body(encoding: Encoding, popcount: u32, body: &[u8]) -> Result<(), PageError> {
    if popcount == 0 {
        return Err(err("popcount 0: empty pages are never stored".to_owned()));
    }
    if popcount > BITS {
        return Err(err(format!("popcount {popcount} exceeds the {BITS} bits of a page")));
    }
    match encoding {
        Encoding::Dense => {
            if body.len() != PAGE_WORDS * 8 {
                return Err(err(format!("dense page body is {} bytes, expected {}", body.len(), PAGE_WORDS * 8)));
            }
        }
        Encoding::Sparse => {
            // popcount <= 32,768, so 2 * popcount cannot overflow.
            let expect = 2 * popcount as usize;
            if body.len() != expect {
                return Err(err(format!(
                    "sparse page body is {} bytes, expected {expect} for {popcount} positions",
                    body.len()
                )));
            }
        }
        Encoding::Ewah => {
            if body.is_empty() || body.len() % 8 != 0 {
                return Err(err(format!("ewah page body is {} bytes, expected a non-zero multiple of 8", body.len())));
            }
        }
        Encoding::Runs => {
            if body.is_empty() || body.len() % 4 != 0 {
                return Err(err(format!("runs page body is {} bytes, expected a non-zero multiple of 4", body.len())));
            }
        }
    }
    Ok(())
}

/// Decodes and fully validates a stored page.
pub(super) fn decode(bytes: &[u8]) -> Result<Page, PageError> {
    decode_parts(&split(bytes)?)
}

/// Decodes a page body whose length [`check_body`] accepted: the body's
/// structure (sparse order and range, EWAH coverage) and that its bits
/// match the popcount.
pub(super) fn decode_parts(parts: &Parts<'_>) -> Result<Page, PageError> {
    let popcount = parts.popcount;
    let (repr, ones) = match parts.encoding {
        Encoding::Dense => {
            let body =
                <[U64]>::ref_from_bytes(parts.body).map_err(|_| err("dense body is not whole words".to_owned()))?;
            let mut words = Box::new([0u64; PAGE_WORDS]);
            for (w, x) in words.iter_mut().zip(body) {
                *w = x.get();
            }
            let ones = dense::popcount(&words[..]);
            (Repr::Dense(words), ones)
        }
        Encoding::Sparse => {
            let body = <[U16]>::ref_from_bytes(parts.body)
                .map_err(|_| err("sparse body is not whole positions".to_owned()))?;
            let mut pos = Vec::with_capacity(body.len());
            for (i, x) in body.iter().enumerate() {
                let p = x.get();
                if u32::from(p) >= BITS {
                    return Err(err(format!("sparse position {p} at index {i} is outside the page ({BITS} bits)")));
                }
                if let Some(&prev) = pos.last() {
                    if p <= prev {
                        return Err(err(format!("sparse positions not increasing at index {i}: {p} after {prev}")));
                    }
                }
                pos.push(p);
            }
            // The body length was checked to be 2 * popcount.
            (Repr::Sparse(pos), popcount)
        }
        Encoding::Ewah => {
            let body =
                <[U64]>::ref_from_bytes(parts.body).map_err(|_| err("ewah body is not whole words".to_owned()))?;
            let stream: Vec<u64> = body.iter().map(|x| x.get()).collect();
            let ones = ewah::validate(&stream)?;
            (Repr::Ewah(stream), ones)
        }
        Encoding::Runs => {
            let body =
                <[U16]>::ref_from_bytes(parts.body).map_err(|_| err("runs body is not whole runs".to_owned()))?;
            let mut list: Vec<runs::Run> = Vec::with_capacity(body.len() / 2);
            for (i, run) in body.chunks_exact(2).enumerate() {
                let (first, extra) = (run[0].get(), run[1].get());
                let last = u32::from(first) + u32::from(extra);
                if last >= BITS {
                    return Err(err(format!("run {i} ends at {last}, outside the page ({BITS} bits)")));
                }
                list.push([first, crate::geometry::position(last)]);
            }
            let ones = runs::validate(&list)?;
            (Repr::Runs(list), ones)
        }
    };
    if ones != popcount {
        return Err(err(format!(
            "popcount mismatch: header says {popcount}, {} body has {ones} set bits",
            parts.encoding.name()
        )));
    }
    Ok(Page { repr, ones })
}

/// Encodes `page` in its smallest encoding.
pub(super) fn encode_smallest(page: &Page) -> Vec<u8> {
    let mut words = [0u64; PAGE_WORDS];
    page.to_words(&mut words);
    let known = match &page.repr {
        Repr::Sparse(pos) => Some(&pos[..]),
        _ => None,
    };
    let choice = choose(&words, Census::of(&words), known);
    let positions = known.unwrap_or(&choice.positions);
    match choice.encoding {
        Encoding::Sparse => write(Encoding::Sparse, page.ones, positions.len(), |out| write_sparse(positions, out)),
        Encoding::Ewah => write(Encoding::Ewah, page.ones, choice.ewah_len, |out| {
            let mut stream = Vec::with_capacity(choice.ewah_len);
            ewah::encode_into(&words, &mut stream);
            write_words(&stream, out);
        }),
        Encoding::Dense => write(Encoding::Dense, page.ones, PAGE_WORDS, |out| write_words(&words, out)),
        Encoding::Runs => {
            // A run-list page is written from its own list, not a copy.
            let built;
            let list = match &page.repr {
                Repr::Runs(list) => list,
                _ if !positions.is_empty() => {
                    built = runs::from_positions(positions);
                    &built
                }
                _ => {
                    built = runs::from_words(&words, choice.runs);
                    &built
                }
            };
            write(Encoding::Runs, page.ones, list.len(), |out| write_runs(list, out))
        }
    }
}

#[cfg(any(test, feature = "testing"))]
/// Encodes `page` in `encoding` (EWAH bodies are canonical).
pub(super) fn encode_as(page: &Page, encoding: Encoding) -> Vec<u8> {
    let mut words = [0u64; PAGE_WORDS];
    page.to_words(&mut words);
    match encoding {
        Encoding::Sparse => {
            let pos = dense::positions(&words, page.ones);
            write(encoding, page.ones, pos.len(), |out| write_sparse(&pos, out))
        }
        Encoding::Ewah => {
            let stream = ewah::encode(&words);
            write(encoding, page.ones, stream.len(), |out| write_words(&stream, out))
        }
        Encoding::Dense => write(encoding, page.ones, PAGE_WORDS, |out| write_words(&words, out)),
        Encoding::Runs => {
            let list = runs::from_words(&words, runs::count(&words));
            write(encoding, page.ones, list.len(), |out| write_runs(&list, out))
        }
    }
}

/// Each run as its first position and its length - 1.
fn write_runs(list: &[runs::Run], out: &mut Vec<u8>) {
    for &[first, last] in list {
        out.extend_from_slice(&first.to_le_bytes());
        out.extend_from_slice(&(last - first).to_le_bytes());
    }
}

fn write_sparse(pos: &[u16], out: &mut Vec<u8>) {
    debug_assert!(sparse::is_valid(pos));
    for p in pos {
        out.extend_from_slice(&p.to_le_bytes());
    }
}

fn write_words(words: &[u64], out: &mut Vec<u8>) {
    for w in words {
        out.extend_from_slice(&w.to_le_bytes());
    }
}

/// Header, `body` (of `elements` elements), then the checksum.
fn write(encoding: Encoding, ones: u32, elements: usize, body: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let header = Header {
        version: PAGE_FORMAT_VERSION,
        encoding: encoding_byte(encoding),
        // A page holds at most 32,768 set bits, which fits in u16 (max 65,535).
        popcount: U16::new(u16::try_from(ones).unwrap_or(u16::MAX)),
    };
    let mut out = Vec::with_capacity(encoded_len(encoding, elements));
    out.extend_from_slice(header.as_bytes());
    body(&mut out);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}
