//! Flipped bits in a closed store: what does bitsled make of them?
//!
//! ```text
//! cargo run --release -p bitsled-bench --bin damage -- [--trials N] [--seed S]
//! ```
//!
//! Builds one store (strings and bitmaps, several write-backs, closed), then
//! for each trial copies it, flips one random bit of one of its files
//! (chosen with a chance proportional to the file's size), opens the copy
//! and reads every key it should hold (a string with GET; a bitmap with
//! BITCOUNT, which the metadata answers, and GETBIT of each of its bits,
//! which read its pages). Each trial ends in one outcome:
//!
//! - **refused at open**: opening fails with an error;
//! - **reported**: some key's read fails with an error (the damage is
//!   named), and no key reads wrong;
//! - **silent loss**: some key reads as missing or with a wrong value
//!   (whatever other keys report): the outcome the faults issue forbids;
//! - **unharmed**: every key reads right (the bit was in unused space, or
//!   in a superseded version of a record).
//!
//! For each trial it also runs `verify` on the opened copy and records
//! whether it found a problem, and whether DBSIZE matches the keys that
//! read. It prints the counts and, for silent losses, which file and byte.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bitsled::Config;
use bitsled_bench::Res;
use rand::{Rng, SeedableRng};

/// What a key should hold.
#[derive(Clone)]
enum Want {
    Value(Vec<u8>),
    Bits(Vec<u64>),
}

fn build(dir: &Path) -> Res<BTreeMap<Vec<u8>, Want>> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut want = BTreeMap::new();
    let db = Config::new(dir).flush_interval(None).open()?;
    for round in 0..4 {
        for i in 0..90 {
            let key = format!("user:{round}:{i}").into_bytes();
            let len = rng.gen_range(1..3000);
            let value: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            db.set(&key, &value)?;
            want.insert(key, Want::Value(value));
        }
        for i in 0..15 {
            let key = format!("sign:{round}:{i}").into_bytes();
            let mut bits: Vec<u64> = (0..rng.gen_range(1..400)).map(|_| rng.gen_range(0..200_000)).collect();
            bits.sort_unstable();
            bits.dedup();
            db.set_bits(&key, &bits, true)?;
            want.insert(key, Want::Bits(bits));
        }
        db.flush()?;
    }
    drop(db);
    Ok(want)
}

fn files(dir: &Path) -> Vec<(PathBuf, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(p),
                Ok(m) if m.len() > 0 => out.push((p, m.len())),
                _ => {}
            }
        }
    }
    out.sort();
    out
}

fn copy_dir(from: &Path, to: &Path) -> Res<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let target = to.join(e.file_name());
        if e.metadata()?.is_dir() {
            copy_dir(&e.path(), &target)?;
        } else {
            std::fs::copy(e.path(), target)?;
        }
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    RefusedAtOpen,
    Reported,
    SilentLoss,
    Unharmed,
}

fn main() -> Res<()> {
    let (mut trials, mut seed) = (200usize, 1u64);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--trials" => trials = value()?.parse()?,
            "--seed" => seed = value()?.parse()?,
            other => return Err(format!("unknown argument {other:?} (--trials N, --seed S)").into()),
        }
    }
    // Each outcome's details (refusals, wrong keys, verify's first problem).
    let verbose = std::env::var_os("DAMAGE_VERBOSE").is_some();
    let tmp = tempfile::tempdir()?;
    let base = tmp.path().join("base");
    let want = build(&base)?;
    let store_files = files(&base);
    let total: u64 = store_files.iter().map(|f| f.1).sum();
    println!("store: {} keys, {} files, {total} bytes", want.len(), store_files.len());
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut counts: BTreeMap<Outcome, usize> = BTreeMap::new();
    let (mut verify_found, mut dbsize_off) = (0, 0);
    for t in 0..trials {
        let copy = tmp.path().join(format!("t{t}"));
        copy_dir(&base, &copy)?;
        // A byte of the whole store, then its file.
        let mut at = rng.gen_range(0..total);
        let (file, offset) = store_files
            .iter()
            .find_map(|(p, len)| {
                if at < *len {
                    Some((p, at))
                } else {
                    at -= len;
                    None
                }
            })
            .ok_or("no byte")?;
        let rel = file.strip_prefix(&base)?.to_path_buf();
        let path = copy.join(&rel);
        let mut bytes = std::fs::read(&path)?;
        let bit = rng.gen_range(0..8);
        let i = usize::try_from(offset)?;
        bytes[i] ^= 1 << bit;
        std::fs::write(&path, &bytes)?;
        let outcome = match Config::new(&copy).flush_interval(None).open() {
            Err(e) => {
                if verbose {
                    println!("refused: {} byte {offset} bit {bit}: {e}", rel.display());
                }
                Outcome::RefusedAtOpen
            }
            Ok(db) => {
                let (mut errors, mut wrong, mut read) = (0, Vec::new(), 0u64);
                for (key, w) in &want {
                    let ok = match w {
                        Want::Value(v) => match db.get(key) {
                            Ok(Some(got)) => {
                                if got != *v && verbose {
                                    let diff = got.iter().zip(v).filter(|(a, b)| a != b).count();
                                    println!(
                                        "  {}: {} bytes read, {} written, {diff} differ",
                                        String::from_utf8_lossy(key),
                                        got.len(),
                                        v.len()
                                    );
                                }
                                got == *v
                            }
                            Ok(None) => {
                                if verbose {
                                    println!("  {}: missing", String::from_utf8_lossy(key));
                                }
                                false
                            }
                            Err(_) => {
                                errors += 1;
                                continue;
                            }
                        },
                        // The count (from the metadata), then every bit
                        // (from the pages, one read each).
                        Want::Bits(bits) => {
                            let count = db.bitcount(key, None);
                            let each: Result<Vec<bool>, _> = bits.iter().map(|&b| db.getbit(key, b)).collect();
                            let (Ok(n), Ok(each)) = (count, each) else {
                                errors += 1;
                                continue;
                            };
                            n == bits.len() as u64 && each.iter().all(|&b| b)
                        }
                    };
                    if ok {
                        read += 1;
                    } else {
                        wrong.push(String::from_utf8_lossy(key).to_string());
                    }
                }
                let report = db.verify();
                if report.as_ref().map_or(true, |r| !r.is_ok()) {
                    verify_found += 1;
                    if verbose {
                        match &report {
                            Ok(r) => println!("  verify: {:?}", r.problems.first()),
                            Err(e) => println!("  verify failed: {e}"),
                        }
                    }
                }
                if db.dbsize().map_or(true, |n| n != want.len() as u64) {
                    dbsize_off += 1;
                }
                if !wrong.is_empty() {
                    println!(
                        "silent loss: {} byte {offset} bit {bit}: {} keys wrong or missing (first {:?}), \
                         {errors} reported, {read} right",
                        rel.display(),
                        wrong.len(),
                        wrong.first()
                    );
                    Outcome::SilentLoss
                } else if errors > 0 {
                    Outcome::Reported
                } else {
                    Outcome::Unharmed
                }
            }
        };
        *counts.entry(outcome).or_default() += 1;
        std::fs::remove_dir_all(&copy)?;
    }
    println!("{trials} trials, one flipped bit each:");
    for (o, n) in &counts {
        println!("  {o:?}: {n}");
    }
    println!("  verify found a problem: {verify_found}; DBSIZE differed from the keys written: {dbsize_off}");
    Ok(())
}
