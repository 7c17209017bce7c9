//! Redis Cluster's key slots: CRC16 (the XMODEM variant: polynomial
//! 0x1021, initial value 0, no reflection) of the key, or of its hash tag,
//! modulo 16384.
//!
//! The engine orders a store's keys by slot (the top bits of its key hash
//! are the slot, DESIGN.md section 3), so the keys of one slot are found
//! without a scan of the others ([`crate::Db::scan_slot`]); the server's
//! cluster mode routes commands by the same function.

/// Slots in a cluster.
pub const SLOTS: u16 = 16384;

/// The CRC16 lookup tables, built at compile time from the polynomial:
/// `TABLES[0][x]` is the CRC of byte `x`, `TABLES[k][x]` that of byte `x`
/// followed by `k` zero bytes. Eight bytes then cost eight independent
/// lookups instead of a chain of eight (every key's hash computes a slot,
/// DESIGN.md section 3, "The key hash").
const TABLES: [[u16; 256]; 8] = {
    let mut t = [[0u16; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut crc = (i as u16) << 8;
        let mut bit = 0;
        while bit < 8 {
            crc = if crc & 0x8000 != 0 { (crc << 1) ^ 0x1021 } else { crc << 1 };
            bit += 1;
        }
        t[0][i] = crc;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = (prev << 8) ^ t[0][(prev >> 8) as usize];
            i += 1;
        }
        k += 1;
    }
    t
};

/// CRC16/XMODEM of `bytes`, a byte at a time.
fn crc16_bytewise(crc: u16, bytes: &[u8]) -> u16 {
    bytes.iter().fold(crc, |crc, &b| (crc << 8) ^ TABLES[0][usize::from((crc >> 8) as u8 ^ b)])
}

/// CRC16/XMODEM of `bytes`.
#[must_use]
pub fn crc16(bytes: &[u8]) -> u16 {
    let mut chunks = bytes.chunks_exact(8);
    let mut crc = 0u16;
    for c in &mut chunks {
        let [hi, lo] = crc.to_be_bytes();
        let t = |k: usize, b: u8| TABLES[k][usize::from(b)];
        crc = t(7, c[0] ^ hi)
            ^ t(6, c[1] ^ lo)
            ^ t(5, c[2])
            ^ t(4, c[3])
            ^ t(3, c[4])
            ^ t(2, c[5])
            ^ t(1, c[6])
            ^ t(0, c[7]);
    }
    crc16_bytewise(crc, chunks.remainder())
}

/// The part of `key` that is hashed: the bytes between its first `{` and
/// the first `}` after it when there are any, else the whole key (so
/// `{user1}:a` and `{user1}:b` share a slot, and `{}x` hashes whole).
#[must_use]
pub fn hash_tag(key: &[u8]) -> &[u8] {
    let Some(open) = key.iter().position(|&b| b == b'{') else { return key };
    let rest = &key[open + 1..];
    match rest.iter().position(|&b| b == b'}') {
        Some(0) | None => key,
        Some(close) => &rest[..close],
    }
}

/// The slot of `key`.
#[must_use]
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) & (SLOTS - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invariant: the eight-byte step gives the byte-at-a-time CRC for
    /// every length and content (lengths 0 to 40 cover every remainder,
    /// several whole steps, and the CRC carried between them).
    #[test]
    fn eight_bytes_at_a_time_is_the_bytewise_crc() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for len in 0..=40 {
            for _ in 0..200 {
                let bytes: Vec<u8> = (0..len)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x.to_le_bytes()[0]
                    })
                    .collect();
                assert_eq!(crc16(&bytes), crc16_bytewise(0, &bytes), "{bytes:?}");
            }
        }
    }

    #[test]
    fn crc16_matches_the_xmodem_check_value() {
        // The standard check value of CRC-16/XMODEM, which Redis's
        // cluster specification also quotes.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(crc16(b""), 0);
    }

    #[test]
    fn slots_are_redis_s() {
        // Values CLUSTER KEYSLOT gives on Redis 7.
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"a"), 15495);
        assert_eq!(key_slot(b"123456789"), 12739);
        assert_eq!(key_slot(b"{user1000}.following"), 3443);
        assert_eq!(key_slot(b"{}foo"), 9500);
        assert_eq!(key_slot(b"foo{}{bar}"), 8363);
        assert_eq!(key_slot(b"foo{{bar}}zap"), 4015);
        assert_eq!(key_slot(b"foo{bar}{zap}"), 5061);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"{user1000}.followers"));
    }

    #[test]
    fn hash_tags_follow_the_first_braces() {
        assert_eq!(hash_tag(b"{a}b"), b"a");
        assert_eq!(hash_tag(b"x{a}{b}"), b"a");
        assert_eq!(hash_tag(b"{}a"), b"{}a", "an empty tag hashes the whole key");
        assert_eq!(hash_tag(b"{{a}}"), b"{a", "the first closing brace after the first opening one");
        assert_eq!(hash_tag(b"a{b"), b"a{b", "no closing brace");
        assert_eq!(hash_tag(b"a}b{"), b"a}b{");
    }
}
