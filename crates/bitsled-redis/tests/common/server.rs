//! Shared by the server tests: an in-process server on a free port of
//! 127.0.0.1 over a database in a given directory (the raw-socket helpers
//! are `bitsled_testkit::wire`).
#![allow(dead_code, reason = "each test file uses a different subset of these helpers")]

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::thread::JoinHandle;
use std::time::Duration;

use bitsled::Config;
use bitsled_redis::server::{Server, ServerConfig, ShutdownHandle};

/// How long a test waits for a reply that must come before it gives up
/// (a bound against hanging, not a measured time).
pub const PATIENCE: Duration = Duration::from_secs(60);

/// A running server; dropping it shuts the server down and waits for it.
pub struct Served {
    pub addr: SocketAddr,
    stop: ShutdownHandle,
    running: Option<JoinHandle<bitsled::Result<()>>>,
}

/// Starts a server with `config` (its port replaced by a free one) over
/// the database in `dir`.
pub fn start(dir: &Path, config: ServerConfig) -> Served {
    let db = Config::new(dir).flush_interval(None).open().expect("open");
    let server = Server::bind(db, config.port(0)).expect("bind");
    let addr = server.local_addr();
    let stop = server.shutdown_handle();
    let running = std::thread::spawn(move || server.run());
    Served { addr, stop, running: Some(running) }
}

impl Served {
    /// A new raw connection, reads bounded by [`PATIENCE`].
    pub fn raw(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr).expect("connect");
        s.set_read_timeout(Some(PATIENCE)).expect("timeout");
        s
    }

    /// A `redis` crate connection, authenticated with `password` if given.
    pub fn client(&self, password: Option<&str>) -> redis::Connection {
        let url = match password {
            Some(p) => format!("redis://:{p}@{}/", self.addr),
            None => format!("redis://{}/", self.addr),
        };
        redis::Client::open(url).expect("client").get_connection().expect("connect")
    }

    /// Shuts the server down and waits until it has stopped (everything
    /// flushed).
    pub fn stop(mut self) {
        self.finish();
    }

    fn finish(&mut self) {
        self.stop.shutdown();
        if let Some(running) = self.running.take() {
            running.join().expect("server thread").expect("server run");
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.stop.shutdown();
        } else {
            self.finish();
        }
    }
}
