//! Replication between bitsled stores: a master keeps a change feed of
//! the batches it applies to its store; a follower loads a snapshot of the
//! master's store and then applies the feed's frames, so its store holds
//! the master's records (DESIGN.md section 5, "Replication").
//!
//! The wire between them is the caller's (the server's `REPLICAOF`): this
//! module gives the frames as opaque, checksummed bytes and the offsets
//! that order them.
//!
//! ```
//! use std::time::Duration;
//! use bitsled::replication::SyncItem;
//! # fn main() -> bitsled::Result<()> {
//! let (a, b) = (tempfile::tempdir()?, tempfile::tempdir()?);
//! let master = bitsled::Db::open(a.path())?;
//! let replica = bitsled::Db::open(b.path())?;
//! let feed = master.start_feed(0, 1 << 20)?;
//! master.setbit(b"k", 7, true)?;
//!
//! // Full sync: the snapshot, its end, then the frames after its offset.
//! let mut snapshot = master.snapshot()?;
//! let start = snapshot.offset();
//! let mut items = Vec::new();
//! while let Some(chunk) = snapshot.next_chunk(64 << 10)? {
//!     items.push(SyncItem::Chunk(chunk));
//! }
//! items.push(SyncItem::End { consistent_at: feed.offset() });
//! for (end, frame) in feed.frames_after(start, Duration::ZERO).unwrap() {
//!     items.push(SyncItem::Frame { end, frame: frame.to_vec() });
//! }
//! replica.follow();
//! let mut items = items.into_iter();
//! let at = replica.load_from_master("id", start, &mut || Ok(items.next().expect("an item")))?;
//!
//! // Then the frames as the master's write-backs make them.
//! master.setbit(b"k", 9, true)?;
//! master.flush()?;
//! let frames = feed.frames_after(at, Duration::ZERO).unwrap();
//! let frames: Vec<(u64, &[u8])> = frames.iter().map(|(e, f)| (*e, &f[..])).collect();
//! replica.apply_frames("id", &frames)?;
//! assert_eq!(replica.bitcount(b"k", None)?, 2);
//! assert!(replica.setbit(b"k", 1, true).is_err());
//! # Ok(()) }
//! ```

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::engine::store::{Scan, Write};
use crate::error::{Error, Result};
use crate::le::{read_u32, read_u64};
use crate::Db;

/// The version byte that starts every frame.
const FRAME_VERSION: u8 = 1;

/// Frame header: version, the master's highest bitmap id, write count.
const FRAME_HEAD: usize = 1 + 8 + 4;

