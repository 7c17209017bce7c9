//! MIGRATE: moves keys to another server (Redis or bitsled) with DUMP
//! payloads and RESTORE, as Redis 7.0 does:
//!
//! ```text
//! MIGRATE host port key|"" destination-db timeout [COPY] [REPLACE]
//!         [AUTH password | AUTH2 username password] [KEYS key [key ...]]
//! ```
//!
//! One connection per call (Redis caches them for 10 s; bitsled does not).
//! The requests (AUTH, SELECT, one RESTORE per existing key, with its
//! remaining time to live and REPLACE if asked) go out in one write, then
//! the replies are read in order; each key whose RESTORE succeeded is
//! deleted here unless COPY. `timeout` (milliseconds, 1000 if not
//! positive) bounds the connection and each read and write.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use super::args::{int, is, ERR_SYNTAX};
use super::dump::serialize_for_transfer;
use super::{CmdResult, Fail, Reply};
use bitsled::{Db, Expiry};

/// What a MIGRATE call asks for.
struct Request<'a> {
    host: &'a [u8],
    port: &'a [u8],
    db: i64,
    timeout: Duration,
    copy: bool,
    replace: bool,
    /// (username, password).
    auth: Option<(Option<&'a [u8]>, &'a [u8])>,
    keys: &'a [Vec<u8>],
}

fn parse(a: &[Vec<u8>]) -> Result<Request<'_>, Fail> {
    let mut r = Request {
        host: &a[1],
        port: &a[2],
        db: 0,
        timeout: Duration::ZERO,
        copy: false,
        replace: false,
        auth: None,
        keys: &a[3..4],
    };
    let mut j = 6;
    while j < a.len() {
        let left = a.len() - j - 1;
        if is(&a[j], "copy") {
            r.copy = true;
        } else if is(&a[j], "replace") {
            r.replace = true;
        } else if is(&a[j], "auth") {
            if left < 1 {
                return Err(Fail::new(ERR_SYNTAX));
            }
            r.auth = Some((None, &a[j + 1]));
            j += 1;
        } else if is(&a[j], "auth2") {
            if left < 2 {
                return Err(Fail::new(ERR_SYNTAX));
            }
            r.auth = Some((Some(&a[j + 1]), &a[j + 2]));
            j += 2;
        } else if is(&a[j], "keys") {
            if !a[3].is_empty() {
                return Err(Fail::new(
                    "ERR When using MIGRATE KEYS option, the key argument must be set to the empty string",
                ));
            }
            r.keys = &a[j + 1..];
            break;
        } else {
            return Err(Fail::new(ERR_SYNTAX));
        }
        j += 1;
    }
    let timeout = int(&a[5])?;
    r.db = int(&a[4])?;
    r.timeout = Duration::from_millis(u64::try_from(timeout).ok().filter(|&t| t > 0).unwrap_or(1000));
    Ok(r)
}

