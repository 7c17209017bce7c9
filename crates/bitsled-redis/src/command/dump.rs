//! DUMP and RESTORE with Redis 7.0's serialization of a string value, so
//! values move between Redis and bitsled in both directions (migration
//! tools, MIGRATE-style copies).
//!
//! A payload is the value in RDB form, then the RDB version (u16 LE) and a
//! CRC-64 (Jones polynomial, Redis's `crc64`, u64 LE) of everything before
//! it:
//!
//! ```text
//! 0x00 (string type) | string | version (10) | crc64
//! ```
//!
//! The string is an integer encoding for a canonical integer within 32
//! bits (`0xC0` + 1 byte, `0xC1` + 2 bytes, `0xC2` + 4 bytes, LE), or a
//! length (RDB's 6-, 14-, 32- or 64-bit form) and the bytes. RESTORE also
//! reads LZF-compressed strings (`0xC3`, compressed and original length,
//! the LZF data), and DUMP writes them where Redis does: for strings
//! longer than 20 bytes that compress by more than 4 bytes. Only strings (bitmaps and HyperLogLogs
//! included) can be stored here: another type's payload is refused.

use super::args::{int, is, ERR_SYNTAX};
use super::lzf;
use super::{CmdResult, Fail, Reply};
use bitsled::{Db, SetCondition, SetExpiry, SetOptions};

/// The RDB version of Redis 7.0, written by DUMP; RESTORE accepts it and
/// older ones.
const RDB_VERSION: u16 = 10;
/// RDB type of a string.
const TYPE_STRING: u8 = 0;
/// Highest object type number of RDB version 10 (a quicklist 2 list).
const TYPE_MAX: u8 = 18;

/// Slice-by-16 tables: a payload of a large bitmap is checksummed at
/// memory speed rather than a byte at a time.
const CRC: crc::Crc<u64, crc::Table<16>> = crc::Crc::<u64, crc::Table<16>>::new(&crc::CRC_64_REDIS);

fn bad_payload() -> Fail {
    Fail::new("ERR DUMP payload version or checksum are wrong")
}

fn bad_format() -> Fail {
    Fail::new("ERR Bad data format")
}

