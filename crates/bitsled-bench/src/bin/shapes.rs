//! Real-world bitmap shapes: collections of bitmaps loaded into an embedded
//! bitsled store, their stored bytes against the Roaring portable format
//! with run containers, and the time of pairwise AND counts and of the OR
//! of a whole collection against roaring-rs in the same run.
//!
//! ```text
//! cargo run --release -p bitsled-bench --bin shapes -- [DIR ...] [--repeats N]
//! ```
//!
//! Each DIR holds one collection: text files of comma-separated integers,
//! one bitmap per file, read in name order (the layout of the unzipped
//! collections of the public `real-roaring-datasets` repository: census1881,
//! wikileaks-noquotes and their `_srt` sorted variants, uscensus2000, ...).
//! Without DIR it measures synthetic shapes instead: runs of 6 bits and of
//! 17 bits, runs of 80 bits, very sparse values, one value and one run.
//!
//! Sizes:
//! - **bitsled stored**: the sum of `key_stats().stored_bytes` after a
//!   flush (each key's metadata entry and its page and group records,
//!   keys included, before sled's own overhead);
//! - **roaring+runs**: the Roaring portable serialization after
//!   `run_optimize`, sized from the format's specification (per 2^16
//!   chunk the smallest of an array of 2 bytes a value, a bitmap of 8,192
//!   bytes or 2 + 4 bytes a run; a 4-byte cookie, a run-flag bitset, 4
//!   bytes a container and, from 4 containers, 4 bytes of offset each);
//! - **on disk**: `size_on_disk()` after the flush: sled's files,
//!   with its log's overhead;
//! - **roaring-rs**: `serialized_size()` of roaring-rs 0.10, which has no
//!   run containers;
//! - **sled's records**: the keys and values in sled's tree after the
//!   flush (the stored bytes plus the store's own records: superblock,
//!   catalog, directories), and **fresh sled, one batch**: the size on disk
//!   of a new sled tree given exactly those records in one batch and
//!   flushed, so what sled makes of these bytes without bitsled's history.
//!
//! Times (medians of `--repeats` passes, warm caches): `bitop_count(AND,
//! [a, b])` over every successive pair against roaring-rs's
//! `intersection_len`, and `bitop_count(OR, all)` against roaring-rs's
//! union of all; then the same with the bitmaps read into memory once
//! (`Db::bitmap`: `Bitmap::and_count`, `Bitmap::union` and its count), as
//! roaring-rs's bitmaps are held.

use std::path::{Path, PathBuf};
use std::time::Instant;

use bitsled::{BitOp, Db};
use bitsled_bench::Res;
use roaring::RoaringBitmap;

/// One collection: its name and its bitmaps' sorted, distinct values.
struct Collection {
    name: String,
    bitmaps: Vec<Vec<u32>>,
}

fn read_collection(dir: &Path) -> Res<Collection> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
    files.retain(|p| p.is_file());
    // Name order with numbers compared as numbers (file2 before file10).
    files.sort_by_key(|p| {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let digits: String = name.chars().rev().skip_while(|c| !c.is_ascii_digit()).collect();
        let number: String = digits.chars().take_while(char::is_ascii_digit).collect();
        let number: String = number.chars().rev().collect();
        (number.parse::<u64>().unwrap_or(0), name)
    });
    let mut bitmaps = Vec::with_capacity(files.len());
    for f in &files {
        let text = std::fs::read_to_string(f)?;
        let mut values = Vec::new();
        for v in text.split(|c: char| c == ',' || c.is_whitespace()).filter(|v| !v.is_empty()) {
            values.push(v.parse::<u32>().map_err(|e| format!("{}: {v:?}: {e}", f.display()))?);
        }
        values.sort_unstable();
        values.dedup();
        bitmaps.push(values);
    }
    if bitmaps.is_empty() {
        return Err(format!("{}: no files", dir.display()).into());
    }
    let name = dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned());
    Ok(Collection { name, bitmaps })
}

/// A deterministic pseudo-random sequence (SplitMix64), so the synthetic
/// shapes are the same in every run.
struct Mix(u64);

impl Mix {
    fn next(&mut self, below: u32) -> u32 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        u32::try_from(z % u64::from(below.max(1))).unwrap_or(0)
    }
}

