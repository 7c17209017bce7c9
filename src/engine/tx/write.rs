//! Write transactions: what [`WriteTx`] adds to a [`ReadTx`], the changes
//! themselves (new values, page and bit updates that keep the count, sets,
//! replacements, moves, publishing a built value), and the count and
//! inline-value helpers they share with the read side.

use std::ops::{Deref, DerefMut};

use super::super::layout;
use super::super::record::{Body, InlineBytes, Kind, Meta, INLINE_BYTES, INLINE_MAX};
use super::{inline_bit, inline_page, ReadTx, Signal, Target};
use crate::error::{Error, Result};
use crate::geometry::{locate, PAGE_BITS};
use crate::page::{encode_lone, Page};

/// `ones`, the count of set bits of key `key`, less the `part` set bits
/// of a page (or a bit) about to change: with [`count_with`], the count
/// follows each change of a part of the value.
///
/// # Errors
/// [`Error::Internal`] if `ones` is below `part`: the count already
/// disagrees with the pages. Never saturated, which would leave BITCOUNT
/// wrong from then on, unnoticed until [`crate::Db::verify`].
fn count_without(key: &[u8], ones: u64, part: u32) -> Result<u64> {
    ones.checked_sub(u64::from(part)).ok_or_else(|| {
        Error::Internal(format!(
            "key {:?} counts {ones} set bits, fewer than the {part} of one of its pages",
            String::from_utf8_lossy(key)
        ))
    })
}

/// `rest` (from [`count_without`]) plus the `part` set bits of the changed
/// page (or bit).
///
/// # Errors
/// [`Error::Internal`] on overflow, which a count of at most
/// [`crate::MAX_OFFSET`] + 1 bits never reaches.
fn count_with(key: &[u8], rest: u64, part: u32) -> Result<u64> {
    rest.checked_add(u64::from(part))
        .ok_or_else(|| Error::Internal(format!("key {:?}: set bit count overflows", String::from_utf8_lossy(key))))
}

/// Refuses a change in place of an inline value other than a string: only
/// a string's inline bytes are its bitmap's page 0 (a small Bloom filter's
/// are its own encoding, changed whole by its operations).
fn only_strings_in_place(meta: &Meta) -> Result<()> {
    if meta.kind == Kind::String {
        Ok(())
    } else {
        Err(Error::Internal(format!("an inline {:?} value changed in place as a bitmap", meta.kind)))
    }
}

/// Makes `meta` keep page `page`, whose member form is `member` (at most
/// `page::LONE_MAX` bytes), in its entry.
fn keep(meta: &mut Meta, page: u64, member: &[u8]) {
    meta.inline = InlineBytes::zeroed();
    meta.inline.room(member.len())[..member.len()].copy_from_slice(member);
    // At most LONE_MAX (32) bytes.
    meta.body = Body::Page { page, bytes: u8::try_from(member.len()).unwrap_or(u8::MAX) };
}

/// The metadata of `value` kept inline as a value of type `kind`.
///
/// # Errors
/// [`Error::Internal`] for a value longer than the type's inline limit.
pub(in crate::engine) fn inline_meta(kind: Kind, value: &[u8], expire_at_ms: u64) -> Result<Meta> {
    if value.len() as u64 > kind.inline_max() {
        return Err(Error::Internal(format!("a {kind:?} value of {} bytes is too long to keep inline", value.len())));
    }
    let mut meta = Meta::empty(kind);
    meta.inline.room(value.len())[..value.len()].copy_from_slice(value);
    meta.len = value.len() as u64;
    meta.ones = value.iter().map(|b| u64::from(b.count_ones())).sum();
    meta.expire_at_ms = expire_at_ms;
    Ok(meta)
}

/// A write transaction; see [`Engine::write`]. Reads go through the
/// [`ReadTx`] it derefs to.
pub(crate) struct WriteTx<'e> {
    pub(super) tx: ReadTx<'e>,
}

impl<'e> Deref for WriteTx<'e> {
    type Target = ReadTx<'e>;
    fn deref(&self) -> &ReadTx<'e> {
        &self.tx
    }
}

impl DerefMut for WriteTx<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.tx
    }
}

