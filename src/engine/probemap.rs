//! A shard's map of cached metadata buckets, keyed by (keyspace, first
//! hash): open addressing with linear probing over a power-of-two array of
//! one-cache-line entries, at most half full.
//!
//! Unlike the standard map, where a key's entry lies is a function of the
//! key alone and the array's address and size ([`ProbeMap::layout`],
//! [`Layout::home`]): a prefetch hint can ask for the entry's cache line
//! before the lookup, with no read of the map (see `metas.rs`,
//! [`super::metas::MetaCache::prefetch_index`]). On an index larger than
//! the CPU's caches the entry's line is a wait for main memory on every
//! lookup, the first of a chain.

use std::sync::atomic::{AtomicUsize, Ordering};

/// A map key: (keyspace, a bucket's first hash).
pub(super) type Key = (u32, u32);

/// One entry, aligned to a cache line so that a lookup that finds its key
/// at home reads one line.
#[repr(align(64))]
struct Entry<V>(Option<(Key, V)>);

/// The map.
pub(super) struct ProbeMap<V> {
    entries: Vec<Entry<V>>,
    len: usize,
}

impl<V> Default for ProbeMap<V> {
    fn default() -> Self {
        ProbeMap { entries: Vec::new(), len: 0 }
    }
}

/// Entries of the smallest array.
const MIN_ENTRIES: usize = 16;