/// Encodes `writes` as a frame: `version u8 | ids_high u64 | n u32`, then
/// per write `op u8 (1 put, 0 remove) | key length u32 | key | [value
/// length u32 | value]`, then a CRC-32 of everything before it. All
/// integers little-endian.
pub(crate) fn encode_frame<'a>(ids_high: u64, writes: impl Iterator<Item = &'a Write>) -> Vec<u8> {
    let mut b = vec![FRAME_VERSION];
    b.extend_from_slice(&ids_high.to_le_bytes());
    b.extend_from_slice(&[0; 4]);
    let mut n: u32 = 0;
    for (k, v) in writes {
        n += 1;
        b.push(u8::from(v.is_some()));
        b.extend_from_slice(&len32(k.len()).to_le_bytes());
        b.extend_from_slice(k);
        if let Some(v) = v {
            b.extend_from_slice(&len32(v.len()).to_le_bytes());
            b.extend_from_slice(v);
        }
    }
    b[9..13].copy_from_slice(&n.to_le_bytes());
    let crc = crc32fast::hash(&b);
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

/// A length as the frame stores it (store keys and values are far below
/// 4 GiB).
fn len32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Decodes a frame: the master's highest bitmap id and the writes.
///
/// # Errors
/// [`Error::Corrupted`] for a frame that is cut, has a bad checksum or
/// version, or bytes past its writes.
pub(crate) fn decode_frame(b: &[u8]) -> Result<(u64, Vec<Write>)> {
    let bad = |why: String| Error::Corrupted { key: "<replication frame>".into(), page: None, reason: why };
    if b.len() < FRAME_HEAD + 4 {
        return Err(bad(format!("{} bytes", b.len())));
    }
    let body = &b[..b.len() - 4];
    if read_u32(b, body.len()) != crc32fast::hash(body) {
        return Err(bad("checksum mismatch".into()));
    }
    if b[0] != FRAME_VERSION {
        return Err(bad(format!("version {}", b[0])));
    }
    let ids_high = read_u64(b, 1);
    let n = read_u32(b, 9);
    let mut at = FRAME_HEAD;
    let mut take = |len: usize| -> Result<&[u8]> {
        let end = at.checked_add(len).filter(|&e| e <= body.len()).ok_or_else(|| bad("cut short".into()))?;
        let s = &body[at..end];
        at = end;
        Ok(s)
    };
    let mut writes = Vec::with_capacity(usize::try_from(n).unwrap_or(0).min(body.len() / 6));
    for _ in 0..n {
        let op = take(1)?[0];
        let klen = read_u32(take(4)?, 0) as usize;
        let key = take(klen)?.to_vec();
        let value = match op {
            0 => None,
            1 => {
                let vlen = read_u32(take(4)?, 0) as usize;
                Some(take(vlen)?.to_vec())
            }
            _ => return Err(bad(format!("write kind {op}"))),
        };
        writes.push((key, value));
    }
    if at != body.len() {
        return Err(bad(format!("{} bytes past the writes", body.len() - at)));
    }
    Ok((ids_high, writes))
}

/// A frame of the feed with the offset it ends at.
pub type FeedFrame = (u64, Arc<[u8]>);

/// A master's change feed: the frames of the batches it applied to its
/// store, each ending at an offset (the bytes of frames before it and it),
/// the latest kept up to a backlog size so that a replica that was
/// briefly away can continue where it stopped.
pub struct Feed {
    state: Mutex<FeedState>,
    ready: Condvar,
}

struct FeedState {
    /// The offset after the last frame.
    end: u64,
    /// (end offset, frame), oldest first.
    frames: VecDeque<FeedFrame>,
    bytes: usize,
    limit: usize,
}

/// A replica asked for frames from an offset the feed cannot give.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeedGap {
    /// The frames after it have left the backlog (or it lies inside a
    /// frame): the replica needs a full sync.
    Behind,
    /// It is past the feed's end: another history.
    Ahead,
}

impl Feed {
    pub(crate) fn new(offset: u64, backlog_bytes: usize) -> Feed {
        Feed {
            state: Mutex::new(FeedState { end: offset, frames: VecDeque::new(), bytes: 0, limit: backlog_bytes }),
            ready: Condvar::new(),
        }
    }

    /// The offset after the last frame (Redis's `master_repl_offset`).
    #[must_use]
    pub fn offset(&self) -> u64 {
        self.state.lock().end
    }

    /// The backlog: the offset its first frame starts at, and its bytes.
    #[must_use]
    pub fn backlog(&self) -> (u64, u64) {
        let s = self.state.lock();
        (s.end - s.bytes as u64, s.bytes as u64)
    }

    /// Sets the bytes of frames kept (at least the last frame is kept).
    pub fn set_backlog_bytes(&self, bytes: usize) {
        let mut s = self.state.lock();
        s.limit = bytes;
        s.trim();
    }

    /// Appends a frame and wakes those waiting for one.
    pub(crate) fn push(&self, frame: Vec<u8>) {
        let mut s = self.state.lock();
        s.end += frame.len() as u64;
        s.bytes += frame.len();
        let end = s.end;
        s.frames.push_back((end, frame.into()));
        s.trim();
        drop(s);
        self.ready.notify_all();
    }

    /// Whether a replica at `offset` can continue from the backlog.
    #[must_use]
    pub fn can_continue(&self, offset: u64) -> bool {
        let s = self.state.lock();
        offset == s.end || s.frames.iter().any(|(end, f)| end - f.len() as u64 == offset)
    }

    /// The frames after `offset` (each with the offset it ends at), waiting
    /// up to `wait` for one if there is none yet.
    ///
    /// # Errors
    /// [`FeedGap`] if `offset` is not a frame boundary the backlog holds.
    pub fn frames_after(&self, offset: u64, wait: Duration) -> Result<Vec<FeedFrame>, FeedGap> {
        let deadline = Instant::now() + wait;
        let mut s = self.state.lock();
        while s.end == offset && Instant::now() < deadline {
            self.ready.wait_until(&mut s, deadline);
        }
        if offset > s.end {
            return Err(FeedGap::Ahead);
        }
        let first = s.frames.partition_point(|(end, _)| *end <= offset);
        let out: Vec<FeedFrame> = s.frames.iter().skip(first).cloned().collect();
        match out.first() {
            Some((end, f)) if end - f.len() as u64 != offset => Err(FeedGap::Behind),
            None if offset != s.end => Err(FeedGap::Behind),
            _ => Ok(out),
        }
    }
}

