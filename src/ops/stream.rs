//! Ordered page streams: the pages of one bitmap in page order, merging the
//! store's range scan with pages changed in memory but not yet written back.

use std::iter::Peekable;
use std::sync::Arc;

use crate::db::{decode_page, Inner};
use crate::error::Result;
use crate::key;
use crate::page::Page;
use crate::store::{Bytes, Scan};

/// The pages of one bitmap within a page range, in order. Holds one page at a
/// time; pages that turn out all-zero are skipped.
pub(crate) struct PageStream {
    inner: Arc<Inner>,
    name: Vec<u8>,
    bitmap: u64,
    scan: Peekable<Scan>,
    dirty: Vec<u64>,
    next_dirty: usize,
    /// A candidate taken from the merge but not fetched yet.
    head: Option<(u64, Option<Bytes>)>,
}

impl PageStream {
    /// Pages `from ..= to` of bitmap `bitmap`, owned by key `name`.
    pub(crate) fn new(inner: &Arc<Inner>, name: &[u8], bitmap: u64, from: u64, to: u64) -> PageStream {
        let (lo, hi) = key::page_range(bitmap, from, to);
        PageStream {
            inner: Arc::clone(inner),
            name: name.to_vec(),
            bitmap,
            scan: inner.store.scan(&lo, &hi).peekable(),
            dirty: inner.pages.dirty_pages_of(bitmap, from, to),
            next_dirty: 0,
            head: None,
        }
    }

    /// The page number of the next candidate page, without reading it.
    /// A candidate may still turn out all-zero when fetched.
    pub(crate) fn peek(&mut self) -> Result<Option<u64>> {
        if self.head.is_none() {
            self.head = self.pull()?;
        }
        Ok(self.head.as_ref().map(|(p, _)| *p))
    }

    /// Drops the current candidate without reading it.
    pub(crate) fn skip(&mut self) {
        self.head = None;
    }

    /// Skips candidates before `page`.
    pub(crate) fn seek(&mut self, page: u64) -> Result<()> {
        while let Some(p) = self.peek()? {
            if p >= page {
                break;
            }
            self.skip();
        }
        Ok(())
    }

    /// Reads the current candidate and moves past it; `None` if it is all zero.
    pub(crate) fn take(&mut self) -> Result<Option<(u64, Arc<Page>)>> {
        if self.head.is_none() {
            self.head = self.pull()?;
        }
        let Some((page, bytes)) = self.head.take() else { return Ok(None) };
        let inner = &self.inner;
        let (name, bitmap) = (&self.name, self.bitmap);
        let got = inner.pages.get((bitmap, page), |retry| match (&bytes, retry) {
            (Some(b), false) => decode_page(name, page, b).map(Some),
            _ => inner.fetch_page(name, bitmap, page),
        })?;
        Ok(got.map(|p| (page, p)))
    }

    /// The next non-zero page, in order.
    pub(crate) fn next_page(&mut self) -> Result<Option<(u64, Arc<Page>)>> {
        while self.peek()?.is_some() {
            if let Some(hit) = self.take()? {
                return Ok(Some(hit));
            }
        }
        Ok(None)
    }

    /// The next candidate from the merge of the store scan and the dirty list.
    fn pull(&mut self) -> Result<Option<(u64, Option<Bytes>)>> {
        let stored = match self.scan.peek() {
            Some(Ok((k, _))) => key::parse_page_key(k).map(|(_, p)| p),
            Some(Err(_)) => {
                return match self.scan.next() {
                    Some(Err(e)) => Err(e),
                    _ => Ok(None),
                }
            }
            None => None,
        };
        let dirty = self.dirty.get(self.next_dirty).copied();
        let page = match (stored, dirty) {
            (None, None) => return Ok(None),
            (Some(s), None) => s,
            (None, Some(d)) => d,
            (Some(s), Some(d)) => s.min(d),
        };
        if dirty == Some(page) {
            self.next_dirty += 1;
        }
        let mut bytes = None;
        if stored == Some(page) {
            if let Some(Ok((_, v))) = self.scan.next() {
                bytes = Some(v);
            }
        }
        Ok(Some((page, bytes)))
    }
}