/// The hash of a key: its 64 bits, finished with a full avalanche (a
/// bucket's first hash ends in as many zero bits as its depth leaves, so
/// its low bits alone would collide).
fn hash((ks, start): Key) -> u64 {
    // MurmurHash3's 64-bit finaliser.
    let mut x = (u64::from(ks) << 32) | u64::from(start);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// The index where `key`'s probe starts in an array of `entries` (a power
/// of two): the hash's low bits.
fn home_index(key: Key, entries: usize) -> usize {
    let mask = u64::try_from(entries.wrapping_sub(1)).unwrap_or(u64::MAX);
    usize::try_from(hash(key) & mask).unwrap_or(0)
}

impl<V> ProbeMap<V> {
    /// The index where `key`'s probe starts.
    fn home(&self, key: Key) -> usize {
        home_index(key, self.entries.len())
    }

    /// The index of `key`'s entry, if it has one.
    fn find(&self, key: Key) -> Option<usize> {
        if self.entries.is_empty() {
            return None;
        }
        let mask = self.entries.len() - 1;
        let mut i = self.home(key);
        loop {
            match &self.entries[i].0 {
                None => return None,
                Some((k, _)) if *k == key => return Some(i),
                Some(_) => i = (i + 1) & mask,
            }
        }
    }

    pub(super) fn get(&self, key: &Key) -> Option<&V> {
        let i = self.find(*key)?;
        self.entries[i].0.as_ref().map(|(_, v)| v)
    }

    pub(super) fn get_mut(&mut self, key: &Key) -> Option<&mut V> {
        let i = self.find(*key)?;
        self.entries[i].0.as_mut().map(|(_, v)| v)
    }

    /// Sets `key`'s value to `value`; the value it replaces, if any.
    pub(super) fn insert(&mut self, key: Key, value: V) -> Option<V> {
        if let Some(i) = self.find(key) {
            return self.entries[i].0.replace((key, value)).map(|(_, v)| v);
        }
        if (self.len + 1) * 2 > self.entries.len() {
            self.resize((self.entries.len() * 2).max(MIN_ENTRIES));
        }
        self.place(key, value);
        self.len += 1;
        None
    }

    /// Puts an entry known to be absent in the first free place of its
    /// probe (there is one: the array is at most half full).
    fn place(&mut self, key: Key, value: V) {
        let mask = self.entries.len() - 1;
        let mut i = self.home(key);
        while self.entries[i].0.is_some() {
            i = (i + 1) & mask;
        }
        self.entries[i].0 = Some((key, value));
    }

    /// A new array of `entries` entries holding the same entries.
    fn resize(&mut self, entries: usize) {
        let old = std::mem::replace(&mut self.entries, (0..entries).map(|_| Entry(None)).collect());
        for (k, v) in old.into_iter().filter_map(|e| e.0) {
            self.place(k, v);
        }
    }

    /// Takes `key`'s entry out; its value, if it had one.
    ///
    /// The entries after it in its run move back where their probes allow,
    /// so every entry stays reachable from its home without a run of
    /// empty places between (no tombstones).
    pub(super) fn remove(&mut self, key: &Key) -> Option<V> {
        let mut hole = self.find(*key)?;
        let (_, value) = self.entries[hole].0.take()?;
        self.len -= 1;
        let mask = self.entries.len() - 1;
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let Some((k, _)) = &self.entries[j].0 else { break };
            let home = self.home(*k);
            // The entry at `j` may fill the hole unless its home lies
            // cyclically in (hole, j]: then its probe never passes the hole.
            let stays = if hole <= j { hole < home && home <= j } else { hole < home || home <= j };
            if !stays {
                self.entries[hole].0 = self.entries[j].0.take();
                hole = j;
            }
        }
        Some(value)
    }

    /// Keeps the entries for which `keep` is true.
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&Key, &mut V) -> bool) {
        let before = self.len;
        let mut kept = Vec::with_capacity(self.len);
        for e in &mut self.entries {
            if let Some((k, mut v)) = e.0.take() {
                if keep(&k, &mut v) {
                    kept.push((k, v));
                }
            }
        }
        self.len = kept.len();
        if self.len < before / 2 && self.entries.len() > MIN_ENTRIES {
            // Half gone: a smaller array (still at most a quarter full).
            let fit = (self.len * 4).next_power_of_two().max(MIN_ENTRIES);
            if fit < self.entries.len() {
                self.entries = (0..fit).map(|_| Entry(None)).collect();
            }
        }
        for (k, v) in kept {
            self.place(k, v);
        }
    }

    pub(super) fn keys(&self) -> impl Iterator<Item = &Key> {
        self.entries.iter().filter_map(|e| e.0.as_ref().map(|(k, _)| k))
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &V> {
        self.entries.iter().filter_map(|e| e.0.as_ref().map(|(_, v)| v))
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (&Key, &mut V)> {
        self.entries.iter_mut().filter_map(|e| e.0.as_mut().map(|(k, v)| (&*k, v)))
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// Where the array is and its size, for [`Layout::publish`].
    pub(super) fn layout(&self) -> (usize, usize) {
        (self.entries.as_ptr() as usize, self.entries.len())
    }
}

/// The bytes of an entry holding a `V`: one cache line while the key, the
/// value and the entry's empty mark fit in 64 bytes.
pub(super) const fn entry_size<V>() -> usize {
    std::mem::size_of::<Entry<V>>()
}

/// A map's [`ProbeMap::layout`] as a prefetch reads it without the map's
/// lock: the two figures are set one after the other, so a reader may see
/// one from before a resize and one from after; the address it then
/// computes is only a wasted hint.
#[derive(Default)]
pub(super) struct Layout {
    base: AtomicUsize,
    entries: AtomicUsize,
}

impl Layout {
    /// Records `map`'s layout (a store only where a figure moved).
    pub(super) fn publish<V>(&self, map: &ProbeMap<V>) {
        let (base, entries) = map.layout();
        if self.base.load(Ordering::Relaxed) != base {
            self.base.store(base, Ordering::Relaxed);
        }
        if self.entries.load(Ordering::Relaxed) != entries {
            self.entries.store(entries, Ordering::Relaxed);
        }
    }

    /// The address of `key`'s home entry in the map of `V` last
    /// published (0 if it has no array): never read, only hinted.
    pub(super) fn home<V>(&self, key: Key) -> usize {
        let entries = self.entries.load(Ordering::Relaxed);
        if entries == 0 {
            return 0;
        }
        let i = home_index(key, entries);
        self.base.load(Ordering::Relaxed).wrapping_add(i * entry_size::<V>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Invariant: under any sequence of inserts, removals and retains the
    /// map holds exactly what a standard map holds (removal's back-shift
    /// leaves every entry reachable), keys that collide included.
    #[test]
    fn matches_a_standard_map_under_churn() {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut ours: ProbeMap<u64> = ProbeMap::default();
        let mut model: HashMap<Key, u64> = HashMap::new();
        for step in 0..40_000u64 {
            let r = next();
            // Few keyspaces and few starts: many repeats and collisions.
            let key = ((r % 3) as u32, (((r >> 8) % 500) as u32) << 20);
            match r >> 60 {
                0..=8 => assert_eq!(ours.insert(key, step), model.insert(key, step)),
                9..=14 => assert_eq!(ours.remove(&key), model.remove(&key)),
                _ => {
                    let cut = (r >> 20) % 7;
                    ours.retain(|_, v| *v % 7 != cut);
                    model.retain(|_, v| *v % 7 != cut);
                }
            }
            assert_eq!(ours.len(), model.len());
            if step % 1000 == 0 {
                for (k, v) in &model {
                    assert_eq!(ours.get(k), Some(v), "{k:?}");
                }
                let mut keys: Vec<Key> = ours.keys().copied().collect();
                keys.sort_unstable();
                let mut want: Vec<Key> = model.keys().copied().collect();
                want.sort_unstable();
                assert_eq!(keys, want);
            }
        }
        for (k, v) in ours.iter_mut() {
            assert_eq!(model.get(k), Some(&*v));
        }
    }

    /// Invariant: a published layout names the entry a lookup of the key
    /// reads first, and entries are one cache line each.
    #[test]
    fn the_published_home_is_the_lookups_first_entry() {
        // A value with a niche (as an `Arc`) and 48 more bytes fills a line.
        assert_eq!(entry_size::<(Box<u8>, [u8; 48])>(), 64);
        let mut map: ProbeMap<u8> = ProbeMap::default();
        let layout = Layout::default();
        assert_eq!(layout.home::<u8>((0, 0)), 0);
        for s in 0..100u32 {
            map.insert((0, s << 20), 0);
        }
        layout.publish(&map);
        for s in 0..100u32 {
            let key = (0, s << 20);
            let at = map.entries.as_ptr() as usize + map.home(key) * entry_size::<u8>();
            assert_eq!(layout.home::<u8>(key), at);
        }
    }
}