impl FeedState {
    /// Drops the oldest frames past the limit, keeping the last one.
    fn trim(&mut self) {
        while self.bytes > self.limit && self.frames.len() > 1 {
            if let Some((_, f)) = self.frames.pop_front() {
                self.bytes -= f.len();
            }
        }
    }
}

/// The records of a master's store for a full sync, read in key order
/// while the master goes on (see [`Db::snapshot`]).
pub struct Snapshot {
    offset: u64,
    ids_high: u64,
    scan: Scan,
    /// A store's own record, never sent.
    local: Vec<u8>,
}

impl Snapshot {
    pub(crate) fn new(offset: u64, ids_high: u64, scan: Scan, local: Vec<u8>) -> Snapshot {
        Snapshot { offset, ids_high, scan, local }
    }

    /// The feed offset the snapshot starts from: the replica applies the
    /// feed's frames after it.
    #[must_use]
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The next records, about `max_bytes` of them, as a frame; `None`
    /// once every record has been read.
    ///
    /// # Errors
    /// A store error.
    pub fn next_chunk(&mut self, max_bytes: usize) -> Result<Option<Vec<u8>>> {
        let mut writes: Vec<Write> = Vec::new();
        let mut bytes = 0;
        while bytes < max_bytes {
            let Some(r) = self.scan.next() else { break };
            let (k, v) = r?;
            if k[..] == self.local[..] {
                continue;
            }
            bytes += k.len() + v.len() + 9;
            writes.push((k.to_vec(), Some(v.to_vec())));
        }
        if writes.is_empty() {
            return Ok(None);
        }
        Ok(Some(encode_frame(self.ids_high, writes.iter())))
    }
}

/// What a follower loading a master's store receives, in order: the
/// snapshot's chunks, its end, then the feed's frames from the snapshot's
/// offset.
#[derive(Debug)]
pub enum SyncItem {
    /// Records of the snapshot ([`Snapshot::next_chunk`]).
    Chunk(Vec<u8>),
    /// The snapshot is over; the store is consistent once the frames up
    /// to `consistent_at` are applied (the feed's offset when the reading
    /// ended).
    End {
        /// The offset to reach.
        consistent_at: u64,
    },
    /// A frame of the feed, ending at offset `end`.
    Frame {
        /// The offset the frame ends at.
        end: u64,
        /// The frame's bytes.
        frame: Vec<u8>,
    },
}

/// What a store knows of the master it follows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FollowerState {
    /// The master's replication id.
    pub replid: String,
    /// The feed offset the store holds everything up to.
    pub offset: u64,
    /// A load was under way: the store is not consistent, and must load
    /// the master's snapshot again.
    pub loading: bool,
    /// Whether the store still follows (false: it was promoted).
    pub following: bool,
}

impl Db {
    /// Starts keeping a change feed whose first frame starts at `offset`,
    /// keeping `backlog_bytes` of frames for replicas that reconnect (or
    /// returns the feed kept, with its backlog set).
    ///
    /// # Errors
    /// A store error (taking a bitmap id).
    pub fn start_feed(&self, offset: u64, backlog_bytes: usize) -> Result<Arc<Feed>> {
        self.engine.start_feed(offset, backlog_bytes)
    }

    /// The change feed, if one is kept.
    #[must_use]
    pub fn feed(&self) -> Option<Arc<Feed>> {
        self.engine.feed()
    }

    /// Writes back what the database holds in memory, without a
    /// durability barrier: the change feed then carries it. A master with
    /// replicas calls it often, so that they lag by little more than the
    /// interval (the background flush runs once a second).
    ///
    /// # Errors
    /// As [`Db::flush`].
    pub fn write_back(&self) -> Result<()> {
        self.engine.write_back()
    }

    /// Stops keeping the change feed.
    pub fn stop_feed(&self) {
        self.engine.stop_feed();
    }

    /// A snapshot of the store for a replica's full sync (see [`Snapshot`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] without a change feed ([`Db::start_feed`]).
    pub fn snapshot(&self) -> Result<Snapshot> {
        self.engine.snapshot()
    }

