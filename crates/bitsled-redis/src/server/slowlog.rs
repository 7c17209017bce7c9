//! The slow log (SLOWLOG): commands whose execution took at least
//! `slowlog-log-slower-than` microseconds, newest first, at most
//! `slowlog-max-len` of them. Entries are made as Redis 7.0 makes them: an
//! id counting up from 0, the Unix time in seconds, the duration, the
//! arguments (at most 32, each cut at 128 bytes, passwords redacted), the
//! client's address and name.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use crate::command::{self, Reply};

/// Redis's default `slowlog-log-slower-than`, microseconds.
pub const DEFAULT_SLOWER_THAN_USEC: i64 = 10_000;
/// Redis's default `slowlog-max-len`.
pub const DEFAULT_MAX_LEN: u64 = 128;
/// Arguments kept per entry; past it the last one says how many more.
const MAX_ARGS: usize = 32;
/// Bytes kept per argument; past it the argument says how many more.
const MAX_ARG_BYTES: usize = 128;

/// One logged command.
struct Entry {
    id: u64,
    time_secs: u64,
    usec: u64,
    args: Vec<Vec<u8>>,
    addr: SocketAddr,
    name: Vec<u8>,
}

/// The server's slow log and its two settings.
pub(crate) struct SlowLog {
    /// Negative: log nothing.
    slower_than_usec: AtomicI64,
    max_len: AtomicU64,
    /// `slowlog-max-len` changed since the log was last cut to it.
    trim: AtomicBool,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Newest first.
    entries: VecDeque<Entry>,
    next_id: u64,
}

impl SlowLog {
    /// An empty log with these settings.
    pub(crate) fn new(slower_than_usec: i64, max_len: u64) -> SlowLog {
        SlowLog {
            slower_than_usec: AtomicI64::new(slower_than_usec),
            max_len: AtomicU64::new(max_len),
            trim: AtomicBool::new(false),
            inner: Mutex::new(Inner::default()),
        }
    }

    /// `slowlog-log-slower-than`.
    pub(crate) fn slower_than_usec(&self) -> i64 {
        self.slower_than_usec.load(Ordering::Relaxed)
    }

    /// `slowlog-max-len`.
    pub(crate) fn max_len(&self) -> u64 {
        self.max_len.load(Ordering::Relaxed)
    }

    pub(crate) fn set_slower_than_usec(&self, usec: i64) {
        self.slower_than_usec.store(usec, Ordering::Relaxed);
    }

    /// Sets `slowlog-max-len`; older entries past it go after the next
    /// command (this CONFIG SET itself, as a rule), as in Redis.
    pub(crate) fn set_max_len(&self, n: u64) {
        self.max_len.store(n, Ordering::Relaxed);
        self.trim.store(true, Ordering::Relaxed);
    }

    /// Called after every command (EXEC excepted) as Redis's
    /// `slowlogPushEntryIfNeeded`: unless logging is off, logs the command
    /// `args` if its `usec` microseconds reach the threshold, then cuts the
    /// log to `slowlog-max-len`.
    pub(crate) fn record(&self, args: &[Vec<u8>], usec: u64, addr: SocketAddr, name: &[u8]) {
        let Ok(threshold) = u64::try_from(self.slower_than_usec()) else { return };
        let logged = usec >= threshold;
        if !logged && !self.trim.load(Ordering::Relaxed) {
            return;
        }
        let entry = logged.then(|| Entry {
            id: 0,
            time_secs: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
            usec,
            args: entry_args(args),
            addr,
            name: name.to_vec(),
        });
        let mut inner = self.inner.lock();
        self.trim.store(false, Ordering::Relaxed);
        if let Some(mut e) = entry {
            e.id = inner.next_id;
            inner.next_id += 1;
            inner.entries.push_front(e);
        }
        inner.entries.truncate(usize::try_from(self.max_len()).unwrap_or(usize::MAX));
    }

    /// `SLOWLOG LEN`.
    pub(crate) fn len(&self) -> usize {
        self.inner.lock().entries.len()
    }

    /// `SLOWLOG RESET` (ids keep counting).
    pub(crate) fn reset(&self) {
        self.inner.lock().entries.clear();
    }

    /// `SLOWLOG GET`: the newest `count` entries (`None`: all).
    pub(crate) fn get(&self, count: Option<usize>) -> Reply {
        let inner = self.inner.lock();
        let int = |n: u64| Reply::Integer(i64::try_from(n).unwrap_or(i64::MAX));
        let entries = inner.entries.iter().take(count.unwrap_or(usize::MAX)).map(|e| {
            Reply::Array(vec![
                int(e.id),
                int(e.time_secs),
                int(e.usec),
                Reply::Array(e.args.iter().map(|a| Reply::Bulk(Some(a.clone()))).collect()),
                Reply::bulk(e.addr.to_string()),
                Reply::Bulk(Some(e.name.clone())),
            ])
        });
        Reply::Array(entries.collect())
    }
}

