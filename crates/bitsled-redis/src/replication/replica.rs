//! A replica's link to its master: a thread that connects, hands over
//! (`AUTH` with `masterauth`, `PING`, `REPLCONF listening-port`, `REPLCONF
//! capa bitsled`, `PSYNC`), loads the master's snapshot when it must, and
//! then applies the frames the master sends, acknowledging each apply and
//! every second. A lost link is tried again each second; the store
//! records how far it got, so a restarted replica continues from there.

use std::io::{BufRead, BufReader, Read};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bitsled::replication::SyncItem;
use parking_lot::{Condvar, Mutex};

use super::wire::{read_line, read_msg, write_command, CHUNK, END, FRAME, PING};
use super::Replication;

/// A master silent this long (it sends a keepalive each second) is
/// taken as gone (Redis's `repl-timeout` is 60 s; a bitsled master is
/// never busy for long: its snapshot is read while it serves).
const TIMEOUT: Duration = Duration::from_secs(10);

/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Frames applied in one batch at most, and their bytes.
const BATCH_FRAMES: usize = 256;
const BATCH_BYTES: usize = 16 << 20;

/// What a replica knows of its link.
#[derive(Clone, Debug)]
pub(crate) struct LinkStatus {
    /// Connected and streaming.
    pub(crate) up: bool,
    /// Loading the master's snapshot.
    pub(crate) syncing: bool,
    /// The offset applied.
    pub(crate) offset: u64,
    /// The master's replication id.
    pub(crate) replid: String,
    pub(crate) last_io: Instant,
    pub(crate) down_since: Instant,
}

/// The link to one master.
pub(crate) struct Link {
    pub(crate) host: String,
    pub(crate) port: u16,
    stop: AtomicBool,
    status: Mutex<LinkStatus>,
    /// The socket, so that [`Link::stop`] can interrupt a blocked read.
    socket: Mutex<Option<TcpStream>>,
    /// Set when the thread has ended.
    ended: Mutex<bool>,
    ended_cv: Condvar,
}

impl Link {
    pub(crate) fn new(host: &str, port: u16) -> Arc<Link> {
        let now = Instant::now();
        Arc::new(Link {
            host: host.to_string(),
            port,
            stop: AtomicBool::new(false),
            status: Mutex::new(LinkStatus {
                up: false,
                syncing: false,
                offset: 0,
                replid: "0".repeat(40),
                last_io: now,
                down_since: now,
            }),
            socket: Mutex::new(None),
            ended: Mutex::new(false),
            ended_cv: Condvar::new(),
        })
    }

    pub(crate) fn status(&self) -> LinkStatus {
        self.status.lock().clone()
    }

