//! Threads for connections that are doing something, none for idle ones.
//!
//! A new connection starts parked (below), so the accept loop only
//! accepts. A connection runs on a thread of the pool ([`Pool`]) while it
//! has requests: blocking reads, a batch at a time (`conn.rs`). A connection
//! idle for 100 ms (nothing received, nothing pending in or out,
//! no subscription or tracking that could push to it) is *parked*: its
//! state goes into [`Parking`]'s table, its socket into an epoll set, and
//! its thread goes back to the pool. The parking thread waits on the
//! epoll set; when a parked socket becomes readable (a request, the client
//! closing, a CLIENT KILL or a shutdown shutting the socket), the
//! connection leaves the table and a pool thread resumes it. Every tick
//! the parking thread also runs each parked connection's idle checks (the
//! `timeout` setting), closing those past it, and resumes those that a
//! push (an invalidation redirected to them) left output for.
//!
//! So an idle client costs its state and its (released) buffers, not a
//! thread. A pool thread left with nothing to do for [`THREAD_IDLE_EXIT`]
//! exits; a waiting thread holds the pool, not the server, so nothing of
//! the database outlives the server's last connection.

use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Registry, Token, Waker};
use parking_lot::{Condvar, Mutex};

use super::conn::{self, Conn, TICK};
use super::Shared;

/// A pool thread with no work for this long exits.
const THREAD_IDLE_EXIT: Duration = Duration::from_secs(2);

/// The token of the parking thread's waker (client ids start at 1 and
/// never reach it).
const WAKE: Token = Token(usize::MAX);

/// Work for a pool thread: a connection to serve until it ends or parks.
pub(super) type Job = Box<Conn>;

/// The connection threads. A thread that finishes a job waits for the
/// next one on a stack: the one that waited least takes the next job, so
/// under a light load the same few threads serve it and the others run out
/// their [`THREAD_IDLE_EXIT`] and exit.
#[derive(Default)]
pub(super) struct Pool {
    state: Mutex<PoolState>,
}

#[derive(Default)]
struct PoolState {
    /// Threads waiting for work, the latest last.
    idle: Vec<Arc<Handoff>>,
    /// Threads alive.
    threads: usize,
}

/// Where a waiting thread is handed its next job.
#[derive(Default)]
struct Handoff {
    job: Mutex<Option<Job>>,
    ready: Condvar,
}

impl Pool {
    /// Threads serving connections, running or waiting for work.
    pub(super) fn threads(&self) -> usize {
        self.state.lock().threads
    }
}

/// Gives `job` to the thread that waited least, or to a new one; the job
/// back if no thread could be started for it.
pub(super) fn submit(shared: &Shared, job: Job) -> Result<(), Job> {
    let pool = &shared.pool;
    let mut st = pool.state.lock();
    if let Some(waiting) = st.idle.pop() {
        drop(st);
        *waiting.job.lock() = Some(job);
        waiting.ready.notify_one();
        return Ok(());
    }
    st.threads += 1;
    drop(st);
    // Shared with the thread, so that a thread that cannot start gives
    // the job back.
    let first = Arc::new(Mutex::new(Some(job)));
    let (for_thread, first_for_thread) = (Arc::clone(pool), Arc::clone(&first));
    // A waiting thread holds the pool only, not the server: once its
    // connections are gone, nothing of the database stays with it.
    let spawned = std::thread::Builder::new().name("bitsled-client".into()).spawn(move || {
        let counted = Counted(for_thread);
        if let Some(job) = first_for_thread.lock().take() {
            work(&counted.0, job);
        }
    });
    if spawned.is_ok() {
        return Ok(());
    }
    pool.state.lock().threads -= 1;
    let job = first.lock().take();
    job.map_or(Ok(()), Err)
}

/// A pool thread's place in the count, given back however it ends (a
/// panic included).
struct Counted(Arc<Pool>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.state.lock().threads -= 1;
    }
}