/// 200 bitmaps of runs of about `run` bits (1 to 2 * run - 1), with gaps of
/// about `gap` bits, `runs` runs each.
fn runs_shape(name: &str, run: u32, gap: u32, runs: u32, seed: u64) -> Collection {
    let mut mix = Mix(seed);
    let bitmaps = (0..200)
        .map(|_| {
            let mut at = mix.next(gap);
            let mut values = Vec::new();
            for _ in 0..runs {
                let len = 1 + mix.next(2 * run - 1);
                values.extend(at..at + len);
                at += len + 1 + mix.next(2 * gap);
            }
            values
        })
        .collect();
    Collection { name: name.to_owned(), bitmaps }
}

fn synthetic() -> Vec<Collection> {
    let mut mix = Mix(7);
    vec![
        runs_shape("runs of ~6 bits, gaps of ~100", 6, 100, 2_000, 1),
        runs_shape("runs of ~17 bits, gaps of ~300", 17, 300, 1_000, 2),
        runs_shape("runs of ~80 bits, gaps of ~2,000", 80, 2_000, 500, 3),
        Collection {
            name: "6,000 values over 3.7x10^7".to_owned(),
            bitmaps: (0..200)
                .map(|_| {
                    let mut v: Vec<u32> = (0..6_000).map(|_| mix.next(37_000_000)).collect();
                    v.sort_unstable();
                    v.dedup();
                    v
                })
                .collect(),
        },
        Collection { name: "one value".to_owned(), bitmaps: (0..200).map(|i| vec![i * 1_000 + 7]).collect() },
        Collection {
            name: "one run of 500 bits".to_owned(),
            bitmaps: (0..200).map(|i| (i * 100_000 + 300..i * 100_000 + 800).collect()).collect(),
        },
    ]
}

/// Bytes of the Roaring portable serialization of `values` (sorted,
/// distinct) after `run_optimize`, from the format's specification.
fn roaring_runs_bytes(values: &[u32]) -> u64 {
    let mut containers = 0u64;
    let mut has_run = false;
    let mut data = 0u64;
    let mut i = 0;
    while i < values.len() {
        let high = values[i] >> 16;
        let end = i + values[i..].partition_point(|&v| v >> 16 == high);
        let chunk = &values[i..end];
        let card = chunk.len() as u64;
        let runs = 1 + chunk.windows(2).filter(|w| w[1] != w[0] + 1).count() as u64;
        let plain = if card <= 4096 { 2 * card } else { 8192 };
        let run = 2 + 4 * runs;
        if run < plain {
            has_run = true;
            data += run;
        } else {
            data += plain;
        }
        containers += 1;
        i = end;
    }
    let header = if has_run { 4 + containers.div_ceil(8) } else { 8 };
    let offsets = if !has_run || containers >= 4 { 4 * containers } else { 0 };
    header + 4 * containers + offsets + data
}