    /// Makes this database follow a master: writes are refused
    /// ([`Error::ReadOnlyReplica`]) and nothing is written to the store but
    /// what [`Db::load_from_master`] and [`Db::apply_frames`] bring. What
    /// was not yet written back is dropped by the next load.
    pub fn follow(&self) {
        self.engine.follow_on();
    }

    /// Whether the store is loading a master's snapshot, or stopped while
    /// it did ([`Db::load_from_master`] must then load again): it is not
    /// consistent, and reads of it mean nothing.
    #[must_use]
    pub fn is_loading(&self) -> bool {
        self.engine.follow_loading()
    }

    /// Whether this database follows a master.
    #[must_use]
    pub fn is_following(&self) -> bool {
        self.engine.following()
    }

    /// Stops following: the database becomes writable, continuing from
    /// what it holds.
    ///
    /// # Errors
    /// As [`Db::flush`].
    pub fn stop_following(&self) -> Result<()> {
        self.engine.follow_off()
    }

    /// What the store records of the master it follows or followed.
    ///
    /// # Errors
    /// [`Error::Corrupted`] for a damaged record; a store error.
    pub fn follower_state(&self) -> Result<Option<FollowerState>> {
        Ok(self.engine.follower_record()?.map(|r| FollowerState {
            replid: r.replid,
            offset: r.offset,
            loading: r.state == crate::engine::record::FOLLOW_LOADING,
            following: r.state != crate::engine::record::FOLLOW_PROMOTED,
        }))
    }

    /// Replaces the store's contents with the master `replid`'s, from the
    /// items `next` yields (see [`SyncItem`]) for a snapshot starting at
    /// `offset`; returns the offset reached. Readers wait meanwhile.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when not following, or for items out of
    /// order; what `next` returns; [`Error::Corrupted`] for a damaged
    /// item; a store error. The store then stays marked as loading.
    pub fn load_from_master(
        &self,
        replid: &str,
        offset: u64,
        next: &mut dyn FnMut() -> Result<SyncItem>,
    ) -> Result<u64> {
        self.engine.load(replid, offset, next)
    }

    /// Applies the master `replid`'s frames, each with the offset it ends
    /// at, in one atomic batch.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when not following; [`Error::Corrupted`]
    /// for a damaged frame (nothing is applied); a store error.
    pub fn apply_frames(&self, replid: &str, frames: &[(u64, &[u8])]) -> Result<()> {
        self.engine.apply_frames(replid, frames)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invariant: a frame decodes to the writes it was made of, and any
    /// flipped byte or cut tail is an error.
    #[test]
    fn frames_round_trip_and_detect_damage() {
        let writes: Vec<Write> = vec![(vec![2, 1], Some(vec![9; 40])), (vec![3], None), (vec![], Some(vec![]))];
        let f = encode_frame(77, writes.iter());
        assert_eq!(decode_frame(&f).unwrap(), (77, writes));
        for i in 0..f.len() {
            let mut b = f.clone();
            b[i] ^= 0x08;
            assert!(decode_frame(&b).is_err(), "flip at {i} accepted");
        }
        for cut in 0..f.len() {
            assert!(decode_frame(&f[..cut]).is_err(), "cut at {cut} accepted");
        }
    }

    /// Invariant: a feed gives the frames after a boundary it holds, and
    /// a gap otherwise.
    #[test]
    fn feed_gives_frames_after_a_boundary() {
        let feed = Feed::new(100, 25);
        for len in [10, 10, 10] {
            feed.push(vec![0; len]);
        }
        assert_eq!(feed.offset(), 130);
        // 25 bytes kept: the first frame (100..110) is gone.
        assert_eq!(feed.frames_after(100, Duration::ZERO), Err(FeedGap::Behind));
        assert_eq!(feed.frames_after(110, Duration::ZERO).unwrap().len(), 2);
        assert_eq!(feed.frames_after(115, Duration::ZERO), Err(FeedGap::Behind));
        assert!(feed.frames_after(130, Duration::ZERO).unwrap().is_empty());
        assert_eq!(feed.frames_after(131, Duration::ZERO), Err(FeedGap::Ahead));
        assert!(feed.can_continue(120) && !feed.can_continue(100));
        assert_eq!(feed.backlog(), (110, 20));
    }
}
