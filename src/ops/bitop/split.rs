//! A bulk BITOP AND, OR or XOR on two threads: each reads half the sources
//! and combines them, and the caller's thread joins the two halves' pages.
//!
//! Reading a source that is not cached costs far more than combining it:
//! the store's leaf reads and copies, the page checksums and decoding took
//! 58% of a cold OR's samples and the OR itself under 1.5% (BENCHMARKS.md,
//! "Values from a reader, and a bulk BITOP on two threads"). The three operations are associative and commutative, so
//! the result is the operation over the two halves' results, page by page;
//! a page only one half has is the result as it is for OR and XOR, and no
//! result page for AND (the other half's AND is zero there).

use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;

use super::{each_stream_result_page, BitOp, ResultPage, Sources};
use crate::engine::PageStream;
use crate::error::{Error, Result};
use crate::geometry::PAGE_WORDS;
use crate::page::{self, Census, Page};

/// A stream per source (`None` for a missing one).
type Streams = Vec<Option<PageStream>>;

/// Pages the helper thread may compute ahead of the caller's: enough to
/// ride out a slow read on either side, little memory (a dense page each).
const AHEAD: usize = 64;

/// The two halves of `sources` to read on two threads, balanced by the
/// bytes each source reads; or the streams whole when splitting does not
/// pay: an operation other than AND, OR and XOR, sources that fit the page
/// cache (their reads are cheap), fewer than two of them, an AND with a
/// missing source, or one core.
pub(super) fn halves(op: BitOp, sources: Sources) -> std::result::Result<(Streams, Streams), Streams> {
    let Sources { streams, weights, bulk } = sources;
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    // An AND with a missing source is empty: the single merge ends at once.
    let empty_and = op == BitOp::And && streams.iter().any(Option::is_none);
    if !matches!(op, BitOp::And | BitOp::Or | BitOp::Xor) || !bulk || streams.len() < 2 || cores < 2 || empty_and {
        return Err(streams);
    }
    // Heaviest first, each to the lighter half.
    let mut order: Vec<(u64, Option<PageStream>)> = weights.into_iter().zip(streams).collect();
    order.sort_by_key(|o| std::cmp::Reverse(o.0));
    let (mut mine, mut theirs) = (Vec::new(), Vec::new());
    let (mut my_bytes, mut their_bytes) = (0u64, 0u64);
    for (weight, stream) in order {
        if my_bytes <= their_bytes {
            my_bytes += weight;
            mine.push(stream);
        } else {
            their_bytes += weight;
            theirs.push(stream);
        }
    }
    Ok((mine, theirs))
}

#[cfg(test)]
thread_local! {
    /// BITOPs this thread split (tests check that theirs were).
    static SPLITS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// A page of the helper's half, as it sends it.
enum Half {
    Words(Box<[u64; PAGE_WORDS]>),
    Page(Arc<Page>),
}

impl Half {
    /// `result` of the helper's half, owned.
    fn of(result: ResultPage<'_>) -> Half {
        match result {
            ResultPage::Words(words, _) => Half::Words(Box::new(*words)),
            ResultPage::Positions(list) => Half::Page(Arc::new(Page::from_positions(list))),
            ResultPage::Page(p) => Half::Page(Arc::new(p)),
            ResultPage::Shared(p) => Half::Page(p),
        }
    }

    /// The page as a result page of its own.
    fn as_result(&self) -> ResultPage<'_> {
        match self {
            Half::Words(words) => ResultPage::Words(words, Census::of(words)),
            Half::Page(p) => ResultPage::Shared(Arc::clone(p)),
        }
    }

    /// Combines the page into `acc` by `op` (AND, OR or XOR).
    fn combine_into(&self, op: BitOp, acc: &mut [u64; PAGE_WORDS]) {
        match self {
            Half::Words(words) => {
                for (a, w) in acc.iter_mut().zip(words.iter()) {
                    match op {
                        BitOp::And => *a &= w,
                        BitOp::Or => *a |= w,
                        _ => *a ^= w,
                    }
                }
            }
            Half::Page(p) => match op {
                BitOp::And => p.and_into(acc),
                BitOp::Or => p.or_into(acc),
                _ => p.xor_into(acc),
            },
        }
    }
}