/// The median of `repeats` timings of `f`, in seconds.
fn median_secs(repeats: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut times: Vec<f64> = (0..repeats.max(1))
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

/// What one collection measured.
struct Row {
    name: String,
    bitmaps: usize,
    values: u64,
    stored: u64,
    disk: u64,
    roaring_runs: u64,
    roaring_rs: u64,
    pages: [u64; 4],
    and_pair_us: f64,
    and_pair_loaded_us: f64,
    and_pair_roaring_us: f64,
    or_all_ms: f64,
    or_all_loaded_ms: f64,
    or_all_roaring_ms: f64,
    /// Keys and values of the records in sled's tree after the flush.
    records: u64,
    /// A fresh sled tree given exactly those records in one batch, then
    /// flushed: its size on disk.
    fresh_sled: u64,
}

/// The records bitsled left in the sled tree at `dir` (closed), and the
/// size on disk of a fresh sled tree given the same records in one batch
/// and flushed, with bitsled's settings (no timer flushes): what sled
/// itself makes of these bytes.
fn sled_floor(dir: &Path) -> Res<(u64, u64)> {
    // sled's I/O threads may hold the directory's lock for a moment after
    // the store was dropped: retry briefly.
    let mut tries = 0;
    let store = loop {
        match sled::Config::new().path(dir).flush_every_ms(None).open() {
            Err(sled::Error::Io(e))
                if (e.kind() == std::io::ErrorKind::WouldBlock || e.to_string().contains("could not acquire lock"))
                    && tries < 100 =>
            {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => break other?,
        }
    };
    let records: Vec<(sled::IVec, sled::IVec)> = store.iter().collect::<Result<_, _>>()?;
    drop(store);
    let bytes = records.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum();
    let fresh_dir = tempfile::tempdir()?;
    let fresh = sled::Config::new().path(fresh_dir.path()).flush_every_ms(None).open()?;
    let mut batch = sled::Batch::default();
    for (k, v) in records {
        batch.insert(k, v);
    }
    fresh.apply_batch(batch)?;
    fresh.flush()?;
    Ok((bytes, fresh.size_on_disk()?))
}

fn measure(c: &Collection, repeats: usize) -> Res<Row> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path().join("db"))?;
    let keys: Vec<Vec<u8>> = (0..c.bitmaps.len()).map(|i| format!("b{i}").into_bytes()).collect();
    for (key, values) in keys.iter().zip(&c.bitmaps) {
        let offsets: Vec<u64> = values.iter().map(|&v| u64::from(v)).collect();
        db.set_bits(key, &offsets, true)?;
    }
    db.flush()?;
    let disk = db.size_on_disk()?;
    let (mut stored, mut pages) = (0u64, [0u64; 4]);
    for key in &keys {
        let Some(st) = db.key_stats(key)? else { continue };
        stored += st.stored_bytes;
        pages[0] += st.sparse_pages;
        pages[1] += st.runs_pages;
        pages[2] += st.ewah_pages;
        pages[3] += st.dense_pages;
    }
    let roaring: Vec<RoaringBitmap> = c.bitmaps.iter().map(|v| v.iter().copied().collect()).collect();
    let key_refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    let pairs = key_refs.len().saturating_sub(1).max(1) as f64;
    let mut check = 0u64;
    let and_bitsled = median_secs(repeats, || {
        for w in key_refs.windows(2) {
            check = check.wrapping_add(db.bitop_count(BitOp::And, w).map_or(0, |(_, ones)| ones));
        }
    });
    // The same bitmaps read into memory once (`Db::bitmap`), as roaring's
    // are held: the kernels without a lookup per call.
    let loaded: Vec<bitsled::Bitmap> = key_refs.iter().map(|k| db.bitmap(k)).collect::<bitsled::Result<_>>()?;
    let mut check_loaded = 0u64;
    let and_loaded = median_secs(repeats, || {
        for w in loaded.windows(2) {
            check_loaded = check_loaded.wrapping_add(w[0].and_count(&w[1]));
        }
    });
    let mut check_roaring = 0u64;
    let and_roaring = median_secs(repeats, || {
        for w in roaring.windows(2) {
            check_roaring = check_roaring.wrapping_add(w[0].intersection_len(&w[1]));
        }
    });
    if check != check_roaring || check_loaded != check_roaring {
        return Err(format!(
            "{}: AND counts differ: bitsled {check}, loaded {check_loaded}, roaring {check_roaring}",
            c.name
        )
        .into());
    }
    let mut or_count = 0;
    let or_bitsled =
        median_secs(repeats, || or_count = db.bitop_count(BitOp::Or, &key_refs).map_or(0, |(_, ones)| ones));
    let loaded_refs: Vec<&bitsled::Bitmap> = loaded.iter().collect();
    let mut or_loaded_count = 0;
    let or_loaded = median_secs(repeats, || or_loaded_count = bitsled::Bitmap::union(&loaded_refs).count());
    let mut or_roaring_count = 0;
    let or_roaring = median_secs(repeats, || {
        let mut acc = RoaringBitmap::new();
        for r in &roaring {
            acc |= r;
        }
        or_roaring_count = acc.len();
    });
    drop(loaded);
    drop(db);
    let (records, fresh_sled) = sled_floor(&dir.path().join("db"))?;
    if or_count != or_roaring_count || or_loaded_count != or_roaring_count {
        return Err(format!(
            "{}: OR counts differ: bitsled {or_count}, loaded {or_loaded_count}, roaring {or_roaring_count}",
            c.name
        )
        .into());
    }
    Ok(Row {
        name: c.name.clone(),
        bitmaps: c.bitmaps.len(),
        values: c.bitmaps.iter().map(|v| v.len() as u64).sum(),
        stored,
        disk,
        roaring_runs: c.bitmaps.iter().map(|v| roaring_runs_bytes(v)).sum(),
        roaring_rs: roaring.iter().map(|r| r.serialized_size() as u64).sum(),
        pages,
        and_pair_us: and_bitsled / pairs * 1e6,
        and_pair_loaded_us: and_loaded / pairs * 1e6,
        and_pair_roaring_us: and_roaring / pairs * 1e6,
        or_all_ms: or_bitsled * 1e3,
        or_all_loaded_ms: or_loaded * 1e3,
        records,
        fresh_sled,
        or_all_roaring_ms: or_roaring * 1e3,
    })
}

