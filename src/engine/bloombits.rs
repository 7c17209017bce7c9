//! The Bloom bits a lock shard keeps for its next delta records: which
//! small Bloom filters changed since the last record by added items only,
//! the bits those items set and the item count now, so a record can say
//! those instead of the whole entry (DESIGN.md, section 7, "Small Bloom
//! filters").
//!
//! A shard logs what each change of a key means for its bits, in order,
//! and a write-back reads the log of the changes it captured. A note is an
//! append to the shard's log (no lookup, no allocation once the log has
//! room); the write-back sorts its log once by key and finds each changed
//! entry's events by binary search.

use smallvec::SmallVec;

/// What a change of one key means for its Bloom bits.
#[derive(Clone, Copy)]
pub(crate) enum BitsNote<'a> {
    /// Items were added to the key's small Bloom filter: it now counts
    /// `items` and gained the bits at `positions`. `was_clean`: its entry
    /// had no change waiting for a delta record before this one, so the
    /// store holds exactly what it was. The next delta record then says
    /// only the bits (and those of further additions before it), unless
    /// another change of the key comes first. An addition to an entry
    /// whose earlier change is not noted as bits leaves the whole entry to
    /// the record.
    Added { was_clean: bool, items: u64, positions: &'a [u64] },
    /// Any other change (or a removal): the next delta record holds the
    /// whole entry (or the removal).
    Other,
    /// Another change of a key that had no entry, or no change waiting for
    /// a delta record: it has no bits to forget, and nothing is logged
    /// (a write to a clean key costs the log nothing).
    OtherOfClean,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum What {
    /// Bits from a clean entry.
    Start,
    /// More bits for the same key.
    Extend,
    /// Another change: the key (or any key of its hash) has no bits.
    Forget,
}

/// One logged note.
struct Event {
    /// Keyspace and key hash ([`log_key`]).
    key: u64,
    what: What,
    name: SmallVec<[u8; 24]>,
    items: u64,
    /// A small filter's bits fit in `u32` positions.
    positions: SmallVec<[u32; 8]>,
}

/// The log key of keyspace `ks`'s key of hash `h`.
fn log_key(ks: u32, h: u32) -> u64 {
    u64::from(ks) << 32 | u64::from(h)
}

/// Events a log keeps room for across write-backs; a busier shard grows
/// its log again (one allocation per doubling, per shard).
const KEPT: usize = 256;

/// A shard's logs: the changes since the last write-back's cut, and those
/// of the write-back draining the shard.
#[derive(Default)]
pub(crate) struct ShardBits {
    log: Vec<Event>,
    draining: Vec<Event>,
    /// `draining` is sorted by key (stably: each key's events in order).
    sorted: bool,
    /// Set by [`ShardBits::focus`]: the log keys `first ..= last` of one
    /// bucket and the events `lo .. hi` of `draining` that have them.
    window: Option<Window>,
}

/// The part of a sorted draining log that one bucket's keys can have.
#[derive(Clone, Copy)]
struct Window {
    first: u64,
    last: u64,
    lo: usize,
    hi: usize,
}

impl ShardBits {
    /// Logs `note` for key `name` (hash `h`) of keyspace `ks`.
    pub(crate) fn note(&mut self, ks: u32, h: u32, name: &[u8], note: BitsNote<'_>) {
        let key = log_key(ks, h);
        let event = match note {
            // Nothing logged since the cut: no bits to forget.
            BitsNote::OtherOfClean => return,
            BitsNote::Other if self.log.is_empty() => return,
            BitsNote::Other => {
                Event { key, what: What::Forget, name: SmallVec::new(), items: 0, positions: SmallVec::new() }
            }
            BitsNote::Added { was_clean, items, positions } => {
                let what = if was_clean { What::Start } else { What::Extend };
                // An addition to a changed entry with nothing logged since
                // the cut has no bits to extend.
                if what == What::Extend && self.log.is_empty() {
                    return;
                }
                match positions.iter().map(|&p| u32::try_from(p)).collect() {
                    Ok(positions) => Event { key, what, name: SmallVec::from_slice(name), items, positions },
                    // Not a small filter's positions: the whole entry goes.
                    Err(_) => {
                        Event { key, what: What::Forget, name: SmallVec::new(), items: 0, positions: SmallVec::new() }
                    }
                }
            }
        };
        self.log.push(event);
    }

    /// At a write-back's cut: the changes logged so far are the draining
    /// write-back's (`folded`: its shard is written whole, which needs
    /// none of them).
    pub(crate) fn cut(&mut self, folded: bool) {
        std::mem::swap(&mut self.log, &mut self.draining);
        keep_room(&mut self.log);
        self.sorted = false;
        self.window = None;
        if folded {
            keep_room(&mut self.draining);
        }
    }

    /// After a write-back drained the shard: its log is done with.
    pub(crate) fn drained(&mut self) {
        keep_room(&mut self.draining);
        self.window = None;
    }

    fn sort_draining(&mut self) {
        if !self.sorted {
            self.draining.sort_by_key(|e| e.key);
            self.sorted = true;
            self.window = None;
        }
    }

    /// Narrows the next [`ShardBits::drained_bits`] lookups of keyspace
    /// `ks`'s hashes `first ..= last` (one bucket's) to the draining
    /// events of those hashes; returns whether there are any (if not, no
    /// key of the bucket has bits).
    pub(crate) fn focus(&mut self, ks: u32, first: u32, last: u32) -> bool {
        self.sort_draining();
        let (first, last) = (log_key(ks, first), log_key(ks, last));
        let lo = self.draining.partition_point(|e| e.key < first);
        let hi = lo + self.draining[lo..].partition_point(|e| e.key <= last);
        self.window = Some(Window { first, last, lo, hi });
        lo < hi
    }

    /// Whether the draining write-back has any bits.
    pub(crate) fn draining_is_empty(&self) -> bool {
        self.draining.is_empty()
    }

    /// The draining write-back's bits of `name` (hash `h`) of keyspace
    /// `ks`: its item count and its positions, sorted and without repeats,
    /// into `positions`; `None` if its change is not bits only.
    pub(crate) fn drained_bits(&mut self, ks: u32, h: u32, name: &[u8], positions: &mut Vec<u64>) -> Option<u64> {
        self.sort_draining();
        let key = log_key(ks, h);
        // Within the focused bucket's events if the key is the bucket's
        // (a few events, where the whole log may hold millions).
        let (lo, hi) = match self.window {
            Some(w) if (w.first..=w.last).contains(&key) => (w.lo, w.hi),
            _ => (0, self.draining.len()),
        };
        let events = &self.draining[lo..hi];
        let first = events.partition_point(|e| e.key < key);
        let mut items = None;
        positions.clear();
        for e in events[first..].iter().take_while(|e| e.key == key) {
            match e.what {
                What::Forget => items = None,
                What::Start if e.name[..] == *name => {
                    positions.clear();
                    items = Some(e.items);
                }
                What::Extend if e.name[..] == *name && items.is_some() => items = Some(e.items),
                // Another name of the same hash.
                _ => continue,
            }
            if items.is_some() {
                positions.extend(e.positions.iter().map(|&p| u64::from(p)));
            }
        }
        if items.is_some() {
            positions.sort_unstable();
            positions.dedup();
        }
        items
    }
}

/// Empties `log`, keeping room for [`KEPT`] events at most.
fn keep_room(log: &mut Vec<Event>) {
    log.clear();
    if log.capacity() > KEPT {
        *log = Vec::with_capacity(KEPT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn added(was_clean: bool, items: u64, positions: &[u64]) -> BitsNote<'_> {
        BitsNote::Added { was_clean, items, positions }
    }

    fn bits(b: &mut ShardBits, h: u32, name: &[u8]) -> Option<(u64, Vec<u64>)> {
        let mut out = Vec::new();
        b.drained_bits(0, h, name, &mut out).map(|items| (items, out))
    }

    /// Invariant: a clean entry's addition starts its bits, later
    /// additions extend them (sorted, no repeats when read), an addition
    /// to an entry with no bits started adds none, any other change drops
    /// them (and those of any name of its hash), two names of one hash
    /// keep separate bits, and only what was logged before the cut is the
    /// draining write-back's.
    #[test]
    fn notes_start_extend_and_drop() {
        let mut b = ShardBits::default();
        b.note(0, 7, b"a", added(false, 3, &[1]));
        b.note(0, 7, b"a", added(true, 4, &[9, 2]));
        b.note(0, 7, b"b", added(true, 1, &[5]));
        b.note(0, 7, b"a", added(false, 5, &[2, 40]));
        b.note(0, 9, b"c", added(false, 2, &[3]));
        b.note(0, 11, b"d", added(true, 1, &[4]));
        b.note(0, 11, b"d", BitsNote::Other);
        b.note(0, 14, b"x", added(true, 1, &[4]));
        b.note(0, 14, b"y", BitsNote::Other);
        b.note(0, 15, b"z", added(true, 1, &[4]));
        b.note(0, 15, b"z", BitsNote::OtherOfClean);
        b.note(0, 12, b"e", added(true, 1, &[1 << 40]));
        b.note(1, 13, b"f", added(true, 1, &[6]));
        b.cut(false);
        b.note(0, 9, b"c", added(true, 3, &[8]));
        assert_eq!(bits(&mut b, 7, b"a"), Some((5, vec![2, 9, 40])));
        assert_eq!(bits(&mut b, 7, b"b"), Some((1, vec![5])));
        assert_eq!(bits(&mut b, 9, b"c"), None, "an addition to a changed entry starts nothing");
        assert_eq!(bits(&mut b, 11, b"d"), None, "another change drops the bits");
        assert_eq!(bits(&mut b, 14, b"x"), None, "a change of a name of the same hash drops them too");
        assert_eq!(bits(&mut b, 15, b"z"), Some((1, vec![4])), "a change of a clean key logs nothing");
        assert_eq!(bits(&mut b, 12, b"e"), None, "positions past 32 bits write the whole entry");
        assert_eq!(bits(&mut b, 13, b"f"), None, "keyspace 1's key is not keyspace 0's");
        assert_eq!(bits(&mut b, 8, b"a"), None, "found by hash and name");
        b.drained();
        b.cut(false);
        assert_eq!(bits(&mut b, 9, b"c"), Some((3, vec![8])), "logged after the first cut");
        b.note(0, 7, b"a", added(true, 6, &[1]));
        b.cut(true);
        assert!(b.draining_is_empty(), "a folded shard keeps no bits");
    }

    /// Invariant: a lookup focused on one bucket's hashes finds exactly
    /// what an unfocused one finds, for keys in and out of the focus, and
    /// the focus says whether the bucket has any events.
    #[test]
    fn focused_lookups_match_the_whole_log() {
        let logged = || {
            let mut b = ShardBits::default();
            for h in (0..4000u32).step_by(3) {
                b.note(0, h, format!("k{h}").as_bytes(), added(true, 1, &[u64::from(h) % 97]));
                b.note(1, h, format!("k{h}").as_bytes(), added(true, 2, &[u64::from(h) % 89]));
            }
            b.cut(false);
            b
        };
        let (mut b, mut whole) = (logged(), logged());
        assert!(!b.focus(0, 4000, 5000), "no events past the last hash");
        assert!(!b.focus(2, 0, 5000), "nor in another keyspace");
        for (ks, first, last) in [(0, 0, 255), (1, 256, 511), (0, 3000, 3999), (1, 1, 1), (0, 1, 1)] {
            assert_eq!(b.focus(ks, first, last), (first..=last).any(|h| h % 3 == 0), "{ks} {first}..={last}");
            for h in (first.saturating_sub(10)..=last + 10).chain([0, 3999]) {
                let name = format!("k{h}");
                let mut got = Vec::new();
                let mut want = Vec::new();
                assert_eq!(
                    (b.drained_bits(ks, h, name.as_bytes(), &mut got), got),
                    (whole.drained_bits(ks, h, name.as_bytes(), &mut want), want),
                    "keyspace {ks} hash {h} focused on {first}..={last}"
                );
            }
        }
    }
}