/// The arguments an entry keeps: passwords redacted; at most 32, the last
/// of them `... (N more arguments)` when there are more; each at most 128
/// bytes, followed by `... (N more bytes)` when cut.
fn entry_args(args: &[Vec<u8>]) -> Vec<Vec<u8>> {
    // Which arguments are secret is the command table's to say.
    let redacted = command::secret_args(args);
    let kept = args.len().min(MAX_ARGS);
    (0..kept)
        .map(|j| {
            if kept != args.len() && j == kept - 1 {
                return format!("... ({} more arguments)", args.len() - kept + 1).into_bytes();
            }
            if redacted.contains(&j) {
                return b"(redacted)".to_vec();
            }
            let a = &args[j];
            if a.len() > MAX_ARG_BYTES {
                let mut cut = a[..MAX_ARG_BYTES].to_vec();
                cut.extend_from_slice(format!("... ({} more bytes)", a.len() - MAX_ARG_BYTES).as_bytes());
                cut
            } else {
                a.clone()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<Vec<u8>> {
        list.iter().map(|a| a.as_bytes().to_vec()).collect()
    }

    /// Long argument lists keep 31 arguments and a count of the rest;
    /// long arguments keep 128 bytes and a count of the rest.
    #[test]
    fn entries_are_cut_as_redis_cuts_them() {
        let many: Vec<Vec<u8>> = (0..40).map(|i| i.to_string().into_bytes()).collect();
        let kept = entry_args(&many);
        assert_eq!(kept.len(), 32);
        assert_eq!(kept[30], b"30");
        assert_eq!(kept[31], b"... (9 more arguments)");
        let long = vec![b"SET".to_vec(), b"k".to_vec(), vec![b'x'; 200]];
        let kept = entry_args(&long);
        assert_eq!(kept[2], [vec![b'x'; 128], b"... (72 more bytes)".to_vec()].concat());
        assert_eq!(entry_args(&args(&["GET", "k"])), args(&["GET", "k"]));
    }

    /// AUTH's arguments and HELLO's credentials never reach the log.
    #[test]
    fn passwords_are_redacted() {
        assert_eq!(entry_args(&args(&["AUTH", "user", "secret"])), args(&["AUTH", "(redacted)", "(redacted)"]));
        assert_eq!(
            entry_args(&args(&["HELLO", "3", "SETNAME", "auth", "AUTH", "default", "secret"])),
            args(&["HELLO", "3", "SETNAME", "auth", "AUTH", "(redacted)", "(redacted)"])
        );
        assert_eq!(entry_args(&args(&["HELLO", "3", "SETNAME", "x"])), args(&["HELLO", "3", "SETNAME", "x"]));
        assert_eq!(
            entry_args(&args(&["CONFIG", "SET", "RequirePass", "pw", "masterauth", "pw2", "port", "1"])),
            args(&["CONFIG", "SET", "RequirePass", "(redacted)", "masterauth", "(redacted)", "port", "1"])
        );
        // An odd count is a syntax error before Redis redacts anything.
        assert_eq!(entry_args(&args(&["CONFIG", "SET", "requirepass", "pw", "x"]))[3], b"pw");
    }

    /// The threshold and the length limit: a negative threshold logs
    /// nothing, the newest entry comes first and ids count up.
    #[test]
    fn threshold_and_length() {
        let log = SlowLog::new(DEFAULT_SLOWER_THAN_USEC, DEFAULT_MAX_LEN);
        let addr: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        log.record(&args(&["GET", "fast"]), 9_999, addr, b"");
        assert_eq!(log.len(), 0);
        log.set_slower_than_usec(0);
        log.set_max_len(2);
        for k in ["a", "b", "c"] {
            log.record(&args(&["GET", k]), 1, addr, b"app");
        }
        assert_eq!(log.len(), 2);
        let Reply::Array(entries) = log.get(None) else { panic!("an array") };
        let Reply::Array(newest) = &entries[0] else { panic!("an entry") };
        assert_eq!(newest[0], Reply::Integer(2));
        assert_eq!(newest[3], Reply::Array(vec![Reply::bulk("GET"), Reply::bulk("c")]));
        assert_eq!(newest[4], Reply::bulk("127.0.0.1:5000"));
        assert_eq!(newest[5], Reply::bulk("app"));
        // A shorter log is cut after the next command, logged or not.
        log.set_slower_than_usec(1000);
        log.set_max_len(1);
        assert_eq!(log.len(), 2);
        log.record(&args(&["GET", "fast"]), 1, addr, b"");
        assert_eq!(log.len(), 1);
        log.set_slower_than_usec(-1);
        log.set_max_len(0);
        log.record(&args(&["GET", "d"]), u64::MAX, addr, b"");
        assert_eq!(log.len(), 1, "logging off: nothing logged, nothing cut");
        log.reset();
        assert_eq!(log.len(), 0);
    }
}