/// A pool thread: runs `job`, then the jobs handed to it, until none comes
/// for [`THREAD_IDLE_EXIT`].
fn work(pool: &Pool, job: Job) {
    let mut next = Some(job);
    while let Some(job) = next.take() {
        conn::resume(job);
        next = wait_for_job(pool);
    }
}

/// Waits on the pool's stack for a job; `None` if none came in time (the
/// thread is then off the stack).
fn wait_for_job(pool: &Pool) -> Option<Job> {
    let handoff = Arc::new(Handoff::default());
    pool.state.lock().idle.push(Arc::clone(&handoff));
    let mut slot = handoff.job.lock();
    let _ = handoff.ready.wait_while_for(&mut slot, |j| j.is_none(), THREAD_IDLE_EXIT);
    if let Some(job) = slot.take() {
        return Some(job);
    }
    drop(slot);
    let mut st = pool.state.lock();
    if let Some(i) = st.idle.iter().position(|h| Arc::ptr_eq(h, &handoff)) {
        st.idle.remove(i);
        return None;
    }
    drop(st);
    // Taken off the stack as the wait ended: its job is on the way.
    let mut slot = handoff.job.lock();
    handoff.ready.wait_while(&mut slot, |j| j.is_none());
    slot.take()
}

/// The parked connections and the epoll set of their sockets.
pub(super) struct Parking {
    registry: Registry,
    /// Taken by the parking thread when it starts.
    poll: Mutex<Option<Poll>>,
    waker: Waker,
    parked: Mutex<HashMap<u64, Box<Conn>>>,
    /// How many are parked (INFO reads it without the table's lock).
    count: AtomicUsize,
    /// The parking thread runs: connections may park.
    running: AtomicBool,
}

impl Parking {
    /// An empty table and its epoll set.
    ///
    /// # Errors
    /// If the epoll set cannot be created.
    pub(super) fn new() -> std::io::Result<Parking> {
        let poll = Poll::new()?;
        let registry = poll.registry().try_clone()?;
        let waker = Waker::new(poll.registry(), WAKE)?;
        Ok(Parking {
            registry,
            poll: Mutex::new(Some(poll)),
            waker,
            parked: Mutex::new(HashMap::new()),
            count: AtomicUsize::new(0),
            running: AtomicBool::new(false),
        })
    }

    /// Connections parked now.
    pub(super) fn count(&self) -> usize {
        self.count.load(Ordering::Relaxed)
    }

    /// Parks `c` until its socket becomes readable; `c` back if its socket
    /// cannot be watched (its thread then keeps serving it) or parking has
    /// stopped.
    pub(super) fn park(&self, c: Box<Conn>) -> Result<(), Box<Conn>> {
        let id = c.id();
        let fd = c.stream().as_raw_fd();
        let mut parked = self.parked.lock();
        if !self.running.load(Ordering::SeqCst) {
            return Err(c);
        }
        let Ok(token) = usize::try_from(id) else { return Err(c) };
        // Registered with the table locked, so the parking thread finds the
        // connection however soon its socket is ready (a socket ready
        // already is reported at once).
        if self.registry.register(&mut SourceFd(&fd), Token(token), Interest::READABLE).is_err() {
            return Err(c);
        }
        parked.insert(id, c);
        self.count.store(parked.len(), Ordering::Relaxed);
        Ok(())
    }

    /// Takes connection `id` out of the table and its socket out of the
    /// epoll set.
    fn unpark(&self, parked: &mut HashMap<u64, Box<Conn>>, id: u64) -> Option<Box<Conn>> {
        let c = parked.remove(&id)?;
        let _ = self.registry.deregister(&mut SourceFd(&c.stream().as_raw_fd()));
        self.count.store(parked.len(), Ordering::Relaxed);
        Some(c)
    }