/// Appends one request in RESP to `out`.
pub(crate) fn put_request(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Longest reply line read from the target.
const MAX_LINE: u64 = 64 * 1024;

/// Reads one reply to AUTH, SELECT or RESTORE: `Ok(())` for a status,
/// `Err(text)` for an error (the text after `-`). Anything else (a line too
/// long or cut, another reply kind) is a protocol error, as the replies to
/// those commands are only ever statuses and errors.
pub(crate) fn read_reply(r: &mut impl BufRead) -> std::io::Result<Result<(), String>> {
    read_reply_of(r, false)
}

/// [`read_reply`], with integer replies taken as success too when
/// `integers` (a slot migration's DEL, SETRANGE and PEXPIRE answer so).
pub(crate) fn read_reply_of(r: &mut impl BufRead, integers: bool) -> std::io::Result<Result<(), String>> {
    let mut line = Vec::new();
    r.by_ref().take(MAX_LINE).read_until(b'\n', &mut line)?;
    let bad = || std::io::Error::from(std::io::ErrorKind::InvalidData);
    if line.len() < 3 || !line.ends_with(b"\r\n") {
        return Err(bad());
    }
    let body = &line[1..line.len() - 2];
    match line[0] {
        b'+' => Ok(Ok(())),
        b':' if integers => Ok(Ok(())),
        b'-' => Ok(Err(String::from_utf8_lossy(body).into_owned())),
        _ => Err(bad()),
    }
}

/// What RESTORE needs to recreate `key` elsewhere: its DUMP payload and
/// its remaining time to live in milliseconds (0: none), as of `now`;
/// `None` if it does not exist (or has expired).
///
/// # Errors
/// Keys other than strings (a Bloom filter has no DUMP payload here), and
/// the store's errors.
pub(crate) fn restore_payload(db: &Db, key: &[u8], now: u64) -> Result<Option<(Vec<u8>, u64)>, Fail> {
    match db.key_type(key)? {
        "none" => return Ok(None),
        "string" => {}
        other => return Err(Fail::new(format!("ERR MIGRATE of a {other} value is not supported"))),
    }
    let ttl = match db.expiry(key)? {
        Expiry::Missing => return Ok(None),
        Expiry::Never => 0,
        Expiry::At(at) if at <= now => return Ok(None),
        Expiry::At(at) => at - now,
    };
    Ok(db.get(key)?.map(|value| (serialize_for_transfer(&value), ttl)))
}

/// `MIGRATE ...` (see the module).
pub(crate) fn migrate(db: &Db, a: &[Vec<u8>]) -> CmdResult {
    let req = parse(a)?;
    // The keys that exist, with their payloads and times to live.
    let now = db.now_ms();
    // Other clients run meanwhile: a key written after it was read here is
    // not deleted once the target has the older value.
    let keys: Vec<&[u8]> = req.keys.iter().map(Vec::as_slice).collect();
    let watch = db.watch(&keys)?;
    let mut moving: Vec<(&[u8], Vec<u8>, u64)> = Vec::new();
    for key in req.keys {
        if let Some((payload, ttl)) = restore_payload(db, key, now)? {
            moving.push((key, payload, ttl));
        }
    }
    if moving.is_empty() {
        return Ok(Reply::Status("NOKEY".into()));
    }
    let connect_error = || Fail::new("IOERR error or timeout connecting to the client");
    let host = String::from_utf8_lossy(req.host).into_owned();
    let port: u16 = std::str::from_utf8(req.port).ok().and_then(|p| p.parse().ok()).ok_or_else(connect_error)?;
    let addr = (host.as_str(), port).to_socket_addrs().ok().and_then(|mut it| it.next()).ok_or_else(connect_error)?;
    let write_error = || Fail::new("IOERR error or timeout writing to target instance");
    let mut stream = TcpStream::connect_timeout(&addr, req.timeout).map_err(|e| {
        // Redis connects without blocking and learns of a refusal when it
        // writes; only a timeout is a failure to connect.
        if e.kind() == std::io::ErrorKind::ConnectionRefused {
            write_error()
        } else {
            connect_error()
        }
    })?;
    let _ = stream.set_nodelay(true);
    stream
        .set_read_timeout(Some(req.timeout))
        .and_then(|()| stream.set_write_timeout(Some(req.timeout)))
        .map_err(|_| connect_error())?;
    let mut out = Vec::new();
    if let Some((user, pass)) = req.auth {
        match user {
            Some(u) => put_request(&mut out, &[b"AUTH", u, pass]),
            None => put_request(&mut out, &[b"AUTH", pass]),
        }
    }
    let db_text = req.db.to_string();
    put_request(&mut out, &[b"SELECT", db_text.as_bytes()]);
    for (key, payload, ttl) in &moving {
        let ttl = ttl.to_string();
        let mut args: Vec<&[u8]> = vec![b"RESTORE", key, ttl.as_bytes(), payload];
        if req.replace {
            args.push(b"REPLACE");
        }
        put_request(&mut out, &args);
    }
    stream.write_all(&out).map_err(|_| write_error())?;
    let mut replies = BufReader::new(stream);
    let read_error = || Fail::new("IOERR error or timeout reading to target instance");
    let target_error = |text: String| Fail(format!("ERR Target instance replied with error: {text}").into_bytes());
    if req.auth.is_some() {
        read_reply(&mut replies).map_err(|_| read_error())?.map_err(target_error)?;
    }
    read_reply(&mut replies).map_err(|_| read_error())?.map_err(target_error)?;
    let mut failed = None;
    let mut moved = Vec::new();
    for (key, _, _) in &moving {
        match read_reply(&mut replies).map_err(|_| read_error())? {
            Ok(()) => moved.push(*key),
            Err(text) => failed = failed.or(Some(text)),
        }
    }
    if !req.copy && !watch.changed() {
        for key in moved {
            db.delete(key)?;
        }
    }
    match failed {
        Some(text) => Err(target_error(text)),
        None => Ok(Reply::ok()),
    }
}

/// The keys of a MIGRATE call (`a`, its name first), as Redis's
/// `migrateGetKeys` finds them: the keys after a KEYS option (looked for
/// after the fixed arguments), else the third argument; none for a KEYS
/// option with a key argument that is not empty.
pub(crate) fn key_positions(a: &[Vec<u8>]) -> Vec<usize> {
    let keys_at = (6..a.len()).find(|&j| is(&a[j], "keys"));
    match keys_at {
        Some(_) if !a[3].is_empty() => Vec::new(),
        Some(j) => (j + 1..a.len()).collect(),
        None => vec![3],
    }
}
