//! Keyspace notifications: the event classes of `notify-keyspace-events`
//! (Redis's flag letters, parsed and printed as Redis does), and the
//! events a data command raises while it runs.
//!
//! A data handler sees only the database, so it raises its events with
//! [`emit`] into a per-thread list that [`collect`] sets up around the
//! handler when notifications are on (and that costs one thread-local read
//! when they are off); the dispatcher then hands them to the server, which
//! publishes `__keyspace@<db>__:<key>` and `__keyevent@<db>__:<event>`
//! messages for the classes enabled.

use std::cell::RefCell;

/// `K`: keyspace events (`__keyspace@<db>__:<key>`).
pub(crate) const KEYSPACE: u32 = 1 << 0;
/// `E`: keyevent events (`__keyevent@<db>__:<event>`).
pub(crate) const KEYEVENT: u32 = 1 << 1;
/// `g`: generic commands (DEL, EXPIRE, RENAME, ...).
pub(crate) const GENERIC: u32 = 1 << 2;
/// `$`: string commands (bitmaps and HyperLogLogs are strings).
pub(crate) const STRING: u32 = 1 << 3;
const LIST: u32 = 1 << 4;
const SET: u32 = 1 << 5;
const HASH: u32 = 1 << 6;
const ZSET: u32 = 1 << 7;
/// `x`: keys deleted because they expired.
pub(crate) const EXPIRED: u32 = 1 << 8;
/// `e`: keys evicted for maxmemory.
pub(crate) const EVICTED: u32 = 1 << 9;
const STREAM: u32 = 1 << 10;
const KEY_MISS: u32 = 1 << 11;
/// `d`: module types (RedisBloom's).
pub(crate) const MODULE: u32 = 1 << 12;
/// `n`: keys created.
pub(crate) const NEW: u32 = 1 << 13;
/// `A`: every class but `n` and `m`.
const ALL: u32 = GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

/// The classes of a `notify-keyspace-events` value, or `None` for a letter
/// Redis does not know.
pub(crate) fn parse_flags(text: &[u8]) -> Option<u32> {
    text.iter().try_fold(0, |flags, &c| {
        Some(
            flags
                | match c {
                    b'A' => ALL,
                    b'g' => GENERIC,
                    b'$' => STRING,
                    b'l' => LIST,
                    b's' => SET,
                    b'h' => HASH,
                    b'z' => ZSET,
                    b'x' => EXPIRED,
                    b'e' => EVICTED,
                    b'K' => KEYSPACE,
                    b'E' => KEYEVENT,
                    b't' => STREAM,
                    b'm' => KEY_MISS,
                    b'd' => MODULE,
                    b'n' => NEW,
                    _ => return None,
                },
        )
    })
}

/// `flags` as CONFIG GET prints them (Redis's order; `A` for all of it).
pub(crate) fn format_flags(flags: u32) -> String {
    let mut out = String::new();
    if flags & ALL == ALL {
        out.push('A');
    } else {
        for (bit, c) in [
            (GENERIC, 'g'),
            (STRING, '$'),
            (LIST, 'l'),
            (SET, 's'),
            (HASH, 'h'),
            (ZSET, 'z'),
            (EXPIRED, 'x'),
            (EVICTED, 'e'),
            (STREAM, 't'),
            (MODULE, 'd'),
            (NEW, 'n'),
        ] {
            if flags & bit != 0 {
                out.push(c);
            }
        }
    }
    for (bit, c) in [(KEYSPACE, 'K'), (KEYEVENT, 'E'), (KEY_MISS, 'm')] {
        if flags & bit != 0 {
            out.push(c);
        }
    }
    out
}

/// One event a command raised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Event {
    /// Its class (one of the class bits).
    pub(crate) class: u32,
    /// Its name (`set`, `del`, `expire`, ...).
    pub(crate) name: &'static str,
    /// The key.
    pub(crate) key: Vec<u8>,
    /// The database, if not the command's own (MOVE's and COPY's target).
    pub(crate) db: Option<u32>,
}

thread_local! {
    static EVENTS: RefCell<Option<Vec<Event>>> = const { RefCell::new(None) };
}

/// Raises event `name` of `class` on `key` (of the command's database),
/// if events are being collected on this thread.
pub(crate) fn emit(class: u32, name: &'static str, key: &[u8]) {
    emit_in(class, name, key, None);
}

/// [`emit`] on `key` of database `db`.
pub(crate) fn emit_in(class: u32, name: &'static str, key: &[u8], db: Option<u32>) {
    EVENTS.with(|e| {
        if let Some(list) = e.borrow_mut().as_mut() {
            list.push(Event { class, name, key: key.to_vec(), db });
        }
    });
}

/// Whether events are being collected on this thread (a handler may skip
/// a lookup it needs only for an event).
pub(crate) fn collecting() -> bool {
    EVENTS.with(|e| e.borrow().is_some())
}

/// Runs `f`, collecting the events it raises.
pub(crate) fn collect<R>(f: impl FnOnce() -> R) -> (R, Vec<Event>) {
    let outer = EVENTS.with(|e| e.borrow_mut().replace(Vec::new()));
    let r = f();
    let events = EVENTS.with(|e| std::mem::replace(&mut *e.borrow_mut(), outer)).unwrap_or_default();
    (r, events)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invariant: flags print as Redis prints them, whatever order they
    /// were given in (the cases of Redis's own CONFIG GET/SET test).
    #[test]
    fn flags_round_trip_as_redis_prints_them() {
        let show = |t: &str| format_flags(parse_flags(t.as_bytes()).unwrap());
        assert_eq!(show("gKE"), "gKE");
        assert_eq!(show("$lshzxeKE"), "$lshzxeKE");
        assert_eq!(show("KA"), "AK");
        assert_eq!(show("EA"), "AE");
        assert_eq!(show("Exn"), "xnE");
        assert_eq!(show(""), "");
        assert!(parse_flags(b"Kq").is_none());
    }

    /// Invariant: events are collected only inside `collect`, and a nested
    /// collection does not lose the outer one's events.
    #[test]
    fn events_are_collected_only_when_asked() {
        emit(STRING, "set", b"ignored");
        let ((), outer) = collect(|| {
            emit(STRING, "set", b"a");
            let ((), inner) = collect(|| emit(GENERIC, "del", b"b"));
            assert_eq!(inner.len(), 1);
            emit(GENERIC, "expire", b"a");
        });
        let names: Vec<&str> = outer.iter().map(|e| e.name).collect();
        assert_eq!(names, ["set", "expire"]);
    }
}
