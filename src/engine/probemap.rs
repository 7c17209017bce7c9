//! A shard's map of cached metadata buckets, keyed by (keyspace, first
//! hash): open addressing with linear probing over a power-of-two array,
//! at most half full, its keys (8 bytes each, eight to a cache line) apart
//! from its values (one cache line each).
//!
//! Unlike the standard map, where a key's entry lies is a function of the
//! key alone and the arrays' addresses and size ([`Layout`]): a prefetch
//! hint can ask for the entry's two cache lines before the lookup, with no
//! read of the map (see `metas.rs`, `MetaCache::prefetch_index`). On an
//! index larger than the CPU's caches those lines are a wait for main
//! memory on every lookup, the first of a chain. A probe that finds no
//! key (a lookup tries the depths a bucket may have) reads only keys.

use std::sync::atomic::{AtomicUsize, Ordering};

/// A map key: (keyspace, a bucket's first hash).
pub(super) type Key = (u32, u32);

/// A key as the key array holds it.
fn pack((ks, start): Key) -> u64 {
    (u64::from(ks) << 32) | u64::from(start)
}

fn unpack(k: u64) -> Key {
    // The halves of a u64 fit in u32s.
    (u32::try_from(k >> 32).unwrap_or(u32::MAX), u32::try_from(k & 0xFFFF_FFFF).unwrap_or(u32::MAX))
}

/// The key array's mark of an empty place. The one key that packs to it
/// (keyspace and first hash both `u32::MAX`) is kept aside
/// ([`ProbeMap::aside`]).
const EMPTY: u64 = u64::MAX;

/// A value, aligned to a cache line so that a lookup reads one line of
/// values.
#[repr(align(64))]
struct Line<V>(Option<V>);

/// The map.
pub(super) struct ProbeMap<V> {
    keys: Vec<u64>,
    values: Vec<Line<V>>,
    /// The value of the key that packs to [`EMPTY`].
    aside: Option<V>,
    /// Keys in the arrays (not counting `aside`).
    len: usize,
}

impl<V> Default for ProbeMap<V> {
    fn default() -> Self {
        ProbeMap { keys: Vec::new(), values: Vec::new(), aside: None, len: 0 }
    }
}

/// Entries of the smallest arrays.
const MIN_ENTRIES: usize = 16;

