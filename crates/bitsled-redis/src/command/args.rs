//! Argument parsing with Redis's rules and error texts.

use super::Fail;

pub(crate) const ERR_SYNTAX: &str = "ERR syntax error";
pub(crate) const ERR_INT: &str = "ERR value is not an integer or out of range";
pub(crate) const ERR_OFFSET: &str = "ERR bit offset is not an integer or out of range";

/// Redis's largest string: 512 MiB (`proto-max-bulk-len`).
pub(crate) const MAX_STRING_BYTES: u64 = 512 << 20;

/// Redis's `string2ll` (see [`bitsled::parse_integer`]).
pub(crate) fn parse_i64(s: &[u8]) -> Option<i64> {
    bitsled::parse_integer(s)
}

/// An integer argument, or Redis's "value is not an integer" error.
pub(crate) fn int(s: &[u8]) -> Result<i64, Fail> {
    parse_i64(s).ok_or_else(|| Fail::new(ERR_INT))
}

/// A bit offset for SETBIT/GETBIT/BITFIELD: below 2^32 (512 MiB strings).
/// With `width = Some(w)`, a `#N` offset means `N * w` (BITFIELD).
pub(crate) fn bit_offset(s: &[u8], width: Option<u32>) -> Result<u64, Fail> {
    let err = || Fail::new(ERR_OFFSET);
    let (hash, digits) = match (width, s) {
        (Some(_), [b'#', rest @ ..]) if !rest.is_empty() => (true, rest),
        _ => (false, s),
    };
    let mut n = parse_i64(digits).ok_or_else(err)?;
    if hash {
        n = n.checked_mul(i64::from(width.unwrap_or(1))).ok_or_else(err)?;
    }
    let n = u64::try_from(n).map_err(|_| err())?;
    if n >> 3 >= MAX_STRING_BYTES {
        return Err(err());
    }
    Ok(n)
}

/// A database index or other `int` argument (Redis's
/// `getIntFromObjectOrReply`): an integer, then within 32 bits; `range_err`
/// replaces the out-of-range text when given.
pub(crate) fn int32(s: &[u8], range_err: Option<&str>) -> Result<i64, Fail> {
    let n = int(s)?;
    if i32::try_from(n).is_err() {
        return Err(Fail::new(
            range_err.unwrap_or("ERR value is out of range, value must between -2147483648 and 2147483647"),
        ));
    }
    Ok(n)
}

/// Whether argument `s` is `word`, ignoring ASCII case.
pub(crate) fn is(s: &[u8], word: &str) -> bool {
    s.eq_ignore_ascii_case(word.as_bytes())
}

/// Keys of a multi-key command as slices.
pub(crate) fn slices(args: &[Vec<u8>]) -> Vec<&[u8]> {
    args.iter().map(Vec::as_slice).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `string2ll`'s acceptance rules.
    #[test]
    fn integers_like_string2ll() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-1"), Some(-1));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [&b""[..], b"-", b"01", b"-0", b"+1", b" 1", b"1 ", b"1.0", b"9223372036854775808", b"1e3"] {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(parse_i64(b"-9223372036854775809"), None);
    }

    /// Offsets stop below 2^32; `#N` multiplies by the width (BITFIELD only).
    #[test]
    fn bit_offsets() {
        assert_eq!(bit_offset(b"4294967295", None).unwrap(), 4_294_967_295);
        assert!(bit_offset(b"4294967296", None).is_err());
        assert!(bit_offset(b"-1", None).is_err());
        assert!(bit_offset(b"#2", None).is_err());
        assert_eq!(bit_offset(b"#2", Some(8)).unwrap(), 16);
        assert!(bit_offset(b"#", Some(8)).is_err());
        assert!(bit_offset(b"#9223372036854775807", Some(8)).is_err());
    }
}