/// Writes `result`'s bits into `out`.
fn words_of(result: &ResultPage<'_>, out: &mut [u64; PAGE_WORDS]) {
    match result {
        ResultPage::Words(words, _) => out.copy_from_slice(&words[..]),
        ResultPage::Positions(list) => page::positions_to_words(list, out),
        ResultPage::Page(p) => p.to_words(out),
        ResultPage::Shared(p) => p.to_words(out),
    }
}

/// The helper's pages in page order, each received once.
struct Theirs {
    rx: Receiver<Result<(u64, Half)>>,
    head: Option<(u64, Half)>,
}

impl Theirs {
    /// Receives the next page into `head`; `None` once the helper is done.
    fn advance(&mut self) -> Result<()> {
        self.head = match self.rx.recv() {
            Ok(Ok(next)) => Some(next),
            Ok(Err(e)) => return Err(e),
            // The helper ended: it sent its error first if it had one.
            Err(_) => None,
        };
        Ok(())
    }
}

/// As [`super::each_stream_result_page`] over `mine` and `theirs`
/// together: `theirs` is read on a helper thread.
pub(super) fn each_result_page(
    op: BitOp,
    mine: Streams,
    theirs: Streams,
    len: u64,
    mut f: impl FnMut(u64, ResultPage<'_>) -> Result<()>,
) -> Result<()> {
    #[cfg(test)]
    SPLITS.with(|n| n.set(n.get() + 1));
    std::thread::scope(|scope| {
        let (tx, rx) = sync_channel::<Result<(u64, Half)>>(AHEAD);
        let spawned = std::thread::Builder::new().name("bitsled-bitop".into()).spawn_scoped(scope, move || {
            let sent = each_stream_result_page(op, theirs, len, |page, result| {
                // A closed channel: the caller's side stopped (its error wins).
                tx.send(Ok((page, Half::of(result)))).map_err(|_| Error::Internal("BITOP half stopped".into()))
            });
            if let Err(e) = sent {
                let _ = tx.send(Err(e));
            }
        });
        if let Err(e) = spawned {
            return Err(Error::Io(e));
        }
        let mut theirs = Theirs { rx, head: None };
        theirs.advance()?;
        let mut acc = Box::new([0u64; PAGE_WORDS]);
        // Their pages before `page`: results alone for OR and XOR.
        let alone_before = |theirs: &mut Theirs, page: u64, f: &mut dyn FnMut(u64, ResultPage<'_>) -> Result<()>| {
            while let Some((p, half)) = theirs.head.as_ref().filter(|(p, _)| *p < page) {
                if op != BitOp::And {
                    f(*p, half.as_result())?;
                }
                theirs.advance()?;
            }
            Ok::<_, Error>(())
        };
        each_stream_result_page(op, mine, len, |page, result| {
            alone_before(&mut theirs, page, &mut f)?;
            match theirs.head.take() {
                Some((p, half)) if p == page => {
                    words_of(&result, &mut acc);
                    half.combine_into(op, &mut acc);
                    theirs.advance()?;
                    let census = Census::of(&acc);
                    if census.ones > 0 {
                        f(page, ResultPage::Words(&acc, census))?;
                    }
                }
                head => {
                    theirs.head = head;
                    if op != BitOp::And {
                        f(page, result)?;
                    }
                }
            }
            Ok(())
        })?;
        alone_before(&mut theirs, u64::MAX, &mut f)
    })
}

#[cfg(test)]
mod tests {
    use super::SPLITS;
    use crate::geometry::PAGE_LEN;
    use crate::{BitOp, Config};

    /// Invariant: AND, OR and XOR over sources that together exceed the
    /// page cache are split over two threads and give, stored and counted,
    /// the bytes of the operation over the sources' bytes (missing bytes
    /// zero): for sources of different lengths and densities, pages that
    /// only some sources hold (dense, sparse, absent), a missing source,
    /// and results whose pages come from one half alone.
    #[test]
    fn split_bitops_give_the_operation_over_all_sources() {
        let dir = tempfile::tempdir().unwrap();
        let db = Config::new(dir.path()).cache_bytes(1 << 20).flush_interval(None).open().unwrap();
        let pages = 90;
        let mut values: Vec<Vec<u8>> = Vec::new();
        for i in 0..7usize {
            let len = PAGE_LEN * (pages - 3 * i) + 11 * i;
            let v: Vec<u8> = (0..len)
                .map(|j| {
                    let page = j / PAGE_LEN;
                    let hash = (j ^ (i << 20)).wrapping_mul(0x9E37_79B9).rotate_right(17);
                    // Pages absent in some sources, sparse, full or dense
                    // in others; every third page is dense or full in all.
                    match (page % 3, (page + i) % 4) {
                        (0, 0) => 0,
                        (1, 1) if j % 97 != 0 => 0,
                        (_, 2) => 0xFF,
                        _ => hash.to_le_bytes()[0],
                    }
                })
                .collect();
            db.set(format!("src:{i}").as_bytes(), &v).unwrap();
            values.push(v);
        }
        db.flush().unwrap();
        let names: Vec<String> = (0..values.len()).map(|i| format!("src:{i}")).collect();
        let mut sources: Vec<&[u8]> = names.iter().map(String::as_bytes).collect();
        let len = values.iter().map(Vec::len).max().unwrap();
        let fold = |op: BitOp, vals: &[&Vec<u8>]| -> Vec<u8> {
            (0..len)
                .map(|j| {
                    let byte = |v: &&Vec<u8>| v.get(j).copied().unwrap_or(0);
                    let mut bytes = vals.iter().map(byte);
                    let first = bytes.next().unwrap_or(0);
                    bytes.fold(first, |a, b| match op {
                        BitOp::And => a & b,
                        BitOp::Or => a | b,
                        _ => a ^ b,
                    })
                })
                .collect()
        };
        let all: Vec<&Vec<u8>> = values.iter().collect();
        let splits =
            if std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get) > 1 { 2 } else { 0 };
        for op in [BitOp::And, BitOp::Or, BitOp::Xor] {
            let before = SPLITS.with(std::cell::Cell::get);
            assert_eq!(db.bitop(op, b"dest", &sources).unwrap(), len as u64);
            let want = fold(op, &all);
            let got = db.get(b"dest").unwrap().unwrap_or_default();
            assert!(
                got == want,
                "{op:?}: {} of {} bytes differ",
                got.iter().zip(&want).filter(|(a, b)| a != b).count(),
                len
            );
            let ones: u64 = want.iter().map(|b| u64::from(b.count_ones())).sum();
            assert!(ones > 0, "{op:?}: the result has set bits to check");
            assert_eq!(db.bitop_count(op, &sources).unwrap(), (len as u64, ones), "{op:?}");
            assert_eq!(SPLITS.with(std::cell::Cell::get), before + splits, "{op:?} was split, stored and counted");
        }
        // A missing source: AND is empty (and not split), OR and XOR
        // ignore it.
        sources.push(b"missing");
        let before = SPLITS.with(std::cell::Cell::get);
        assert_eq!(db.bitop_count(BitOp::And, &sources).unwrap(), (len as u64, 0));
        assert_eq!(SPLITS.with(std::cell::Cell::get), before);
        let ones: u64 = fold(BitOp::Or, &all).iter().map(|b| u64::from(b.count_ones())).sum();
        assert_eq!(db.bitop_count(BitOp::Or, &sources).unwrap(), (len as u64, ones));
    }
}
