//! Reading pages from the store. A stored page is either a page record of
//! its own (`0x02 | id | page`) or a member of its group's record
//! (`0x07 | id | group`), never both (see `crate::page::group`): point loads
//! look in both, and ordered scans merge the two namespaces into one stream
//! of pages in page order.

use std::collections::VecDeque;
use std::iter::Peekable;

use super::layout;
use super::pages::Fetched;
use super::store::{Bytes, Scan, Store};
use crate::error::{Error, Result};
use crate::page::{decode_group, Page, PageError};

/// A page as a scan found it.
pub(super) enum Held {
    /// A page record, not decoded yet.
    Record(Bytes),
    /// A member of a group record, decoded with its group.
    Page(Page),
}

/// One page from [`StoredPages`].
pub(super) struct StoredPage {
    pub(super) id: u64,
    pub(super) page: u64,
    pub(super) held: Held,
}

/// The error for a stored page or group of bitmap `id` that did not
/// decode: named after `name` when the caller knows the key, else after
/// the bitmap id.
pub(super) fn corrupted(name: Option<&[u8]>, id: u64, page: u64, e: &PageError) -> Error {
    Error::Corrupted {
        key: name.map_or_else(|| format!("<bitmap id {id}>"), |n| String::from_utf8_lossy(n).into_owned()),
        page: Some(page),
        reason: e.to_string(),
    }
}

impl Held {
    /// The page, decoding a page record (errors name `name`, or the bitmap
    /// id without one).
    ///
    /// # Errors
    /// [`Error::Corrupted`] if the record does not decode.
    pub(super) fn into_page(self, name: Option<&[u8]>, id: u64, page: u64) -> Result<Page> {
        match self {
            Held::Record(b) => Page::decode(&b).map_err(|e| corrupted(name, id, page, &e)),
            Held::Page(p) => Ok(p),
        }
    }
}

/// Page `page` of bitmap `bitmap` (owned by key `name`, for errors) from
/// the store: its page record, or else its group's record, whose other
/// members come along as siblings for the cache.
///
/// # Errors
/// [`Error::Corrupted`] if the record found does not decode; a store error.
pub(super) fn fetch(store: &dyn Store, name: &[u8], bitmap: u64, page: u64) -> Result<Fetched> {
    if let Some(bytes) = store.get(&layout::page_key(bitmap, page))? {
        let page = Page::decode(&bytes).map_err(|e| corrupted(Some(name), bitmap, page, &e))?;
        return Ok(Fetched { page: Some(page), siblings: Vec::new() });
    }
    let (group, slot) = layout::group_of(page);
    let Some(bytes) = store.get(&layout::group_key(bitmap, group))? else { return Ok(Fetched::default()) };
    let members = decode_group(&bytes).map_err(|e| corrupted(Some(name), bitmap, page, &e))?;
    let mut fetched = Fetched::default();
    for (s, p) in members {
        if s == slot {
            fetched.page = Some(p);
        } else {
            fetched.siblings.push((layout::group_page(group, s), p));
        }
    }
    Ok(fetched)
}

/// Why [`StoredPages`] could not yield a page.
pub(super) enum ScanError {
    /// The store failed.
    Store(Error),
    /// The group record of bitmap `id` starting at page `page` did not
    /// decode; the scan goes on after it.
    Group { id: u64, page: u64, error: PageError },
    /// A key of the namespaces scanned does not parse; the scan goes on
    /// after it.
    Key(Vec<u8>),
}

impl ScanError {
    /// The error to report, naming key `name` for a group of its bitmap.
    pub(super) fn into_error(self, name: Option<&[u8]>) -> Error {
        match self {
            ScanError::Store(e) => e,
            ScanError::Group { id, page, error } => corrupted(name, id, page, &error),
            ScanError::Key(k) => {
                Error::Corrupted { key: "<store>".into(), page: None, reason: format!("malformed page key {k:?}") }
            }
        }
    }
}

impl From<Error> for ScanError {
    fn from(e: Error) -> Self {
        ScanError::Store(e)
    }
}

/// Stored pages in (bitmap id, page) order: the page records and the group
/// members of a key range, merged. A group record that does not decode is
/// one `Err` item, after which the scan goes on.
pub(super) struct StoredPages {
    records: Peekable<Scan>,
    groups: Peekable<Scan>,
    /// Members of the group read last, in page order.
    members: VecDeque<StoredPage>,
    /// Only pages `from ..= to` (of every bitmap scanned).
    from: u64,
    to: u64,
}