/// RDB's length encoding.
fn put_len(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.extend_from_slice(&[0x40 | (n >> 8) as u8, n as u8]);
    } else if let Ok(n) = u32::try_from(n) {
        out.push(0x80);
        out.extend_from_slice(&n.to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// The DUMP payload of string `value`.
pub(crate) fn serialize(value: &[u8]) -> Vec<u8> {
    serialize_with(value, false)
}

/// The sample a transfer's payload tries LZF on first.
const SAMPLE_BYTES: usize = 64 << 10;

/// [`serialize`] for moving a value (MIGRATE, slot migration), where any
/// valid payload will do: a value whose first 64 KiB LZF cannot shrink by
/// a tenth is sent uncompressed without trying the rest (a dense random
/// bitmap costs no compression pass; a sparse one still compresses).
pub(crate) fn serialize_for_transfer(value: &[u8]) -> Vec<u8> {
    let sample = &value[..value.len().min(SAMPLE_BYTES)];
    let hopeless = value.len() > SAMPLE_BYTES && lzf::compress_below(sample, sample.len() / 10 * 9).is_none();
    serialize_with(value, hopeless)
}

fn serialize_with(value: &[u8], raw: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(value.len() + 20);
    out.push(TYPE_STRING);
    match bitsled::parse_integer(value).filter(|_| value.len() <= 11).and_then(|n| i32::try_from(n).ok()) {
        Some(n) if i8::try_from(n).is_ok() => out.extend_from_slice(&[0xC0, n as u8]),
        Some(n) if i16::try_from(n).is_ok() => {
            out.push(0xC1);
            out.extend_from_slice(&(n as i16).to_le_bytes());
        }
        Some(n) => {
            out.push(0xC2);
            out.extend_from_slice(&n.to_le_bytes());
        }
        None => {
            // As Redis: compressed when it saves more than 4 bytes.
            let packed = if value.len() > 20 && !raw { lzf::compress_below(value, value.len() - 4) } else { None };
            if let Some(packed) = packed {
                out.push(0xC3);
                put_len(&mut out, packed.len() as u64);
                put_len(&mut out, value.len() as u64);
                out.extend_from_slice(&packed);
            } else {
                put_len(&mut out, value.len() as u64);
                out.extend_from_slice(value);
            }
        }
    }
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = CRC.checksum(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Reads RDB data from a payload.
struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Fail> {
        if n > self.b.len() {
            return Err(bad_format());
        }
        let (head, rest) = self.b.split_at(n);
        self.b = rest;
        Ok(head)
    }

    fn byte(&mut self) -> Result<u8, Fail> {
        Ok(self.take(1)?[0])
    }

    /// A length, or `Err(encoding)` for a special encoding (`0xC0 | n`).
    fn len(&mut self) -> Result<Result<u64, u8>, Fail> {
        let first = self.byte()?;
        Ok(match first >> 6 {
            0 => Ok(u64::from(first & 0x3F)),
            1 => Ok((u64::from(first & 0x3F) << 8) | u64::from(self.byte()?)),
            3 => Err(first & 0x3F),
            _ => match first {
                0x80 => Ok(u64::from(u32::from_be_bytes(self.take(4)?.try_into().map_err(|_| bad_format())?))),
                0x81 => Ok(u64::from_be_bytes(self.take(8)?.try_into().map_err(|_| bad_format())?)),
                _ => return Err(bad_format()),
            },
        })
    }

    fn plain_len(&mut self) -> Result<usize, Fail> {
        match self.len()? {
            Ok(n) => usize::try_from(n).map_err(|_| bad_format()),
            Err(_) => Err(bad_format()),
        }
    }

    /// A string in any of RDB's encodings.
    fn string(&mut self, max: u64) -> Result<Vec<u8>, Fail> {
        match self.len()? {
            Ok(n) if n > max => Err(too_large(n, max)),
            Ok(n) => Ok(self.take(usize::try_from(n).map_err(|_| bad_format())?)?.to_vec()),
            Err(0) => Ok((self.byte()? as i8).to_string().into_bytes()),
            Err(1) => {
                Ok(i16::from_le_bytes(self.take(2)?.try_into().map_err(|_| bad_format())?).to_string().into_bytes())
            }
            Err(2) => {
                Ok(i32::from_le_bytes(self.take(4)?.try_into().map_err(|_| bad_format())?).to_string().into_bytes())
            }
            Err(3) => {
                let compressed = self.plain_len()?;
                let len = self.plain_len()?;
                if len as u64 > max {
                    return Err(too_large(len as u64, max));
                }
                lzf::decompress(self.take(compressed)?, len).ok_or_else(bad_format)
            }
            Err(_) => Err(bad_format()),
        }
    }
}

fn too_large(len: u64, max: u64) -> Fail {
    Fail::new(format!("ERR the value is {len} bytes, above this server's limit of {max} bytes"))
}

/// `DUMP key`: nil if missing.
pub(crate) fn dump(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    match db.key_type(&a[1])? {
        "none" => Ok(Reply::Bulk(None)),
        "string" => Ok(Reply::Bulk(db.get(&a[1])?.map(|v| serialize(&v)))),
        other => Err(Fail::new(format!("ERR DUMP of a {other} value is not supported"))),
    }
}

/// The string in a RESTORE payload, after its version and checksum are
/// checked.
pub(crate) fn deserialize(payload: &[u8], max: u64) -> Result<Vec<u8>, Fail> {
    if payload.len() < 10 {
        return Err(bad_payload());
    }
    let (body, footer) = payload.split_at(payload.len() - 8);
    let version = u16::from_le_bytes([body[body.len() - 2], body[body.len() - 1]]);
    if version > RDB_VERSION {
        return Err(bad_payload());
    }
    if CRC.checksum(body).to_le_bytes() != footer {
        return Err(bad_payload());
    }
    let mut r = Reader { b: &body[..body.len() - 2] };
    match r.byte()? {
        TYPE_STRING => r.string(max),
        t if t <= TYPE_MAX && t != 8 => Err(Fail::new(format!(
            "ERR the payload holds RDB type {t}, not a string: bitsled stores strings, bitmaps and HyperLogLogs only"
        ))),
        _ => Err(bad_format()),
    }
}

/// `RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]`.
/// IDLETIME and FREQ are checked and ignored (access is not tracked).
pub(crate) fn restore(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let (mut replace, mut absttl, mut idle, mut freq) = (false, false, false, false);
    let mut j = 4;
    while j < a.len() {
        let more = j + 1 < a.len();
        if is(&a[j], "replace") {
            replace = true;
        } else if is(&a[j], "absttl") {
            absttl = true;
        } else if is(&a[j], "idletime") && more && !freq {
            if int(&a[j + 1])? < 0 {
                return Err(Fail::new("ERR Invalid IDLETIME value, must be >= 0"));
            }
            idle = true;
            j += 1;
        } else if is(&a[j], "freq") && more && !idle {
            if !(0..=255).contains(&int(&a[j + 1])?) {
                return Err(Fail::new("ERR Invalid FREQ value, must be >= 0 and <= 255"));
            }
            freq = true;
            j += 1;
        } else {
            return Err(Fail::new(ERR_SYNTAX));
        }
        j += 1;
    }
    if !replace && db.exists(&a[1])? {
        return Err(Fail::new("BUSYKEY Target key name already exists."));
    }
    let ttl = int(&a[2])?;
    if ttl < 0 {
        return Err(Fail::new("ERR Invalid TTL value, must be >= 0"));
    }
    let value = deserialize(&a[3], db.max_value_bytes())?;
    let now = i64::try_from(db.now_ms()).unwrap_or(i64::MAX);
    let at = match ttl {
        0 => None,
        t if absttl => Some(t),
        t => Some(t.saturating_add(now)),
    };
    if at.is_some_and(|at| at <= now) {
        // Already expired: the key is only deleted (with REPLACE).
        if replace {
            db.delete(&a[1])?;
        }
        return Ok(Reply::ok());
    }
    let expiry = at.map_or(SetExpiry::Clear, |at| SetExpiry::At(u64::try_from(at).unwrap_or(0)));
    let condition = if replace { SetCondition::Always } else { SetCondition::IfAbsent };
    if !db.set_with(&a[1], &value, SetOptions { condition, expiry, get: false })?.written {
        return Err(Fail::new("BUSYKEY Target key name already exists."));
    }
    super::notify::emit(super::notify::GENERIC, "restore", &a[1]);
    Ok(Reply::ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Payloads Redis 7.0.15 produced with `DUMP` (`SET a newv`; `SET n
    /// 100`; `SET n 70000`).
    #[test]
    fn payloads_match_redis() {
        assert_eq!(serialize(b"newv"), b"\x00\x04newv\n\x00#Y\x0b\xf7K\x0fip");
        for v in [&b"100"[..], b"70000", b"-1", b"", b"x".repeat(100).as_slice(), b"012", b"2147483648"] {
            assert_eq!(deserialize(&serialize(v), u64::MAX).unwrap(), v);
        }
        assert_eq!(serialize(b"100")[1], 0xC0);
        assert_eq!(serialize(b"1000")[1], 0xC1);
        assert_eq!(serialize(b"70000")[1], 0xC2);
        // A transfer's payload: dense noise goes raw, a sparse value is
        // compressed; both read back.
        let noise = lzf::noise(200_000);
        let mut sparse = vec![0u8; 200_000];
        sparse[150_000] = 1;
        for v in [&noise, &sparse] {
            assert_eq!(deserialize(&serialize_for_transfer(v), u64::MAX).unwrap(), *v);
        }
        assert!(serialize_for_transfer(&noise).len() > noise.len(), "raw");
        assert!(serialize_for_transfer(&sparse).len() < sparse.len() / 50, "compressed");
        assert_eq!(serialize(b"012")[1], 3, "not canonical: verbatim");
    }

    #[test]
    fn damaged_payloads_are_refused() {
        let good = serialize(b"hello");
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x10;
            assert!(deserialize(&bad, u64::MAX).is_err(), "byte {i}");
        }
        for n in 0..good.len() {
            assert!(deserialize(&good[..n], u64::MAX).is_err(), "truncated to {n}");
        }
    }

    #[test]
    fn lzf_references_may_overlap() {
        // "a" then a reference of length 5 + 2 = 7 at distance 1: "a" * 8.
        assert_eq!(lzf::decompress(&[0, b'a', 5 << 5, 0], 8).unwrap(), b"aaaaaaaa");
        assert_eq!(lzf::decompress(&[0, b'a', 5 << 5, 0], 7), None);
        assert_eq!(lzf::decompress(&[5 << 5, 0], 7), None, "a reference before the start");
        assert_eq!(lzf::decompress(&[3, b'a'], 4), None, "a cut literal run");
    }
}
