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

use super::layout::{self, group_of};
use super::pages::DirtyPage;
use super::store::{Store, Write};
use super::stored::corrupted;
use crate::error::Result;
use crate::page::{encode_group, fits_group, split_group, Member};

/// Appends the writes that store `pages` (dirty pages sorted by bitmap id
/// and page number) to `writes`.
///
/// # Errors
/// [`crate::Error::Corrupted`] if a stored group record does not decode
/// (its members that are not dirty could not be kept); a store error.
pub(super) fn page_writes(store: &dyn Store, pages: &[DirtyPage], writes: &mut Vec<Write>) -> Result<()> {
    let same_group = |a: &DirtyPage, b: &DirtyPage| a.id.0 == b.id.0 && group_of(a.id.1).0 == group_of(b.id.1).0;
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
