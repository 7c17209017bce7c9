//! MurmurHash64A, the 64-bit MurmurHash2 variant Redis hashes HyperLogLog
//! elements with and RedisBloom hashes Bloom filter items with (in its
//! endian-neutral form: 8-byte blocks are read little-endian on every host).

/// The multiplier of MurmurHash64A (RedisBloom also seeds its first item
/// hash with it).
pub(crate) const M: u64 = 0xc6a4_a793_5bd1_e995;
/// The shift of MurmurHash64A.
const R: u32 = 47;

/// MurmurHash64A of `data` with `seed`.
///
/// Redis passes the length as a C `int`; elements longer than 2 GiB cannot
/// reach a Redis server, so the length is taken as the full `u64` here.
pub(crate) fn murmur64a(data: &[u8], seed: u64) -> u64 {
    let mut h = seed ^ (data.len() as u64).wrapping_mul(M);
    let mut blocks = data.chunks_exact(8);
    for block in &mut blocks {
        let mut w = [0u8; 8];
        w.copy_from_slice(block);
        let mut k = u64::from_le_bytes(w);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = blocks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every tail length (0..8 bytes after the 8-byte blocks) takes its
    /// own path and gives its own hash. (The hashes themselves are checked
    /// against Redis through the golden bytes in `tests/hll.rs`, whose
    /// elements cover lengths 0, 1, 7, 8 and 9.)
    #[test]
    fn tail_lengths_hash_differently_and_stably() {
        let data = b"0123456789abcdef";
        let hashes: Vec<u64> = (0..=16).map(|n| murmur64a(&data[..n], 0xadc8_3b19)).collect();
        for (i, a) in hashes.iter().enumerate() {
            for b in &hashes[i + 1..] {
                assert_ne!(a, b, "distinct prefixes collided");
            }
        }
        // Same input, same seed: same hash; another seed: another hash.
        assert_eq!(murmur64a(b"hello", 1), murmur64a(b"hello", 1));
        assert_ne!(murmur64a(b"hello", 1), murmur64a(b"hello", 2));
    }
}