    /// Ends the link: the thread applies nothing more and exits.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(s) = &*self.socket.lock() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// Waits up to `limit` for the thread to end after [`Link::stop`].
    pub(crate) fn wait_stopped(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        let mut ended = self.ended.lock();
        while !*ended && !self.ended_cv.wait_until(&mut ended, deadline).timed_out() {}
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    fn set(&self, f: impl FnOnce(&mut LinkStatus)) {
        f(&mut self.status.lock());
    }
}

/// Runs `link` on a thread of its own.
pub(super) fn spawn(repl: Arc<Replication>, link: &Arc<Link>) {
    if let Ok(Some(state)) = repl.db.follower_state() {
        link.set(|s| {
            s.offset = state.offset;
            s.replid = state.replid;
        });
    }
    let thread = std::thread::Builder::new().name("bitsled-repl-link".into());
    let l = Arc::clone(link);
    let spawned = thread.spawn(move || {
        while !l.stopped() {
            if let Err(e) = session(&repl, &l) {
                if !l.stopped() {
                    eprintln!("bitsled serve: replication from {}:{}: {e}", l.host, l.port);
                }
            }
            l.set(|s| {
                if s.up || s.syncing {
                    s.down_since = Instant::now();
                }
                s.up = false;
                s.syncing = false;
            });
            for _ in 0..10 {
                if l.stopped() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        *l.ended.lock() = true;
        l.ended_cv.notify_all();
    });
    if let Err(e) = spawned {
        eprintln!("bitsled serve: no thread for the replication link: {e}");
        *link.ended.lock() = true;
    }
}

/// Sends a command and reads its one-line reply, which must start with
/// `want` (a status); an error reply or another line is the error.
fn ask(w: &mut TcpStream, r: &mut impl BufRead, args: &[&[u8]], want: &str) -> Result<String, String> {
    write_command(w, args).map_err(|e| e.to_string())?;
    let line = read_line(r).map_err(|e| e.to_string())?;
    if line.starts_with(want) {
        Ok(line)
    } else {
        let name = String::from_utf8_lossy(args[0]).into_owned();
        Err(format!("the master answered {name} with {line:?}"))
    }
}

/// One connection to the master, until it fails or the link stops.
fn session(repl: &Replication, link: &Link) -> Result<(), String> {
    let addr = (link.host.as_str(), link.port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve the master's address: {e}"))?
        .next()
        .ok_or("the master's address resolves to nothing")?;
    let mut stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT).map_err(|e| format!("cannot connect: {e}"))?;
    let _ = stream.set_nodelay(true);
    stream.set_read_timeout(Some(TIMEOUT)).map_err(|e| e.to_string())?;
    *link.socket.lock() = stream.try_clone().ok();
    if link.stopped() {
        return Ok(());
    }
    let mut reader = BufReader::with_capacity(1 << 20, stream.try_clone().map_err(|e| e.to_string())?);
    if let Some(pass) = &repl.masterauth {
        ask(&mut stream, &mut reader, &[b"AUTH", pass], "+OK")?;
    }
    ask(&mut stream, &mut reader, &[b"PING"], "+PONG")?;
    let port = repl.port.to_string();
    ask(&mut stream, &mut reader, &[b"REPLCONF", b"listening-port", port.as_bytes()], "+OK")?;
    ask(&mut stream, &mut reader, &[b"REPLCONF", b"capa", b"bitsled"], "+OK")?;
    let state = repl.db.follower_state().map_err(|e| e.to_string())?;
    let (replid, offset) = match &state {
        Some(s) if s.following && !s.loading => (s.replid.clone(), s.offset.to_string()),
        _ => ("?".to_string(), "-1".to_string()),
    };
    let line = ask(&mut stream, &mut reader, &[b"PSYNC", replid.as_bytes(), offset.as_bytes()], "+")?;
    let words: Vec<&str> = line.split(' ').collect();
    let (replid, mut at) = match words.as_slice() {
        ["+FULLRESYNC", id, start] => {
            let start: u64 = start.parse().map_err(|_| format!("bad FULLRESYNC line {line:?}"))?;
            let id = (*id).to_string();
            link.set(|s| s.syncing = true);
            let started = Instant::now();
            let mut next = || next_item(&mut reader);
            let at = repl.db.load_from_master(&id, start, &mut next).map_err(|e| format!("full sync: {e}"))?;
            eprintln!(
                "bitsled serve: full sync from {}:{} done in {:.1} s (offset {at})",
                link.host,
                link.port,
                started.elapsed().as_secs_f64()
            );
            (id, at)
        }
        ["+CONTINUE", id] => ((*id).to_string(), state.map_or(0, |s| s.offset)),
        _ => return Err(format!("unexpected PSYNC reply {line:?}")),
    };
    link.set(|s| {
        s.up = true;
        s.syncing = false;
        s.offset = at;
        s.replid.clone_from(&replid);
        s.last_io = Instant::now();
    });
    let mut last_ack = Instant::now();
    send_ack(&mut stream, at)?;
    while !link.stopped() {
        let mut frames: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut bytes = 0;
        loop {
            let (kind, value, payload) = read_msg(&mut reader).map_err(|e| format!("reading from the master: {e}"))?;
            match kind {
                FRAME => {
                    bytes += payload.len();
                    frames.push((value, payload));
                }
                PING => {}
                _ => return Err(format!("unexpected message kind {kind} while streaming")),
            }
            if reader.buffer().is_empty() || frames.len() >= BATCH_FRAMES || bytes >= BATCH_BYTES {
                break;
            }
        }
        link.set(|s| s.last_io = Instant::now());
        if link.stopped() {
            break;
        }
        if let Some(&(end, _)) = frames.last() {
            let refs: Vec<(u64, &[u8])> = frames.iter().map(|(e, f)| (*e, f.as_slice())).collect();
            repl.db.apply_frames(&replid, &refs).map_err(|e| format!("applying the master's changes: {e}"))?;
            at = end;
            link.set(|s| s.offset = at);
        }
        if !frames.is_empty() || last_ack.elapsed() >= Duration::from_secs(1) {
            send_ack(&mut stream, at)?;
            last_ack = Instant::now();
        }
    }
    Ok(())
}

/// The next item of a full sync from the master's messages.
fn next_item(reader: &mut impl Read) -> bitsled::Result<SyncItem> {
    loop {
        let (kind, value, payload) = read_msg(reader)?;
        return Ok(match kind {
            CHUNK => SyncItem::Chunk(payload),
            END => SyncItem::End { consistent_at: value },
            FRAME => SyncItem::Frame { end: value, frame: payload },
            PING => continue,
            _ => return Err(bitsled::Error::InvalidArgument(format!("unexpected message kind {kind} in a full sync"))),
        });
    }
}

/// `REPLCONF ACK offset` (no reply comes back).
fn send_ack(stream: &mut TcpStream, offset: u64) -> Result<(), String> {
    write_command(stream, &[b"REPLCONF", b"ACK", offset.to_string().as_bytes()])
        .map_err(|e| format!("acknowledging: {e}"))
}
