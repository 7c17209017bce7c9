//! A fast hasher for the engine's integer-keyed maps and shard choice.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// FxHash-style multiply-rotate hashing: fast on integers, not meant to
/// resist chosen keys (shard choice only spreads load).
#[derive(Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// A `HashMap` with [`IdHasher`].
pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// A `HashSet` with [`IdHasher`] (a Bloom filter's bit offsets to set).
pub(crate) type FastSet<K> = HashSet<K, BuildHasherDefault<IdHasher>>;