/// The hash of a packed key: its 64 bits, finished with a full avalanche
/// (a bucket's first hash ends in as many zero bits as its depth leaves,
/// so its low bits alone would collide).
fn hash(k: u64) -> u64 {
    // MurmurHash3's 64-bit finaliser.
    let mut x = k;
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// The index where packed key `k`'s probe starts in arrays of `entries`
/// (a power of two): the hash's low bits.
fn home_index(k: u64, entries: usize) -> usize {
    let mask = u64::try_from(entries.wrapping_sub(1)).unwrap_or(u64::MAX);
    usize::try_from(hash(k) & mask).unwrap_or(0)
}

/// The size of arrays holding `len` entries after a removal or a sweep:
/// between a quarter and a half full.
fn fit(len: usize) -> usize {
    (len * 2 + 1).next_power_of_two().max(MIN_ENTRIES)
}

impl<V> ProbeMap<V> {
    /// The index of packed key `k`'s entry (not [`EMPTY`]), if it has one.
    fn find(&self, k: u64) -> Option<usize> {
        if self.keys.is_empty() {
            return None;
        }
        let mask = self.keys.len() - 1;
        let mut i = home_index(k, self.keys.len());
        loop {
            match self.keys[i] {
                EMPTY => return None,
                x if x == k => return Some(i),
                _ => i = (i + 1) & mask,
            }
        }
    }

    pub(super) fn get(&self, key: &Key) -> Option<&V> {
        match pack(*key) {
            EMPTY => self.aside.as_ref(),
            k => self.values[self.find(k)?].0.as_ref(),
        }
    }

    pub(super) fn get_mut(&mut self, key: &Key) -> Option<&mut V> {
        match pack(*key) {
            EMPTY => self.aside.as_mut(),
            k => {
                let i = self.find(k)?;
                self.values[i].0.as_mut()
            }
        }
    }

    /// Sets `key`'s value to `value`; the value it replaces, if any.
    pub(super) fn insert(&mut self, key: Key, value: V) -> Option<V> {
        let k = pack(key);
        if k == EMPTY {
            return self.aside.replace(value);
        }
        if let Some(i) = self.find(k) {
            return self.values[i].0.replace(value);
        }
        if (self.len + 1) * 2 > self.keys.len() {
            self.resize((self.keys.len() * 2).max(MIN_ENTRIES));
        }
        self.place(k, value);
        self.len += 1;
        None
    }

    /// Puts a packed key known to be absent in the first free place of
    /// its probe (there is one: the arrays are at most half full).
    fn place(&mut self, k: u64, value: V) {
        let mask = self.keys.len() - 1;
        let mut i = home_index(k, self.keys.len());
        while self.keys[i] != EMPTY {
            i = (i + 1) & mask;
        }
        self.keys[i] = k;
        self.values[i].0 = Some(value);
    }

    /// Empty arrays of `entries` entries; the entries they held.
    fn take_all(&mut self, entries: usize) -> Vec<(u64, V)> {
        let keys = std::mem::replace(&mut self.keys, vec![EMPTY; entries]);
        let values = std::mem::replace(&mut self.values, (0..entries).map(|_| Line(None)).collect());
        keys.into_iter().zip(values).filter(|(k, _)| *k != EMPTY).filter_map(|(k, v)| Some((k, v.0?))).collect()
    }

    /// New arrays of `entries` entries holding the same entries.
    fn resize(&mut self, entries: usize) {
        for (k, v) in self.take_all(entries) {
            self.place(k, v);
        }
    }

    /// Takes `key`'s entry out; its value, if it had one.
    ///
    /// The entries after it in its run move back where their probes allow,
    /// so every entry stays reachable from its home without a run of
    /// empty places between (no tombstones).
    pub(super) fn remove(&mut self, key: &Key) -> Option<V> {
        let k = pack(*key);
        if k == EMPTY {
            return self.aside.take();
        }
        let mut hole = self.find(k)?;
        let value = self.values[hole].0.take();
        self.keys[hole] = EMPTY;
        self.len -= 1;
        let mask = self.keys.len() - 1;
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let kj = self.keys[j];
            if kj == EMPTY {
                break;
            }
            let home = home_index(kj, self.keys.len());
            // The entry at `j` may fill the hole unless its home lies
            // cyclically in (hole, j]: then its probe never passes the hole.
            let stays = if hole <= j { hole < home && home <= j } else { hole < home || home <= j };
            if !stays {
                self.keys[hole] = kj;
                self.keys[j] = EMPTY;
                self.values[hole].0 = self.values[j].0.take();
                hole = j;
            }
        }
        if self.len * 8 < self.keys.len() && self.keys.len() > MIN_ENTRIES {
            // Mostly empty: smaller arrays.
            self.resize(fit(self.len));
        }
        value
    }

    /// Keeps the entries for which `keep` is true (asked once each).
    ///
    /// The verdicts are taken in place; only if some entry goes are the
    /// arrays rebuilt, sized for what stays (see [`fit`]).
    pub(super) fn retain(&mut self, mut keep: impl FnMut(&Key, &mut V) -> bool) {
        if let Some(v) = self.aside.as_mut() {
            if !keep(&unpack(EMPTY), v) {
                self.aside = None;
            }
        }
        let mut gone = 0;
        for (k, line) in self.keys.iter().zip(&mut self.values) {
            if *k == EMPTY {
                continue;
            }
            if let Some(v) = line.0.as_mut() {
                if !keep(&unpack(*k), v) {
                    // Its key goes with the rebuild below.
                    line.0 = None;
                    gone += 1;
                }
            }
        }
        if gone == 0 {
            return;
        }
        self.len -= gone;
        for (k, v) in self.take_all(fit(self.len)) {
            self.place(k, v);
        }
    }

    pub(super) fn keys(&self) -> impl Iterator<Item = Key> + '_ {
        let aside = self.aside.as_ref().map(|_| unpack(EMPTY));
        self.keys.iter().filter(|&&k| k != EMPTY).map(|&k| unpack(k)).chain(aside)
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &V> {
        self.values.iter().filter_map(|l| l.0.as_ref()).chain(self.aside.as_ref())
    }

    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = (Key, &mut V)> {
        let keys = &self.keys;
        let aside = self.aside.as_mut().map(|v| (unpack(EMPTY), v));
        self.values.iter_mut().enumerate().filter_map(move |(i, l)| Some((unpack(keys[i]), l.0.as_mut()?))).chain(aside)
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.len + usize::from(self.aside.is_some())
    }
}

/// The bytes of a value's place: one cache line while the value and its
/// empty mark fit in 64 bytes.
pub(super) const fn line_size<V>() -> usize {
    std::mem::size_of::<Line<V>>()
}

