//! The source side of a slot migration (`CLUSTERX MIGRATE`): the thread
//! that copies the slots' keys to the target with DUMP payloads and
//! RESTORE, large strings a chunk at a time and Bloom filters by
//! BF.SCANDUMP chunks and BF.LOADCHUNK (the target takes them on the
//! connection that announced the
//! import with `CLUSTER IMPORT slots 0`), and the deletion of a slot's
//! keys once another node owns it. The states are in
//! `crate::cluster::migration`.

use std::io::{BufReader, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use bitsled::Db;

use super::migrate::{put_request, read_reply_of, restore_payload};
use crate::cluster::migration::{for_keys_in, MigrationState};
use crate::cluster::topology::{Node, SlotRange};
use crate::cluster::Cluster;

/// Strings longer than this move in chunks of this size (see
/// [`stream_value`]) instead of one RESTORE payload.
const STREAM_BYTES: u64 = 1 << 20;

/// Adds `n` to the keys the running job has copied.
fn count(cluster: &Cluster, n: usize) {
    if let Some(m) = cluster.migration.lock().job.as_mut() {
        m.keys += n as u64;
    }
}

/// A store error as the migration reports it.
#[allow(clippy::needless_pass_by_value)] // the shape `map_err` takes
fn text(e: bitsled::Error) -> String {
    e.to_string()
}

/// The milliseconds `key` has left to live (0: no expiry); `None` if it
/// is gone.
fn time_to_live(db: &Db, key: &[u8]) -> Result<Option<u64>, String> {
    let now = db.now_ms();
    Ok(match db.expiry(key).map_err(text)? {
        bitsled::Expiry::Missing => None,
        bitsled::Expiry::Never => Some(0),
        bitsled::Expiry::At(at) if at <= now => None,
        bitsled::Expiry::At(at) => Some(at - now),
    })
}

/// Gives the copy of `key` on the target `ttl` milliseconds to live (0:
/// none).
fn send_expiry(t: &mut Target, key: &[u8], ttl: u64) -> Result<(), String> {
    if ttl > 0 {
        let ttl = ttl.to_string();
        t.call(&[&[b"PEXPIRE", key, ttl.as_bytes()]])?;
    }
    Ok(())
}

/// Requests waiting to go to the target in one round trip.
#[derive(Default)]
struct Pending {
    requests: Vec<Vec<Vec<u8>>>,
    bytes: usize,
}

impl Pending {
    /// Bytes of requests held before they are sent.
    const BYTES: usize = 1 << 20;
    /// Requests held before they are sent.
    const REQUESTS: usize = 256;

    /// Adds `request`, sending everything held once there is enough.
    fn push(&mut self, t: &mut Target, request: Vec<Vec<u8>>) -> Result<(), String> {
        self.bytes += request.iter().map(Vec::len).sum::<usize>();
        self.requests.push(request);
        if self.bytes >= Self::BYTES || self.requests.len() >= Self::REQUESTS {
            self.flush(t)?;
        }
        Ok(())
    }

    /// Sends everything held.
    fn flush(&mut self, t: &mut Target) -> Result<(), String> {
        if self.requests.is_empty() {
            return Ok(());
        }
        let held: Vec<Vec<&[u8]>> = self.requests.iter().map(|r| r.iter().map(Vec::as_slice).collect()).collect();
        let refs: Vec<&[&[u8]]> = held.iter().map(Vec::as_slice).collect();
        t.call(&refs)?;
        self.requests.clear();
        self.bytes = 0;
        Ok(())
    }
}

/// Queues the move of the Bloom filter `key` to the target: `DEL`, then
/// each chunk of its dump by `BF.LOADCHUNK` (DESIGN.md section 7, "Saving
/// a filter in chunks": the header, then its pages with set bits, 256 KiB
/// at most a chunk), then its time to live. Small filters share round
/// trips; a large one is sent a megabyte at a time. The key cannot change
/// meanwhile: writes to its slot wait for the copy.
fn stream_bloom(t: &mut Target, pending: &mut Pending, db: &Db, key: &[u8]) -> Result<(), String> {
    if time_to_live(db, key)?.is_none() {
        return Ok(());
    }
    pending.push(t, vec![b"DEL".to_vec(), key.to_vec()])?;
    let mut iter = 0;
    while let Some((next, chunk)) = db.bloom(key).scandump(iter).map_err(text)? {
        if next == 0 {
            break;
        }
        pending.push(t, vec![b"BF.LOADCHUNK".to_vec(), key.to_vec(), next.to_string().into_bytes(), chunk])?;
        iter = next;
    }
    // The time left as the last chunk goes (a key that expired meanwhile
    // is deleted again).
    match time_to_live(db, key)? {
        None => pending.push(t, vec![b"DEL".to_vec(), key.to_vec()]),
        Some(0) => Ok(()),
        Some(ttl) => pending.push(t, vec![b"PEXPIRE".to_vec(), key.to_vec(), ttl.to_string().into_bytes()]),
    }
}

/// Moves the string `key` to the target a chunk at a time: `DEL`, then
/// `SETRANGE` of each chunk that holds a set bit (and of the last byte,
/// which gives the length), then its time to live. Memory stays one chunk
/// on each side, and a sparse bitmap sends only its non-zero chunks. The
/// key cannot change meanwhile: writes to its slot wait for the copy.
fn stream_value(t: &mut Target, db: &Db, key: &[u8]) -> Result<(), String> {
    let Some(ttl) = time_to_live(db, key)? else { return Ok(()) };
    let len = db.strlen(key).map_err(text)?;
    t.call(&[&[b"DEL", key]])?;
    let mut offset = 0;
    while offset < len {
        let end = (offset + STREAM_BYTES).min(len);
        let range = |a: u64, b: u64| {
            db.getrange(key, i64::try_from(a).unwrap_or(i64::MAX), i64::try_from(b).unwrap_or(i64::MAX))
        };
        let chunk = range(offset, end - 1).map_err(text)?;
        let at = offset.to_string();
        if chunk.iter().any(|&b| b != 0) {
            t.call(&[&[b"SETRANGE", key, at.as_bytes(), &chunk]])?;
        } else if end == len {
            let last = (len - 1).to_string();
            t.call(&[&[b"SETRANGE", key, last.as_bytes(), b"\0"]])?;
        }
        offset = end;
    }
    send_expiry(t, key, ttl)
}

/// How long a connection or one round trip to the target may take.
const TIMEOUT: Duration = Duration::from_secs(60);

/// A connection to the target that sends requests and reads their
/// status replies.
struct Target {
    out: TcpStream,
    replies: BufReader<TcpStream>,
}

impl Target {
    fn connect(node: &Node, password: Option<&[u8]>) -> Result<Target, String> {
        let addr = (node.ip.as_str(), node.port)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| format!("cannot resolve {}:{}", node.ip, node.port))?;
        let stream = TcpStream::connect_timeout(&addr, TIMEOUT).map_err(|e| format!("connecting to {addr}: {e}"))?;
        let _ = stream.set_nodelay(true);
        stream
            .set_read_timeout(Some(TIMEOUT))
            .and_then(|()| stream.set_write_timeout(Some(TIMEOUT)))
            .map_err(|e| e.to_string())?;
        let replies = BufReader::new(stream.try_clone().map_err(|e| e.to_string())?);
        let mut t = Target { out: stream, replies };
        if let Some(pw) = password {
            t.call(&[&[b"AUTH", pw]])?;
        }
        Ok(t)
    }

    /// Sends `requests` in one write and reads a status reply to each; the
    /// first error reply fails the call.
    fn call(&mut self, requests: &[&[&[u8]]]) -> Result<(), String> {
        let mut out = Vec::new();
        for r in requests {
            put_request(&mut out, r);
        }
        self.out.write_all(&out).map_err(|e| format!("writing to the target: {e}"))?;
        let mut failed = None;
        for _ in requests {
            match read_reply_of(&mut self.replies, true).map_err(|e| format!("reading from the target: {e}"))? {
                Ok(()) => {}
                Err(text) => failed = failed.or(Some(text)),
            }
        }
        failed.map_or(Ok(()), |text| Err(format!("the target replied: {text}")))
    }
}

