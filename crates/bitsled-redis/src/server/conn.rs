//! One client connection: reading and parsing requests, the connection and
//! server commands, transactions, and writing replies without ever
//! blocking on a client that does not read.
//!
//! The thread blocks in `read` while nothing is pending. After a read it
//! runs every complete request in its buffer and appends the replies to one
//! output buffer (under `fsync always`, after one group commit), then tries
//! to write it without blocking. If the client does not take it all, the
//! connection switches to non-blocking polling: it keeps writing what the
//! client takes and keeps reading and running its requests (a client may
//! send a whole pipeline before reading any reply), until the output is
//! gone, the client has been idle past the timeout, or the output exceeds
//! the pending-reply limit (then the client is disconnected).

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::info;
use super::resp::{self, Parsed, Parser, Proto};
use super::{ClientInfo, CommandStat, Fsync, Shared};
use crate::command::{execute, is_known, is_write, Reply};

/// Bytes read at a time, and the initial size of the input buffer.
const READ_CHUNK: usize = 16 * 1024;

/// An input buffer larger than this is given back once it is empty.
const KEEP_BUFFER: usize = 1 << 20;

/// How long a shutting-down server waits for a client to take its last
/// replies.
const SHUTDOWN_DRAIN: Duration = Duration::from_secs(5);

const NOAUTH: &str = "NOAUTH Authentication required.";
const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// A transaction being queued.
struct Multi {
    queue: Vec<Vec<Vec<u8>>>,
    /// A queued command was refused: EXEC aborts.
    dirty: bool,
}

struct Conn<'a> {
    shared: &'a Shared,
    stream: TcpStream,
    info: Arc<ClientInfo>,
    parser: Parser,
    /// Input: bytes `lo..hi` of `buf` are received and not yet parsed.
    buf: Vec<u8>,
    lo: usize,
    hi: usize,
    out: Vec<u8>,
    authed: bool,
    proto: Proto,
    multi: Option<Multi>,
    /// A write command ran since the last group commit.
    wrote: bool,
    /// Close after sending the pending replies (QUIT, protocol error,
    /// SHUTDOWN).
    close: bool,
    /// Close at once, dropping the pending replies (output limit, failed
    /// durability barrier).
    kill: bool,
    /// The client closed its side: nothing more will be read.
    eof: bool,
    stats: HashMap<String, CommandStat>,
    commands: u64,
    last_cmd: String,
}

/// Serves the connection `stream` with client id `id` until it ends.
pub(crate) fn serve(shared: &Arc<Shared>, stream: TcpStream, id: u64) {
    let (Ok(addr), Ok(laddr), Ok(clone)) = (stream.peer_addr(), stream.local_addr(), stream.try_clone()) else {
        return;
    };
    let info = Arc::new(ClientInfo {
        id,
        addr,
        laddr,
        created: Instant::now(),
        name: parking_lot::Mutex::new(None),
        last_cmd: parking_lot::Mutex::new("NULL".into()),
        last_active: parking_lot::Mutex::new(Instant::now()),
        resp: std::sync::atomic::AtomicUsize::new(2),
        stream: clone,
    });
    shared.clients.lock().insert(id, Arc::clone(&info));
    // A shutdown that began before this connection was registered did not
    // see it.
    if shared.shutting_down.load(Ordering::SeqCst) {
        let _ = stream.shutdown(std::net::Shutdown::Read);
    }
    let mut conn = Conn {
        shared,
        stream,
        info,
        parser: Parser::new(),
        buf: vec![0; READ_CHUNK],
        lo: 0,
        hi: 0,
        out: Vec::new(),
        authed: shared.config.requirepass.is_none(),
        proto: Proto::Resp2,
        multi: None,
        wrote: false,
        close: false,
        kill: false,
        eof: false,
        stats: HashMap::new(),
        commands: 0,
        last_cmd: String::new(),
    };
    conn.run();
    let _ = conn.stream.shutdown(std::net::Shutdown::Both);
    shared.clients.lock().remove(&id);
}