    /// Takes connections `ids` out of the table and their sockets out of
    /// the epoll set.
    #[allow(clippy::vec_box, reason = "each connection leaves the table to be handed on boxed, as a Job")]
    fn unpark_all(&self, parked: &mut HashMap<u64, Box<Conn>>, ids: Vec<u64>) -> Vec<Box<Conn>> {
        ids.into_iter().filter_map(|id| self.unpark(parked, id)).collect()
    }

    /// Stops the parking thread; the connections still parked are closed.
    pub(super) fn stop(&self) {
        self.running.store(false, Ordering::SeqCst);
        let _ = self.waker.wake();
    }
}

/// Starts the parking thread (at most once); `None` if it could not start
/// (connections then keep their threads while idle).
pub(super) fn start(shared: &Arc<Shared>) -> Option<std::thread::JoinHandle<()>> {
    let poll = shared.parking.poll.lock().take()?;
    shared.parking.running.store(true, Ordering::SeqCst);
    let for_thread = Arc::clone(shared);
    let spawned = std::thread::Builder::new().name("bitsled-parking".into()).spawn(move || watch(&for_thread, poll));
    if spawned.is_err() {
        shared.parking.running.store(false, Ordering::SeqCst);
    }
    spawned.ok()
}

/// The parking thread: resumes parked connections whose sockets became
/// readable, runs their idle checks every tick, and closes those left
/// when it stops (or fails).
fn watch(shared: &Arc<Shared>, mut poll: Poll) {
    let parking = &shared.parking;
    // However this thread ends, nothing parks any more.
    let _running = Running(parking);
    let mut events = Events::with_capacity(1024);
    let mut last_tick = Instant::now();
    while parking.running.load(Ordering::SeqCst) {
        if let Err(e) = poll.poll(&mut events, Some(TICK)) {
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            eprintln!("bitsled serve: waiting on idle connections failed ({e}); they are closed");
            break;
        }
        for event in &events {
            if event.token() == WAKE {
                continue;
            }
            let Ok(id) = u64::try_from(event.token().0) else { continue };
            let Some(c) = parking.unpark(&mut parking.parked.lock(), id) else { continue };
            hand_over(shared, c);
        }
        if last_tick.elapsed() >= TICK {
            last_tick = Instant::now();
            tick(shared);
        }
    }
    // Stopped (the server is done) or failed: no more parking, and what
    // is parked is closed.
    parking.running.store(false, Ordering::SeqCst);
    let mut parked = parking.parked.lock();
    let ids: Vec<u64> = parked.keys().copied().collect();
    let left = parking.unpark_all(&mut parked, ids);
    drop(parked);
    for c in left {
        conn::close(c);
    }
}

/// Clears [`Parking::running`] when the parking thread ends.
struct Running<'a>(&'a Parking);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.store(false, Ordering::SeqCst);
    }
}

/// Gives a connection taken out of the table to a pool thread.
fn hand_over(shared: &Shared, c: Box<Conn>) {
    if let Err(c) = submit(shared, c) {
        // No thread for it now (the system refused one): it stays parked,
        // its socket reported again at once.
        std::thread::sleep(Duration::from_millis(10));
        if let Err(c) = shared.parking.park(c) {
            conn::close(c);
        }
    }
}

/// The parked connections' checks, once a tick: those idle past the
/// timeout are closed; those that pushes left output for (a publisher or
/// an invalidation sends what the socket takes at once, never waiting) are
/// resumed, so that a thread sends the rest.
fn tick(shared: &Shared) {
    let parking = &shared.parking;
    let mut parked = parking.parked.lock();
    let mut over = Vec::new();
    let mut pending = Vec::new();
    for (&id, c) in parked.iter_mut() {
        if !c.tick() {
            over.push(id);
        } else if c.has_output() {
            pending.push(id);
        }
    }
    let over = parking.unpark_all(&mut parked, over);
    let pending = parking.unpark_all(&mut parked, pending);
    drop(parked);
    for c in over {
        conn::close(c);
    }
    for c in pending {
        hand_over(shared, c);
    }
}