/// A map's arrays as a prefetch reads them without the map's lock: the
/// figures are set one after the other, so a reader may see some from
/// before a resize and some from after; the addresses it then computes
/// are only wasted hints.
#[derive(Default)]
pub(super) struct Layout {
    keys: AtomicUsize,
    values: AtomicUsize,
    entries: AtomicUsize,
}

impl Layout {
    /// Records `map`'s arrays (a store only where a figure moved).
    pub(super) fn publish<V>(&self, map: &ProbeMap<V>) {
        let set = |at: &AtomicUsize, to: usize| {
            if at.load(Ordering::Relaxed) != to {
                at.store(to, Ordering::Relaxed);
            }
        };
        set(&self.keys, map.keys.as_ptr() as usize);
        set(&self.values, map.values.as_ptr() as usize);
        set(&self.entries, map.keys.len());
    }

    /// The addresses of `key`'s home key and home value in the map of `V`
    /// last published (none if it has no arrays): never read, only
    /// hinted.
    pub(super) fn home<V>(&self, key: Key) -> Option<[usize; 2]> {
        let entries = self.entries.load(Ordering::Relaxed);
        if entries == 0 {
            return None;
        }
        let i = home_index(pack(key), entries);
        Some([
            self.keys.load(Ordering::Relaxed).wrapping_add(i * 8),
            self.values.load(Ordering::Relaxed).wrapping_add(i * line_size::<V>()),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Invariant: under any sequence of inserts, removals and retains the
    /// map holds exactly what a standard map holds (removal's back-shift
    /// leaves every entry reachable), keys that collide and the key kept
    /// aside included.
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
            // Few keyspaces and few starts: many repeats and collisions;
            // now and then the key that packs to the empty mark.
            let key =
                if r % 97 == 0 { (u32::MAX, u32::MAX) } else { ((r % 3) as u32, (((r >> 8) % 500) as u32) << 20) };
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
                let mut keys: Vec<Key> = ours.keys().collect();
                keys.sort_unstable();
                let mut want: Vec<Key> = model.keys().copied().collect();
                want.sort_unstable();
                assert_eq!(keys, want);
                assert_eq!(ours.values().count(), model.len());
            }
        }
        let mut seen = 0;
        for (k, v) in ours.iter_mut() {
            assert_eq!(model.get(&k), Some(&*v));
            seen += 1;
        }
        assert_eq!(seen, model.len());
    }

    /// Invariant: a sweep asks about each entry once, and arrays shrink
    /// with what they hold (after a sweep or removals they are at least an
    /// eighth full), keeping every entry.
    #[test]
    fn sweeps_and_removals_shrink_the_arrays() {
        let mut map: ProbeMap<u32> = ProbeMap::default();
        for s in 0..10_000u32 {
            map.insert((0, s), s);
        }
        let mut asked = 0;
        map.retain(|_, v| {
            asked += 1;
            *v % 1000 == 0
        });
        assert_eq!((asked, map.len()), (10_000, 10));
        assert!(map.keys.len() <= 32, "{} places for 10 entries", map.keys.len());
        for s in (0..10_000u32).step_by(1000) {
            assert_eq!(map.get(&(0, s)), Some(&s));
        }
        for s in 0..10_000u32 {
            map.insert((1, s), s);
        }
        for s in 0..9_990u32 {
            assert_eq!(map.remove(&(1, s)), Some(s));
        }
        assert!(map.keys.len() <= 8 * 20, "{} places for 20 entries", map.keys.len());
        assert_eq!(map.len(), 20);
        for s in 9_990..10_000u32 {
            assert_eq!(map.get(&(1, s)), Some(&s));
        }
    }

    /// Invariant: a published layout names the key and the value a lookup
    /// of the key reads first.
    #[test]
    fn the_published_home_is_the_lookups_first_entry() {
        // A value with a niche (as an `Arc`) and 48 more bytes fills a line.
        assert_eq!(line_size::<(Box<u8>, [u8; 48])>(), 64);
        let mut map: ProbeMap<u8> = ProbeMap::default();
        let layout = Layout::default();
        assert_eq!(layout.home::<u8>((0, 0)), None);
        for s in 0..100u32 {
            map.insert((0, s << 20), 0);
        }
        layout.publish(&map);
        for s in 0..100u32 {
            let key = (0, s << 20);
            let i = home_index(pack(key), map.keys.len());
            let want = [map.keys.as_ptr() as usize + i * 8, map.values.as_ptr() as usize + i * line_size::<u8>()];
            assert_eq!(layout.home::<u8>(key), Some(want));
        }
    }
}