impl WriteTx<'_> {
    /// The metadata of a new, empty value of type `kind`, kept inline (not
    /// recorded until [`WriteTx::set`]).
    pub(crate) fn new_value(&self, kind: Kind) -> Meta {
        Meta::empty(kind)
    }

    /// The metadata of a new, empty value of type `kind` in pages under a
    /// fresh bitmap id (not recorded until [`WriteTx::set`]).
    ///
    /// # Errors
    /// A store error allocating an id.
    pub(crate) fn new_paged(&self, kind: Kind) -> Result<Meta> {
        Ok(Meta::paged(kind, self.engine.new_id()?, 0, 0, 0))
    }

    /// The metadata of string key `key`, or that of a new empty string if
    /// it is missing (recorded once the caller sets it).
    ///
    /// # Errors
    /// As [`ReadTx::string`].
    pub(crate) fn string_or_new(&mut self, key: &[u8]) -> Result<Meta> {
        match self.string(key)? {
            Some(m) => Ok(m),
            None => Ok(self.new_value(Kind::String)),
        }
    }

    /// Changes page `page` of the value `meta` describes (the value of
    /// `key`) with `f`; an absent page starts all zero. `meta`'s count of
    /// set bits follows the page's; the caller then records `meta` (with
    /// its new length) with [`WriteTx::set`]. An inline value that outgrows
    /// its bytes, or a string's one page kept in its entry that grows or
    /// gains a second page, moves to pages, which `meta` then says; a
    /// string with one small page keeps it in its entry.
    ///
    /// # Errors
    /// [`Error::Corrupted`] if the stored page does not decode; a store
    /// error allocating an id; [`Error::Internal`], changing nothing, if
    /// `meta` counts fewer set bits than the page holds.
    pub(crate) fn update_page<R>(
        &mut self,
        key: &[u8],
        meta: &mut Meta,
        page: u64,
        f: impl FnOnce(&mut Page) -> R,
    ) -> Result<R> {
        meta.changed_in_place = true;
        if meta.body == Body::Inline {
            only_strings_in_place(meta)?;
            if page == 0 {
                let mut p = inline_page(meta, 0).unwrap_or_else(Page::zeros);
                let rest = count_without(key, meta.ones, p.count_ones())?;
                let r = f(&mut p);
                meta.ones = count_with(key, rest, p.count_ones())?;
                let inline_bits = u32::try_from(INLINE_MAX * 8).unwrap_or(u32::MAX);
                if p.count_range(inline_bits, u32::try_from(PAGE_BITS).unwrap_or(u32::MAX)) == 0 {
                    p.write_bytes(&mut meta.inline[..usize::try_from(INLINE_MAX).unwrap_or(INLINE_BYTES)]);
                } else {
                    self.keep_or_promote(key, meta, 0, p)?;
                }
                return Ok(r);
            }
            if meta.ones != 0 {
                self.promote(key, meta, None)?;
            } else {
                // No bit set in the inline bytes: the page may be the
                // value's only one.
                let mut p = Page::zeros();
                let r = f(&mut p);
                meta.ones = u64::from(p.count_ones());
                self.keep_or_promote(key, meta, page, p)?;
                return Ok(r);
            }
        }
        if let Body::Page { page: at, .. } = meta.body {
            if at == page {
                let Some((_, mut p)) = meta.lone_page(key)? else {
                    return Err(Error::Internal("a kept page is missing".into()));
                };
                let rest = count_without(key, meta.ones, p.count_ones())?;
                let r = f(&mut p);
                meta.ones = count_with(key, rest, p.count_ones())?;
                self.keep_or_promote(key, meta, page, p)?;
                return Ok(r);
            }
            // A second page: the value moves to pages.
            self.promote(key, meta, None)?;
        }
        let engine = self.engine;
        let Body::Paged(id) = meta.body else {
            return Err(Error::Internal("an inline value's page changed as a paged one".into()));
        };
        let ones = meta.ones;
        // The count is checked against the page before `f` runs, so a count
        // that already disagrees changes nothing.
        let (r, ones) = engine.pages.update(
            (id, page),
            |_| engine.fetch_page(key, id, page),
            |p| {
                let rest = count_without(key, ones, p.count_ones())?;
                let r = f(p);
                Ok::<_, Error>((r, count_with(key, rest, p.count_ones())?))
            },
        )??;
        meta.ones = ones;
        Ok(r)
    }

    /// Keeps `p`, page `page` and the only page of string `meta` (the value
    /// of `key`), in the entry if its member form is small enough
    /// (`page::encode_lone`), else moves the value to pages.
    fn keep_or_promote(&self, key: &[u8], meta: &mut Meta, page: u64, p: Page) -> Result<()> {
        match encode_lone(&p) {
            Some(member) => {
                keep(meta, page, &member);
                Ok(())
            }
            None => self.promote(key, meta, Some((page, p))),
        }
    }

    /// Sets bit `offset` of the value `meta` describes (the value of `key`)
    /// to `value`, in place for an inline value, and keeps `meta`'s count;
    /// the caller then records `meta` (with its new length) with
    /// [`WriteTx::set`].
    ///
    /// # Errors
    /// As [`WriteTx::update_page`].
    pub(crate) fn put_bit(&mut self, key: &[u8], meta: &mut Meta, offset: u64, value: bool) -> Result<()> {
        meta.changed_in_place = true;
        if meta.body == Body::Inline {
            only_strings_in_place(meta)?;
            if let Some((i, mask)) = inline_bit(offset) {
                let was = meta.inline[i] & mask != 0;
                meta.ones = count_with(key, count_without(key, meta.ones, u32::from(was))?, u32::from(value))?;
                if value {
                    meta.inline[i] |= mask;
                } else {
                    meta.inline[i] &= !mask;
                }
                return Ok(());
            }
        }
        let at = locate(offset);
        self.update_page(key, meta, at.page, |p| p.set(at.bit, value))?;
        Ok(())
    }

    /// Records `meta` as the metadata of `key`, whose value it describes
    /// (the same value, changed in place, or a new one from
    /// [`WriteTx::new_value`]).
    ///
    /// # Errors
    /// As [`ReadTx::meta`].
    pub(crate) fn set(&mut self, key: &[u8], meta: &Meta) -> Result<()> {
        self.record(key, Some(meta))
    }

    /// [`WriteTx::set`] for a write Redis does not count as a modification
    /// of the key: its watchers are not told (a BITFIELD whose every write
    /// failed still creates or lengthens the key, and Redis signals the key
    /// only for a field written while the key grows or to a new value).
    ///
    /// # Errors
    /// As [`ReadTx::meta`].
    pub(crate) fn set_unannounced(&mut self, key: &[u8], meta: &Meta) -> Result<()> {
        self.record_with(key, Some(meta), Signal::Quiet)
    }

    /// Replaces `key` with `meta` (or deletes it) and marks the value it
    /// held for reclamation; returns whether it existed.
    ///
    /// # Errors
    /// As [`ReadTx::meta`].
    pub(crate) fn replace(&mut self, key: &[u8], meta: Option<&Meta>) -> Result<bool> {
        let old = self.meta(key)?;
        if let Some(id) = old.as_ref().and_then(Meta::id) {
            if meta.and_then(Meta::id) != Some(id) {
                self.engine.journal.set(layout::reclaim_key(id), Some(Vec::new()));
            }
        }
        if old.is_some() || meta.is_some() {
            self.record(key, meta)?;
        }
        Ok(old.is_some())
    }

    /// Replaces `key` with the string `value` of at most [`INLINE_MAX`]
    /// bytes, kept inline, expiring at `expire_at_ms` (0: never). The value
    /// it held is reclaimed.
    ///
    /// # Errors
    /// [`Error::Internal`] for a longer value; as [`ReadTx::meta`].
    pub(crate) fn set_short(&mut self, key: &[u8], value: &[u8], expire_at_ms: u64) -> Result<()> {
        self.set_inline(key, Kind::String, value, expire_at_ms)
    }

    /// Replaces `key` with `value`, a value of type `kind` of at most
    /// [`Kind::inline_max`] bytes, kept inline, expiring at `expire_at_ms`
    /// (0: never). The value it held is reclaimed.
    ///
    /// # Errors
    /// [`Error::Internal`] for a longer value; as [`ReadTx::meta`].
    pub(crate) fn set_inline(&mut self, key: &[u8], kind: Kind, value: &[u8], expire_at_ms: u64) -> Result<()> {
        let meta = inline_meta(kind, value, expire_at_ms)?;
        self.replace(key, Some(&meta))?;
        Ok(())
    }

    /// Rewrites the inline value of `key`, whose current metadata `old` the
    /// caller read in this transaction (or which is absent, and `old` is a
    /// [`WriteTx::new_value`]), with `value`, keeping its type and expiry:
    /// as [`WriteTx::set_inline`] without looking the old value up again,
    /// since an inline value has no pages to reclaim.
    ///
    /// # Errors
    /// [`Error::Internal`] if `old` is paged or `value` too long; as
    /// [`ReadTx::meta`].
    pub(crate) fn rewrite_inline(&mut self, key: &[u8], old: &Meta, value: &[u8]) -> Result<()> {
        self.rewrite_inline_noting(key, old, value, None)
    }

    /// [`WriteTx::rewrite_inline`]; `bloom` as [`ReadTx::record_change`]
    /// takes it.
    fn rewrite_inline_noting(
        &mut self,
        key: &[u8],
        old: &Meta,
        value: &[u8],
        bloom: Option<(u64, &[u64])>,
    ) -> Result<()> {
        if !old.is_inline() {
            return Err(Error::Internal("rewrite_inline of a paged value".into()));
        }
        let meta = inline_meta(old.kind, value, old.expire_at_ms)?;
        self.record_change(key, Some(&meta), Signal::Changed, bloom)
    }

    /// Rewrites the small Bloom filter of `key` (its metadata `old`, just
    /// read) to `value`, which is the filter after items were added: it
    /// now counts `items`, and `set` are the bits that were clear and are
    /// now set (the next delta record may hold only those).
    ///
    /// # Errors
    /// [`Error::Internal`] if `old` is no inline Bloom filter or `value`
    /// is too long; as [`ReadTx::meta`].
    pub(crate) fn add_to_small_bloom(
        &mut self,
        key: &[u8],
        old: &Meta,
        value: &[u8],
        items: u64,
        set: &[u64],
    ) -> Result<()> {
        if old.kind != Kind::Bloom {
            return Err(Error::Internal("add_to_small_bloom of a value that is no Bloom filter".into()));
        }
        self.rewrite_inline_noting(key, old, value, Some((items, set)))
    }

    /// Deletes `key`; returns whether it existed.
    ///
    /// # Errors
    /// As [`ReadTx::meta`].
    pub(crate) fn delete(&mut self, key: &[u8]) -> Result<bool> {
        self.replace(key, None)
    }

    /// Moves the value of `from` (described by `meta`, just read) to `to`,
    /// replacing whatever `to` held; `from` no longer exists.
    ///
    /// # Errors
    /// As [`ReadTx::meta`].
    pub(crate) fn move_value(&mut self, from: &[u8], to: &[u8], meta: &Meta) -> Result<()> {
        // Not `replace`: the value moves, it is not reclaimed. One change,
        // as Redis counts a RENAME or MOVE.
        self.record_with(from, None, Signal::Uncounted)?;
        self.replace(to, Some(meta))?;
        Ok(())
    }

    /// Switches the transaction to database `db` (MOVE works in two): the
    /// key locks it holds cover the same names in every database.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a database that does not exist.
    pub(crate) fn use_db(&mut self, db: u32) -> Result<()> {
        let (ks, counts) = self.engine.resolve(Target::Db(db))?;
        self.tx.ks = ks;
        self.tx.counts = counts;
        Ok(())
    }

    /// Removes `key`, whose value now belongs to another key (MOVE): the
    /// value is not reclaimed.
    ///
    /// # Errors
    /// As [`ReadTx::meta`].
    pub(crate) fn forget(&mut self, key: &[u8]) -> Result<()> {
        // The value lives on under another key: one change, counted there.
        self.record_with(key, None, Signal::Uncounted)
    }

    /// Reports a change of `key` that changes no metadata (Redis counts
    /// some writes that leave a value as it was as modifications): raises
    /// its watchers' flags and counts as a change.
    pub(crate) fn touch(&self, key: &[u8]) {
        self.engine.watches.touched(self.ks, key);
        self.engine.changes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Counts `n` changes beyond the one a key's recorded change counts
    /// (Redis counts some commands per element: PFADD per raised register
    /// and a created key).
    pub(crate) fn count_changes(&self, n: u64) {
        self.engine.changes.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }

    /// Publishes bitmap `id` (built by a [`super::Build`]) as the value of
    /// `key`: `meta` describes it, or `None` deletes `key`. The value `key`
    /// held is reclaimed. A small string is kept inline instead, and a
    /// string whose only page is `lone` keeps that page in its entry if it
    /// is small enough (and the built pages are reclaimed).
    pub(in crate::engine) fn publish(
        &mut self,
        key: &[u8],
        id: u64,
        lone: Option<u64>,
        meta: Option<&Meta>,
    ) -> Result<()> {
        let meta = match meta.cloned() {
            // A paged Bloom filter spans at least two pages, far past its
            // inline limit: only a copy of an inline one is this short.
            Some(mut m) if m.len <= m.kind.inline_max() => {
                if let Some(p) = self.engine.page(key, id, 0)? {
                    let len = usize::try_from(m.len).unwrap_or(0).min(INLINE_BYTES);
                    p.write_bytes(&mut m.inline.room(len)[..len]);
                }
                m.body = Body::Inline;
                Some(m)
            }
            Some(mut m) => {
                if let (Kind::String, Some(at)) = (m.kind, lone) {
                    if let Some(member) = self.engine.page(key, id, at)?.and_then(|p| encode_lone(&p)) {
                        keep(&mut m, at, &member);
                    }
                }
                Some(m)
            }
            None => None,
        };
        self.replace(key, meta.as_ref())?;
        // The built id is live now, or garbage. Garbage is marked again: a
        // write-back may already have stored (and the reclaimer then acted
        // on) the build's first marker while pages put since are dirty.
        let live = meta.is_some_and(|m| m.id() == Some(id));
        self.engine.journal.set(layout::reclaim_key(id), if live { None } else { Some(Vec::new()) });
        // Under the gate, after the journal: a write-back's cut sees the id
        // in `building` exactly while no key names it, so it may store the
        // id's pages after its atomic batch (Engine::write_back_into).
        self.engine.building.lock().remove(&id);
        Ok(())
    }
}
