//! The values settings take as Redis writes them: memory sizes and
//! `maxmemory-policy` names. CONFIG SET checks them here; the server and
//! `bitsled serve`'s configuration file read them from here.

/// Redis's `maxmemory-policy` names, in Redis's order. bitsled keeps every
/// key on disk, so no policy ever deletes a key to make room: under each,
/// memory is made by writing changes back and evicting cached pages and
/// metadata, and when that is not enough writes are refused (`-OOM`), as
/// Redis refuses them when its eviction cannot reach the limit. The
/// policy is kept and reported for clients and tools that set it.
pub const POLICIES: &[&str] = &[
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
];

/// A memory size as Redis writes them: digits and an optional unit, `b`,
/// `k` (1000), `kb` (1024), `m`, `mb`, `g`, `gb`, in any case.
///
/// # Errors
/// A text naming what is wrong: no digits, a sign, an unknown unit, or a
/// size past `u64`.
pub fn parse_memory(s: &str) -> Result<u64, String> {
    let lower = s.to_ascii_lowercase();
    let split = lower.find(|c: char| !c.is_ascii_digit()).unwrap_or(lower.len());
    let (num, unit) = lower.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("{s:?} is not a size (e.g. 256mb)"))?;
    let mult: u64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1 << 10,
        "m" => 1_000_000,
        "mb" => 1 << 20,
        "g" => 1_000_000_000,
        "gb" => 1 << 30,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (k, kb, m, mb, g, gb)")),
    };
    n.checked_mul(mult).ok_or_else(|| format!("{s:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invariant: sizes parse as Redis reads them; anything else is an
    /// error, never a wrong number.
    #[test]
    fn memory_sizes_parse_as_redis_reads_them() {
        assert_eq!(parse_memory("256mb"), Ok(256 << 20));
        assert_eq!(parse_memory("1GB"), Ok(1 << 30));
        assert_eq!(parse_memory("1k"), Ok(1000));
        assert_eq!(parse_memory("100"), Ok(100));
        assert_eq!(parse_memory("7b"), Ok(7));
        for bad in ["", "-1", "1x", "mb", "1.5mb", "99999999999999999999", "18446744073709551615gb"] {
            assert!(parse_memory(bad).is_err(), "{bad:?}");
        }
    }
}
