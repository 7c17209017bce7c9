//! A master's side of one replica: after `PSYNC`, a thread of its own
//! writes the snapshot (for a full sync) and then the feed's frames to the
//! replica's socket, and a keepalive each second. The connection's own
//! thread goes on reading what the replica sends (`REPLCONF ACK`).

use std::io::{BufWriter, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bitsled::replication::{Feed, FeedGap};

use super::wire::{write_msg, CHUNK, END, FRAME, PING};
use super::Replication;

/// Bytes of records per snapshot chunk.
const CHUNK_BYTES: usize = 1 << 20;

/// How often a replica gets a keepalive when nothing changes.
const KEEPALIVE: Duration = Duration::from_secs(1);

/// How often a master with replicas writes back what it holds in memory,
/// so that it reaches the feed: a replica lags by about this much (the
/// background flush alone runs once a second).
pub(super) const WRITE_BACK_EVERY: Duration = Duration::from_millis(100);

/// Streams to replica `id` on a new thread: a full sync unless `from`
/// (the offset it continues from) is given.
pub(super) fn spawn(
    repl: Arc<Replication>,
    id: u64,
    stream: TcpStream,
    replid: String,
    from: Option<u64>,
    feed: Arc<Feed>,
) {
    let spawned = std::thread::Builder::new().name("bitsled-repl-send".into()).spawn(move || {
        if let Err(e) = serve(&repl, id, &stream, &replid, from, &feed) {
            eprintln!("bitsled serve: replication to client {id}: {e}");
        }
        repl.drop_replica(id);
    });
    if let Err(e) = spawned {
        eprintln!("bitsled serve: no thread for a replica: {e}");
    }
}

fn serve(
    repl: &Replication,
    id: u64,
    stream: &TcpStream,
    replid: &str,
    from: Option<u64>,
    feed: &Feed,
) -> Result<(), String> {
    let io = |e: std::io::Error| e.to_string();
    let mut w = BufWriter::with_capacity(1 << 20, stream);
    let mut at = if let Some(offset) = from {
        w.write_all(format!("+CONTINUE {replid}\r\n").as_bytes()).map_err(io)?;
        offset
    } else {
        // What the master holds in memory goes into the store first.
        repl.db.write_back().map_err(|e| e.to_string())?;
        let mut snapshot = repl.db.snapshot().map_err(|e| e.to_string())?;
        let start = snapshot.offset();
        w.write_all(format!("+FULLRESYNC {replid} {start}\r\n").as_bytes()).map_err(io)?;
        while let Some(chunk) = snapshot.next_chunk(CHUNK_BYTES).map_err(|e| e.to_string())? {
            if !repl.serves(id) {
                return Ok(());
            }
            write_msg(&mut w, CHUNK, 0, &chunk).map_err(io)?;
        }
        write_msg(&mut w, END, feed.offset(), &[]).map_err(io)?;
        start
    };
    w.flush().map_err(io)?;
    repl.set_online(id);
    let mut last_sent = Instant::now();
    while repl.serves(id) {
        repl.write_back_if_due().map_err(|e| e.to_string())?;
        match feed.frames_after(at, WRITE_BACK_EVERY) {
            Ok(frames) if frames.is_empty() => {
                if last_sent.elapsed() >= KEEPALIVE {
                    write_msg(&mut w, PING, feed.offset(), &[]).map_err(io)?;
                    last_sent = Instant::now();
                }
            }
            Ok(frames) => {
                for (end, frame) in frames {
                    write_msg(&mut w, FRAME, end, &frame).map_err(io)?;
                    at = end;
                }
                last_sent = Instant::now();
            }
            Err(FeedGap::Behind) => {
                return Err(format!("the replica fell behind the backlog at offset {at}; it will sync again"))
            }
            Err(FeedGap::Ahead) => return Err(format!("offset {at} is past the feed's end")),
        }
        w.flush().map_err(io)?;
    }
    Ok(())
}