fn main() -> Res<()> {
    let mut dirs = Vec::new();
    let mut repeats = 5;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--repeats" => repeats = args.next().ok_or("--repeats needs a number")?.parse()?,
            flag if flag.starts_with("--") => {
                return Err(format!("unknown flag {flag}; usage: shapes [DIR ...] [--repeats N]").into())
            }
            dir => dirs.push(PathBuf::from(dir)),
        }
    }
    let collections =
        if dirs.is_empty() { synthetic() } else { dirs.iter().map(|d| read_collection(d)).collect::<Res<Vec<_>>>()? };
    println!(
        "| collection | bitmaps | values | bitsled stored | roaring+runs | stored / roaring+runs | on disk / roaring+runs | roaring-rs (no runs) | pages: sparse, runs, EWAH, dense | AND pair: bitsled / roaring-rs | OR all: bitsled / roaring-rs | AND pair: loaded / roaring-rs | OR all: loaded / roaring-rs | sled's records | on disk / records | fresh sled, one batch / records |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for c in &collections {
        let r = measure(c, repeats)?;
        // "a / b unit (ratio)", with `digits` decimals for a and b.
        let vs = |a: f64, b: f64, digits: usize, unit: &str| {
            format!("{a:.digits$} / {b:.digits$} {unit} ({:.2}x)", a / b.max(1e-9))
        };
        println!(
            "| {} | {} | {} | {} B | {} B | {:.2}x | {:.2}x | {} B | {}, {}, {}, {} | {} | {} | {} | {} | {} B | {:.2}x | {:.2}x |",
            r.name,
            r.bitmaps,
            r.values,
            r.stored,
            r.roaring_runs,
            r.stored as f64 / r.roaring_runs.max(1) as f64,
            r.disk as f64 / r.roaring_runs.max(1) as f64,
            r.roaring_rs,
            r.pages[0],
            r.pages[1],
            r.pages[2],
            r.pages[3],
            vs(r.and_pair_us, r.and_pair_roaring_us, 2, "µs"),
            vs(r.or_all_ms, r.or_all_roaring_ms, 2, "ms"),
            vs(r.and_pair_loaded_us, r.and_pair_roaring_us, 3, "µs"),
            vs(r.or_all_loaded_ms, r.or_all_roaring_ms, 3, "ms"),
            r.records,
            r.disk as f64 / r.records.max(1) as f64,
            r.fresh_sled as f64 / r.records.max(1) as f64,
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Roaring size follows the format's rules: one array container,
    /// one run container, and the offset header from four containers.
    #[test]
    fn roaring_runs_bytes_follows_the_format() {
        // One array container of 3 values: cookie + count, 4-byte header,
        // 4-byte offset, 6 bytes of values.
        assert_eq!(roaring_runs_bytes(&[1, 5, 9]), 8 + 4 + 4 + 6);
        // One run of 100: cookie, 1-byte run bitset, 4-byte header, no
        // offsets below 4 containers, 2 + 4 bytes of run.
        let run: Vec<u32> = (10..110).collect();
        assert_eq!(roaring_runs_bytes(&run), 4 + 1 + 4 + 6);
        // Four containers of one run each: offsets return.
        let four: Vec<u32> = (0..4u32).flat_map(|c| (c << 16)..(c << 16) + 100).collect();
        assert_eq!(roaring_runs_bytes(&four), 4 + 1 + 16 + 16 + 4 * 6);
    }
}
