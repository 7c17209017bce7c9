//! How a write-back stores its dirty pages: a page whose encoding is small
//! joins its group's record, any other page is a page record of its own
//! (see `crate::page::group`), so every page written lands where the format
//! says it belongs.
//!
//! For each group with a dirty page, the write-back reads the group's
//! record (small: at most 64 small pages), keeps its members that are not
//! dirty, adds the dirty pages that are small, and writes the record back
//! if it changed (or removes it once empty). A dirty page that is large,
//! empty or small also removes, or replaces, its page record: removing a
//! key that is not there costs the store a lookup and writes nothing. The
//! caller holds the write-back lock, so the store does not change between
//! the read and the batch.

use std::collections::HashSet;

use super::layout::{self, group_of};
use super::pagedelta::PageDeltaWriter;
use super::pages::{DirtyPage, PageId};
use super::store::{Store, Write};
use super::stored::corrupted;
use crate::error::Result;
use crate::page::{changed_positions, encode_group, fits_group, split_group, Member};

/// A change of a page is logged when its bits cost at most this share of
/// the page's bytes (2 bytes a bit, in the worst case of the record).
const LOG_SHARE: usize = 4;

/// How a write-back stores its captured pages.
pub(super) struct PagePlan {
    /// Written whole (a page record or a group member).
    pub(super) whole: Vec<DirtyPage>,
    /// Logged: their changed bits are in `records` (a logged page that
    /// changed back has no entry).
    pub(super) logged: Vec<DirtyPage>,
    /// Pages that are not logged and equal their stored version: nothing
    /// to write.
    pub(super) unchanged: Vec<DirtyPage>,
    /// The page delta records, parts in order.
    pub(super) records: Vec<Vec<u8>>,
}

/// Decides, page by page, whether a write-back logs a page's changed bits
/// or writes it whole: with `fold`, every page is written whole, and so is
/// every page of a bitmap in `dead` (the reclaimer will delete its
/// records, which no delta record may then refer to); a page
/// that is logged already is logged again (its store record is older than
/// the page delta records, so only a fold may write it); any other page is
/// logged when it and its stored version both hold bits, its changes cost
/// at most a [`LOG_SHARE`]th of its bytes, and `room` (bytes that newly
/// logged pages may still hold in the cache) allows; such a page with no
/// changed bit (written with the bits it had) is not written at all, and
/// stays unlogged. A logged page in `step` (a step of a page fold) is
/// written whole, with a reset entry in the records.
pub(super) fn plan_pages(
    pages: Vec<DirtyPage>,
    fold: bool,
    step: &HashSet<PageId>,
    dead: &HashSet<u64>,
    room: usize,
) -> PagePlan {
    let mut plan = PagePlan { whole: Vec::new(), logged: Vec::new(), unchanged: Vec::new(), records: Vec::new() };
    if fold {
        plan.whole = pages;
        return plan;
    }
    let mut room = room;
    let mut w = PageDeltaWriter::default();
    for p in pages {
        if p.logged && step.contains(&p.id) {
            w.add(p.id, &[]);
            plan.whole.push(p);
            continue;
        }
        let flips = if dead.contains(&p.id.0) {
            debug_assert!(!p.logged, "a dead bitmap's logged pages make the write-back fold");
            None
        } else if p.logged {
            Some(changed_positions(p.base.as_deref(), p.page.as_deref()))
        } else {
            match (&p.base, &p.page) {
                (Some(base), Some(page)) if page.heap_bytes() <= room => {
                    let flips = changed_positions(Some(base), Some(page));
                    (2 * flips.len() + 8 <= page.heap_bytes() / LOG_SHARE).then_some(flips)
                }
                _ => None,
            }
        };
        let Some(flips) = flips else {
            plan.whole.push(p);
            continue;
        };
        if flips.is_empty() && !p.logged {
            plan.unchanged.push(p);
            continue;
        }
        if !p.logged {
            room = room.saturating_sub(p.page.as_ref().map_or(0, |page| page.heap_bytes()));
        }
        if !flips.is_empty() {
            w.add(p.id, &flips);
        }
        plan.logged.push(p);
    }
    plan.records = w.finish();
    plan
}

/// Whether two pages lie in the same page group of the same bitmap.
pub(super) fn same_group(a: &DirtyPage, b: &DirtyPage) -> bool {
    a.id.0 == b.id.0 && group_of(a.id.1).0 == group_of(b.id.1).0
}

/// Appends the writes that store `pages` (dirty pages sorted by bitmap id
/// and page number) to `writes`.
///
/// # Errors
/// [`crate::Error::Corrupted`] if a stored group record does not decode
/// (its members that are not dirty could not be kept); a store error.
pub(super) fn page_writes(store: &dyn Store, pages: &[DirtyPage], writes: &mut Vec<Write>) -> Result<()> {
    for dirty in pages.chunk_by(same_group) {
        let id = dirty[0].id.0;
        let group = group_of(dirty[0].id.1).0;
        let first = layout::group_page(group, 0);
        let key = layout::group_key(id, group);
        let old = store.get(&key)?;
        let kept = match &old {
            Some(bytes) => split_group(bytes).map_err(|e| corrupted(None, id, first, &e))?,
            None => Vec::new(),
        };
        // The dirty pages' records: the large ones go to the batch as they
        // are, the small ones join the group.
        let mut small: Vec<(u8, Vec<u8>)> = Vec::new();
        for p in dirty {
            let (_, slot) = group_of(p.id.1);
            let single = layout::page_key(id, p.id.1).to_vec();
            match p.page.as_ref().map(|page| page.encode()) {
                Some(record) if !fits_group(&record) => writes.push((single, Some(record))),
                Some(record) => {
                    small.push((slot, record));
                    writes.push((single, None));
                }
                None => writes.push((single, None)),
            }
        }
        let dirty_slot = |slot: u8| dirty.iter().any(|p| group_of(p.id.1).1 == slot);
        let mut members: Vec<Member<'_>> = kept.into_iter().filter(|m| !dirty_slot(m.slot)).collect();
        for (slot, record) in &small {
            let member = Member::of_record(*slot, record).map_err(|e| corrupted(None, id, first, &e))?;
            members.extend(member);
        }
        members.sort_by_key(|m| m.slot);
        if members.is_empty() {
            if old.is_some() {
                writes.push((key.to_vec(), None));
            }
        } else {
            let bytes = encode_group(&members);
            if old.as_deref() != Some(&bytes[..]) {
                writes.push((key.to_vec(), Some(bytes)));
            }
        }
    }
    Ok(())
}