impl Conn<'_> {
    fn run(&mut self) {
        if self.stream.set_read_timeout(self.shared.config.timeout).is_err() {
            return;
        }
        loop {
            match self.read_some() {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                // The read timeout is the idle timeout; other errors end
                // the connection too.
                Err(_) => return,
            }
            self.process();
            if !self.send() || self.close || self.eof {
                return;
            }
        }
    }

    /// Reads what is available into the input buffer, making room first.
    fn read_some(&mut self) -> std::io::Result<usize> {
        if self.lo == self.hi {
            self.lo = 0;
            self.hi = 0;
            if self.buf.len() > KEEP_BUFFER {
                self.buf = vec![0; READ_CHUNK];
            }
        }
        if self.hi == self.buf.len() {
            self.buf.copy_within(self.lo..self.hi, 0);
            self.hi -= self.lo;
            self.lo = 0;
            if self.hi == self.buf.len() {
                // One element larger than the buffer: grow by doubling, but
                // not past what the bulk being received still needs. The
                // buffer grows only as data arrives.
                let mut grow = self.buf.len();
                if let Some(need) = self.parser.bulk_remaining(self.hi) {
                    grow = grow.min(need.max(READ_CHUNK));
                }
                self.buf.resize(self.buf.len() + grow, 0);
            }
        }
        let n = self.stream.read(&mut self.buf[self.hi..])?;
        self.hi += n;
        if n > 0 {
            self.shared.stats.net_input_bytes.fetch_add(n as u64, Ordering::Relaxed);
            *self.info.last_active.lock() = Instant::now();
        }
        Ok(n)
    }

    /// Runs every complete request in the input buffer, appending the
    /// replies to the output; under `fsync always`, the batch's writes are
    /// made durable before its replies may go out.
    fn process(&mut self) {
        while !self.close && !self.kill {
            let parsed = self.parser.parse(&self.buf[self.lo..self.hi], self.authed);
            match parsed {
                Err(e) => {
                    resp::write_error(&e.text(), &mut self.out);
                    self.close = true;
                }
                Ok((used, Parsed::Incomplete)) => {
                    self.lo += used;
                    break;
                }
                Ok((used, Parsed::Request(args))) => {
                    self.lo += used;
                    if !args.is_empty() {
                        self.request(&args);
                        if self.out.len() > self.shared.config.max_pending_reply_bytes {
                            self.kill = true;
                        }
                    }
                }
            }
        }
        if self.wrote && self.shared.config.fsync == Fsync::Always && !self.kill {
            self.wrote = false;
            if let Err(why) = self.shared.committer.commit(&self.shared.db, &self.shared.stats) {
                // The replies are not sent: nothing in this batch counts as
                // acknowledged.
                eprintln!("bitsled serve: flush failed ({why}); closing client {}", self.info.id);
                self.kill = true;
            }
        }
        self.publish_stats();
    }

    fn publish_stats(&mut self) {
        if self.commands == 0 {
            return;
        }
        let s = &self.shared.stats;
        s.commands_processed.fetch_add(self.commands, Ordering::Relaxed);
        self.commands = 0;
        {
            let mut all = s.commands.lock();
            for (name, st) in self.stats.drain() {
                let e = all.entry(name).or_default();
                e.calls += st.calls;
                e.usec += st.usec;
                e.failed += st.failed;
            }
        }
        let last = std::mem::take(&mut self.last_cmd);
        *self.info.last_cmd.lock() = last;
    }

    /// Writes the pending output; false if the connection is to end.
    fn send(&mut self) -> bool {
        if self.kill {
            return false;
        }
        if self.out.is_empty() {
            return true;
        }
        if self.stream.set_nonblocking(true).is_err() {
            return false;
        }
        let ok = self.drain_output();
        ok && self.stream.set_nonblocking(false).is_ok()
    }

    /// With the socket non-blocking: writes until the output is gone,
    /// reading and running further requests meanwhile.
    fn drain_output(&mut self) -> bool {
        let mut sent = 0;
        let mut pause = Duration::ZERO;
        let mut last_progress = Instant::now();
        loop {
            let mut progress = false;
            while sent < self.out.len() {
                match self.stream.write(&self.out[sent..]) {
                    Ok(0) => return false,
                    Ok(n) => {
                        sent += n;
                        progress = true;
                        self.shared.stats.net_output_bytes.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => return false,
                }
            }
            if sent == self.out.len() {
                self.out.clear();
                if self.out.capacity() > KEEP_BUFFER {
                    self.out = Vec::new();
                }
                return true;
            }
            if !self.close && !self.eof {
                match self.read_some() {
                    Ok(0) => self.eof = true,
                    Ok(_) => {
                        progress = true;
                        self.out.drain(..sent);
                        sent = 0;
                        self.process();
                        if self.kill {
                            return false;
                        }
                    }
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                    Err(_) => return false,
                }
            }
            if progress {
                pause = Duration::ZERO;
                last_progress = Instant::now();
                continue;
            }
            let stalled = last_progress.elapsed();
            if self.shared.config.timeout.is_some_and(|t| stalled > t)
                || (self.shared.shutting_down.load(Ordering::Relaxed) && stalled > SHUTDOWN_DRAIN)
            {
                return false;
            }
            pause = (pause * 2).clamp(Duration::from_micros(50), Duration::from_millis(10));
            std::thread::sleep(pause);
        }
    }

    fn error(&mut self, text: &str) {
        resp::write_error(text.as_bytes(), &mut self.out);
    }

    fn ok(&mut self) {
        self.out.extend_from_slice(b"+OK\r\n");
    }

    fn reply(&mut self, r: &Reply) {
        resp::write_reply(r, self.proto, &mut self.out);
    }

    /// One request: authentication, transaction queueing, then the command.
    fn request(&mut self, args: &[Vec<u8>]) {
        let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
        if !self.authed && !matches!(name.as_str(), "auth" | "hello" | "quit") {
            self.error(NOAUTH);
            if let Some(m) = &mut self.multi {
                m.dirty = true;
            }
            return;
        }
        if self.multi.is_some() && !matches!(name.as_str(), "exec" | "discard" | "multi" | "quit" | "reset") {
            // Redis's no-multi flag: SHUTDOWN cannot be queued (run by EXEC,
            // it would end the connection in the middle of EXEC's reply).
            let queued = if name == "shutdown" {
                Err("ERR Command not allowed inside a transaction".to_string())
            } else {
                self.check_arity(&name, args)
            };
            match queued {
                Err(text) => {
                    self.error(&text);
                    if let Some(m) = &mut self.multi {
                        m.dirty = true;
                    }
                }
                Ok(()) => {
                    if let Some(m) = &mut self.multi {
                        m.queue.push(args.to_vec());
                    }
                    self.out.extend_from_slice(b"+QUEUED\r\n");
                }
            }
            return;
        }
        self.command(&name, args, false);
    }

    /// The unknown-command or arity error `execute` would give, without
    /// running anything.
    fn check_arity(&self, name: &str, args: &[Vec<u8>]) -> Result<(), String> {
        let Some(&arity) = self.shared.arities.get(name) else {
            if is_known(&args[0]) {
                // Known to the command layer but not listed by COMMAND
                // INFO: its arity is checked when EXEC runs it.
                return Ok(());
            }
            // Let the command layer word the unknown-command error; an
            // unknown command runs nothing.
            return match execute(&self.shared.db, args) {
                Reply::Error(e) => Err(e),
                _ => Ok(()),
            };
        };
        let argc = args.len() as i64;
        if (arity >= 0 && argc != arity) || argc < arity.abs() {
            return Err(format!("ERR wrong number of arguments for '{name}' command"));
        }
        Ok(())
    }

    /// Runs one command (`name` lowercase) and appends its reply;
    /// `in_exec` when EXEC already holds the server lock exclusively.
    fn command(&mut self, name: &str, args: &[Vec<u8>], in_exec: bool) {
        let start = Instant::now();
        let mark = self.out.len();
        let known = self.shared.arities.contains_key(name);
        match name {
            "auth" | "hello" | "client" | "select" | "quit" | "info" | "config" | "multi" | "exec" | "discard"
            | "shutdown" | "reset" => match self.check_arity(name, args) {
                Err(text) => self.error(&text),
                Ok(()) => self.server_command(name, args),
            },
            _ => {
                let reply = {
                    let _shared = (!in_exec).then(|| self.shared.exec_lock.read());
                    execute(&self.shared.db, args)
                };
                if known && is_write(name.as_bytes()) {
                    self.wrote = true;
                }
                if name == "bf.info" && args.len() == 2 {
                    if let Reply::Array(flat) = &reply {
                        resp::write_map(flat, self.proto, &mut self.out);
                    } else {
                        self.reply(&reply);
                    }
                } else {
                    self.reply(&reply);
                }
            }
        }
        if known {
            let usec = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
            let failed = self.out.get(mark) == Some(&b'-');
            let st = match self.stats.get_mut(name) {
                Some(st) => st,
                None => self.stats.entry(name.to_string()).or_default(),
            };
            st.calls += 1;
            st.usec += usec;
            st.failed += u64::from(failed);
            self.commands += 1;
            if self.last_cmd != name {
                self.last_cmd = name.to_string();
            }
        }
    }

    fn server_command(&mut self, name: &str, args: &[Vec<u8>]) {
        match name {
            "auth" => self.auth(args),
            "hello" => self.hello(args),
            "client" => self.client(args),
            "select" => match std::str::from_utf8(&args[1]).ok().and_then(|s| s.parse::<i64>().ok()) {
                None => self.error("ERR value is not an integer or out of range"),
                Some(0) => self.ok(),
                Some(_) => self.error("ERR DB index is out of range"),
            },
            "quit" => {
                self.ok();
                self.close = true;
            }
            "info" => {
                let text = info::info(self.shared, &args[1..]);
                resp::write_bulk(text.as_bytes(), &mut self.out);
            }
            "config" => self.config(args),
            "multi" => {
                if self.multi.is_some() {
                    self.error("ERR MULTI calls can not be nested");
                } else {
                    self.multi = Some(Multi { queue: Vec::new(), dirty: false });
                    self.ok();
                }
            }
            "discard" => match self.multi.take() {
                Some(_) => self.ok(),
                None => self.error("ERR DISCARD without MULTI"),
            },
            "exec" => self.exec(),
            "shutdown" => self.shutdown(args),
            "reset" => {
                self.multi = None;
                self.proto = Proto::Resp2;
                self.info.resp.store(2, Ordering::Relaxed);
                *self.info.name.lock() = None;
                self.authed = self.shared.config.requirepass.is_none();
                self.out.extend_from_slice(b"+RESET\r\n");
            }
            _ => self.error("ERR unknown command"),
        }
    }

    fn exec(&mut self) {
        let Some(m) = self.multi.take() else {
            self.error("ERR EXEC without MULTI");
            return;
        };
        if m.dirty {
            self.error("EXECABORT Transaction discarded because of previous errors.");
            return;
        }
        resp::write_len(b'*', m.queue.len(), &mut self.out);
        let _exclusive = self.shared.exec_lock.write();
        for args in &m.queue {
            let name = String::from_utf8_lossy(&args[0]).to_ascii_lowercase();
            self.command(&name, args, true);
        }
    }

    /// Whether `user`/`pass` are the default user's credentials.
    fn credentials_ok(&self, user: Option<&[u8]>, pass: &[u8]) -> bool {
        let default_user = user.is_none_or(|u| u == b"default");
        match &self.shared.config.requirepass {
            None => default_user,
            Some(p) => default_user && constant_time_eq(pass, p),
        }
    }

    fn auth(&mut self, args: &[Vec<u8>]) {
        let (user, pass) = match args.len() {
            2 => (None, &args[1]),
            3 => (Some(args[1].as_slice()), &args[2]),
            _ => return self.error("ERR syntax error"),
        };
        if user.is_none() && self.shared.config.requirepass.is_none() {
            return self.error(
                "ERR AUTH <password> called without any password configured for the default user. Are you sure \
                 your configuration is correct?",
            );
        }
        if self.credentials_ok(user, pass) {
            self.authed = true;
            self.ok();
        } else {
            self.error(WRONGPASS);
        }
    }

    fn hello(&mut self, args: &[Vec<u8>]) {
        let mut proto = self.proto;
        if let Some(v) = args.get(1) {
            match std::str::from_utf8(v).ok().and_then(|s| s.parse::<i64>().ok()) {
                None => return self.error("ERR Protocol version is not an integer or out of range"),
                Some(2) => proto = Proto::Resp2,
                Some(3) => proto = Proto::Resp3,
                Some(_) => return self.error("NOPROTO unsupported protocol version"),
            }
        }
        let (mut creds, mut setname) = (None, None);
        let mut i = 2;
        while i < args.len() {
            let opt = args[i].to_ascii_lowercase();
            if opt == b"auth" && i + 2 < args.len() {
                creds = Some((args[i + 1].clone(), args[i + 2].clone()));
                i += 3;
            } else if opt == b"setname" && i + 1 < args.len() {
                setname = Some(args[i + 1].clone());
                i += 2;
            } else {
                let text = format!("ERR Syntax error in HELLO option '{}'", String::from_utf8_lossy(&args[i]));
                return self.error(&text);
            }
        }
        if let Some((user, pass)) = creds {
            if !self.credentials_ok(Some(&user), &pass) {
                return self.error(WRONGPASS);
            }
            self.authed = true;
        }
        if !self.authed {
            return self.error(
                "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH \
                 <user> <pass> option can be used to authenticate the client and select the RESP protocol version \
                 at the same time",
            );
        }
        if let Some(name) = setname {
            if let Err(e) = self.set_name(name) {
                return self.error(e);
            }
        }
        self.proto = proto;
        self.info.resp.store(if proto == Proto::Resp3 { 3 } else { 2 }, Ordering::Relaxed);
        let fields = vec![
            Reply::bulk("server"),
            Reply::bulk("bitsled"),
            Reply::bulk("version"),
            Reply::bulk(info::REDIS_VERSION),
            Reply::bulk("proto"),
            Reply::Integer(if proto == Proto::Resp3 { 3 } else { 2 }),
            Reply::bulk("id"),
            Reply::Integer(i64::try_from(self.info.id).unwrap_or(i64::MAX)),
            Reply::bulk("mode"),
            Reply::bulk("standalone"),
            Reply::bulk("role"),
            Reply::bulk("master"),
            Reply::bulk("modules"),
            Reply::Array(Vec::new()),
        ];
        resp::write_map(&fields, self.proto, &mut self.out);
    }

    fn set_name(&self, name: Vec<u8>) -> Result<(), &'static str> {
        if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
            return Err("ERR Client names cannot contain spaces, newlines or special characters.");
        }
        *self.info.name.lock() = (!name.is_empty()).then_some(name);
        Ok(())
    }

    fn client(&mut self, args: &[Vec<u8>]) {
        let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
        let arity: i64 = match sub.as_str() {
            "id" | "getname" | "info" | "help" => 2,
            "setname" => 3,
            "setinfo" => 4,
            "list" => -2,
            _ => {
                let text = format!("ERR unknown subcommand '{}'. Try CLIENT HELP.", String::from_utf8_lossy(&args[1]));
                return self.error(&text);
            }
        };
        let argc = args.len() as i64;
        if (arity >= 0 && argc != arity) || argc < arity.abs() {
            let text = format!("ERR wrong number of arguments for 'client|{sub}' command");
            return self.error(&text);
        }
        match sub.as_str() {
            "id" => self.reply(&Reply::Integer(i64::try_from(self.info.id).unwrap_or(i64::MAX))),
            "getname" => {
                let name = self.info.name.lock().clone();
                self.reply(&Reply::Bulk(name));
            }
            "setname" => match self.set_name(args[2].clone()) {
                Ok(()) => self.ok(),
                Err(e) => self.error(e),
            },
            "setinfo" => self.ok(),
            "info" => {
                let line = info::client_line(self.shared, &self.info, self.multi.as_ref().map(|m| m.queue.len()));
                resp::write_bulk(line.as_bytes(), &mut self.out);
            }
            "list" => {
                if args.len() > 2 {
                    return self.error("ERR syntax error");
                }
                let mut clients: Vec<Arc<ClientInfo>> = self.shared.clients.lock().values().cloned().collect();
                clients.sort_by_key(|c| c.id);
                let mut text = String::new();
                for c in &clients {
                    let multi = if c.id == self.info.id { self.multi.as_ref().map(|m| m.queue.len()) } else { None };
                    text.push_str(&info::client_line(self.shared, c, multi));
                }
                resp::write_bulk(text.as_bytes(), &mut self.out);
            }
            _ => {
                let help = [
                    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                    "GETNAME",
                    "    Return the name of the current connection.",
                    "ID",
                    "    Return the ID of the current connection.",
                    "INFO",
                    "    Return information about the current client connection.",
                    "LIST",
                    "    Return information about client connections.",
                    "SETNAME <name>",
                    "    Assign the name <name> to the current connection.",
                    "HELP",
                    "    Print this help.",
                ];
                self.reply(&Reply::Array(help.iter().map(|l| Reply::Status((*l).into())).collect()));
            }
        }
    }

    fn config(&mut self, args: &[Vec<u8>]) {
        let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
        match sub.as_str() {
            "get" if args.len() >= 3 => {
                let flat = info::config_get(self.shared, &args[2..]);
                resp::write_map(&flat, self.proto, &mut self.out);
            }
            "set" if args.len() >= 4 => {
                let text = format!(
                    "ERR Unknown option or number of arguments for CONFIG SET - '{}'",
                    String::from_utf8_lossy(&args[2])
                );
                self.error(&text);
            }
            "resetstat" if args.len() == 2 => {
                let s = &self.shared.stats;
                s.commands.lock().clear();
                s.commands_processed.store(0, Ordering::Relaxed);
                s.connections_received.store(0, Ordering::Relaxed);
                s.rejected_connections.store(0, Ordering::Relaxed);
                s.net_input_bytes.store(0, Ordering::Relaxed);
                s.net_output_bytes.store(0, Ordering::Relaxed);
                self.ok();
            }
            "rewrite" if args.len() == 2 => self.error("ERR The server is running without a config file"),
            "get" | "set" | "resetstat" | "rewrite" => {
                let text = format!("ERR wrong number of arguments for 'config|{sub}' command");
                self.error(&text);
            }
            _ => {
                let text = format!("ERR unknown subcommand '{}'. Try CONFIG HELP.", String::from_utf8_lossy(&args[1]));
                self.error(&text);
            }
        }
    }

    fn shutdown(&mut self, args: &[Vec<u8>]) {
        for a in &args[1..] {
            let a = a.to_ascii_lowercase();
            if a == b"abort" {
                return self.error("ERR No shutdown in progress.");
            }
            if !matches!(a.as_slice(), b"nosave" | b"save" | b"now" | b"force") {
                return self.error("ERR syntax error");
            }
        }
        // Everything acknowledged so far becomes durable whatever the
        // option: the store has no separate snapshot to skip.
        if let Err(e) = self.shared.db.flush() {
            eprintln!("bitsled serve: SHUTDOWN: flush failed: {e}");
            return self.error("ERR Errors trying to SHUTDOWN. Check logs.");
        }
        self.shared.begin_shutdown();
        // Like Redis, no reply: the connection closes.
        self.close = true;
    }
}

/// Compares without an early exit on the first differing byte.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for (i, &x) in a.iter().enumerate() {
        diff |= x ^ b.get(i % b.len().max(1)).copied().unwrap_or(0);
    }
    diff == 0
}