impl StoredPages {
    /// The stored pages `from ..= to` of bitmap `id`.
    pub(super) fn of_bitmap(store: &dyn Store, id: u64, from: u64, to: u64) -> StoredPages {
        let (lo, hi) = layout::page_range(id, from, to);
        let (glo, ghi) = layout::group_range(id, layout::group_of(from).0, layout::group_of(to).0);
        StoredPages {
            records: store.scan(&lo, &hi).peekable(),
            groups: store.scan(&glo, &ghi).peekable(),
            members: VecDeque::new(),
            from,
            to,
        }
    }

    /// Every stored page of every bitmap.
    pub(super) fn all(store: &dyn Store) -> StoredPages {
        StoredPages {
            records: store.scan_prefix(&[layout::NS_PAGE]).peekable(),
            groups: store.scan_prefix(&[layout::NS_GROUP]).peekable(),
            members: VecDeque::new(),
            from: 0,
            to: u64::MAX,
        }
    }

    /// The (id, page) of the next page record, without taking it; errors
    /// of the scan are taken and returned.
    fn peek_record(&mut self) -> Result<Option<(u64, u64)>, ScanError> {
        match self.records.peek() {
            None => Ok(None),
            Some(Ok((k, _))) => {
                if let Some(at) = layout::parse_page_key(k) {
                    Ok(Some(at))
                } else {
                    let k = k.to_vec();
                    self.records.next();
                    Err(ScanError::Key(k))
                }
            }
            Some(Err(_)) => match self.records.next() {
                Some(Err(e)) => Err(e.into()),
                _ => Ok(None),
            },
        }
    }

    /// The (id, first page) of the next group record, without reading it.
    fn peek_group(&mut self) -> Result<Option<(u64, u64)>, ScanError> {
        match self.groups.peek() {
            None => Ok(None),
            Some(Ok((k, _))) => {
                if let Some((id, group)) = layout::parse_group_key(k) {
                    Ok(Some((id, layout::group_page(group, 0))))
                } else {
                    let k = k.to_vec();
                    self.groups.next();
                    Err(ScanError::Key(k))
                }
            }
            Some(Err(_)) => match self.groups.next() {
                Some(Err(e)) => Err(e.into()),
                _ => Ok(None),
            },
        }
    }

    /// Decodes the next group record into `members` (its members in range).
    fn read_group(&mut self) -> Result<(), ScanError> {
        let Some(next) = self.groups.next() else { return Ok(()) };
        let (k, v) = next?;
        let Some((id, group)) = layout::parse_group_key(&k) else { return Err(ScanError::Key(k.to_vec())) };
        let page = layout::group_page(group, 0);
        let pages = decode_group(&v).map_err(|error| ScanError::Group { id, page, error })?;
        self.members.extend(
            pages
                .into_iter()
                .map(|(slot, p)| StoredPage { id, page: layout::group_page(group, slot), held: Held::Page(p) })
                .filter(|m| (self.from..=self.to).contains(&m.page)),
        );
        Ok(())
    }

    /// The next page, or the error that stopped it; a group record is
    /// decoded only once every page before its first page has been taken.
    fn step(&mut self) -> Result<Option<StoredPage>, ScanError> {
        loop {
            let record = self.peek_record()?;
            let member = self.members.front().map(|m| (m.id, m.page));
            if member.is_none() {
                if let Some(group) = self.peek_group()? {
                    if record.is_none_or(|r| group < r) {
                        self.read_group()?;
                        continue;
                    }
                }
            }
            // Equal positions (a page stored both ways, which verify
            // reports) come out record first, then member.
            let take_record = match (record, member) {
                (None, None) => return Ok(None),
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (Some(r), Some(m)) => r <= m,
            };
            if take_record {
                let Some((id, page)) = record else { return Ok(None) };
                let held = match self.records.next() {
                    Some(r) => Held::Record(r?.1),
                    None => return Ok(None),
                };
                return Ok(Some(StoredPage { id, page, held }));
            }
            return Ok(self.members.pop_front());
        }
    }
}

impl Iterator for StoredPages {
    type Item = Result<StoredPage, ScanError>;

    fn next(&mut self) -> Option<Result<StoredPage, ScanError>> {
        self.step().transpose()
    }
}