/// Copies the keys of `slots` from `db` to `target` and records the
/// outcome in `cluster.migration` (whose job the caller set running, with
/// writes to the slots refused from then on). The lock is taken only to
/// record: every command's routing reads it.
pub(crate) fn run(cluster: &Arc<Cluster>, db: &Db, slots: &[SlotRange], target: &Node, password: Option<&[u8]>) {
    let list = crate::cluster::topology::slot_list_text(slots);
    let mut conn = None;
    let outcome = copy(cluster, db, slots, &list, target, password, &mut conn);
    if let Err(why) = &outcome {
        // The target drops what it took: told on the import's connection,
        // or, if that cannot carry it, when the connection closes.
        if let Some(mut t) = conn.take() {
            let _ = t.call(&[&[b"CLUSTER", b"IMPORT", list.as_bytes(), b"2"]]);
        }
        eprintln!("bitsled serve: migration of slots {list} to {}:{} failed: {why}", target.ip, target.port);
    }
    drop(conn);
    // Copied: commands for the slots go to the target from now on, noted
    // durably before they do and before the job says so (a controller
    // pushes the new owner once it reads that), so a restart keeps sending
    // them there. If the note cannot be written, the slots are served here
    // again (the target holds copies nobody is sent to; the next import
    // drops them).
    let outcome = outcome.and_then(|()| cluster.record_migrated(slots, target));
    let mut m = cluster.migration.lock();
    if let Some(job) = m.job.as_mut() {
        job.state = match outcome {
            Ok(()) => MigrationState::Done,
            Err(why) => MigrationState::Failed(why),
        };
    }
}

fn copy(
    cluster: &Arc<Cluster>,
    db: &Db,
    slots: &[SlotRange],
    list: &str,
    target: &Node,
    password: Option<&[u8]>,
    conn: &mut Option<Target>,
) -> Result<(), String> {
    let t = conn.insert(Target::connect(target, password)?);
    t.call(&[&[b"CLUSTER", b"IMPORT", list.as_bytes(), b"0"]])?;
    // Requests for many keys share round trips.
    let mut pending = Pending::default();
    for_keys_in(db, slots, |keys| {
        for k in keys {
            // A Bloom filter and a large string move a chunk at a time;
            // the rest by RESTORE.
            match db.key_type(&k).map_err(text)? {
                "MBbloom--" => stream_bloom(t, &mut pending, db, &k)?,
                "string" if db.strlen(&k).map_err(text)? > STREAM_BYTES => stream_value(t, db, &k)?,
                _ => {
                    let found =
                        restore_payload(db, &k, db.now_ms()).map_err(|f| String::from_utf8_lossy(&f.0).into_owned())?;
                    let Some((payload, ttl)) = found else { continue };
                    let request =
                        vec![b"RESTORE".to_vec(), k, ttl.to_string().into_bytes(), payload, b"REPLACE".to_vec()];
                    pending.push(t, request)?;
                }
            }
            count(cluster, 1);
        }
        Ok(true)
    })?;
    pending.flush(t)?;
    t.call(&[&[b"CLUSTER", b"IMPORT", list.as_bytes(), b"1"]])
}
