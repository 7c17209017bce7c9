//! The RESP request parser. Replies (RESP2 and RESP3) are encoded by the
//! command layer, [`crate::command::Reply::write`].
//!
//! Requests come as multibulk arrays (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`) or
//! as inline lines (`GET k\r\n`, split with redis-cli's quoting rules), as
//! Redis accepts them. The parser is incremental: it takes whatever bytes
//! have arrived, consumes every complete element (a partly received request
//! keeps its finished arguments in the parser), and says how many bytes it
//! consumed, so nothing is parsed twice. A declared length is only a
//! number: no buffer is sized from it up front.
//!
//! Malformed input gives a [`ProtocolError`] carrying Redis's text; the
//! server replies with it and closes the connection. The parser never
//! panics on any input ([`check_parse`] is the fuzzing oracle).

use crate::command::cli_syntax::split_args;

/// Redis's `proto-max-bulk-len` default: the largest bulk argument, 512 MiB.
pub const MAX_BULK_LEN: usize = 512 << 20;

/// The largest multibulk count (arguments in one request), 1024 * 1024.
pub const MAX_MULTIBULK_LEN: usize = 1024 * 1024;

/// Redis's `PROTO_INLINE_MAX_SIZE`: the longest inline request, and the
/// longest count line of a multibulk or bulk header.
pub const MAX_INLINE_LEN: usize = 64 * 1024;

/// Before authentication, Redis accepts at most this many arguments per
/// request...
const UNAUTH_MAX_MULTIBULK: usize = 10;
/// ...and bulk arguments of at most this many bytes.
const UNAUTH_MAX_BULK: usize = 16384;

/// A malformed request. The connection that sent it gets the error's text
/// (see [`ProtocolError::text`]) and is closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtocolError {
    /// An inline request longer than [`MAX_INLINE_LEN`] without a newline.
    TooBigInline,
    /// An inline request with an unterminated quote.
    UnbalancedQuotes,
    /// A multibulk count line longer than [`MAX_INLINE_LEN`].
    TooBigMultibulkCount,
    /// A multibulk count that is not a number or above the limit.
    InvalidMultibulkLength,
    /// More than 10 arguments before authentication.
    UnauthenticatedMultibulkLength,
    /// An element of a multibulk request that does not start with `$`.
    ExpectedDollar(u8),
    /// A bulk length line longer than [`MAX_INLINE_LEN`].
    TooBigBulkCount,
    /// A bulk length that is not a number, negative, or above the limit.
    InvalidBulkLength,
    /// A bulk argument above 16 KiB before authentication.
    UnauthenticatedBulkLength,
}

impl ProtocolError {
    /// The error reply's text, as Redis 7 words it (without the leading
    /// `-` and the line end). A byte that would break the line is a space.
    #[must_use]
    pub fn text(&self) -> Vec<u8> {
        let t: &str = match self {
            ProtocolError::TooBigInline => "too big inline request",
            ProtocolError::UnbalancedQuotes => "unbalanced quotes in request",
            ProtocolError::TooBigMultibulkCount => "too big mbulk count string",
            ProtocolError::InvalidMultibulkLength => "invalid multibulk length",
            ProtocolError::UnauthenticatedMultibulkLength => "unauthenticated multibulk length",
            ProtocolError::ExpectedDollar(c) => {
                let c = if matches!(c, b'\r' | b'\n') { b' ' } else { *c };
                let mut v = b"ERR Protocol error: expected '$', got '".to_vec();
                v.push(c);
                v.push(b'\'');
                return v;
            }
            ProtocolError::TooBigBulkCount => "too big bulk count string",
            ProtocolError::InvalidBulkLength => "invalid bulk length",
            ProtocolError::UnauthenticatedBulkLength => "unauthenticated bulk length",
        };
        format!("ERR Protocol error: {t}").into_bytes()
    }
}

/// Where the parser is inside a multibulk request.
#[derive(Debug, Default)]
struct Multibulk {
    /// Arguments still to come.
    left: usize,
    /// Arguments received so far.
    args: Vec<Vec<u8>>,
    /// The declared length of the bulk being received, once its header is
    /// consumed.
    bulk_len: Option<usize>,
}

/// The incremental request parser of one connection.
#[derive(Debug, Default)]
pub struct Parser {
    partial: Option<Multibulk>,
    /// Argument buffers of requests handed back ([`Parser::recycle`]),
    /// reused for the next ones: a pipeline of small commands then
    /// allocates nothing per argument.
    spare: Vec<Vec<u8>>,
    /// The vector of a request handed back, reused likewise.
    spare_list: Vec<Vec<u8>>,
}

/// Spare argument buffers a parser keeps at most, and the largest one it
/// keeps: what a pipeline of ordinary commands reuses, and no more memory
/// held idle than that.
const SPARE_ARGS: usize = 16;
const SPARE_ARG_BYTES: usize = 256;

/// What one call of [`Parser::parse`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// A complete request (possibly with no arguments: a blank inline line
    /// or `*0`; skip those).
    Request(Vec<Vec<u8>>),
    /// More bytes are needed.
    Incomplete,
}

impl Parser {
    /// A parser at the start of a request.
    #[must_use]
    pub fn new() -> Parser {
        Parser::default()
    }

    /// Hands back a request [`Parser::parse`] returned, once it has run:
    /// its buffers serve the next requests.
    pub fn recycle(&mut self, mut args: Vec<Vec<u8>>) {
        for mut a in args.drain(..) {
            if self.spare.len() < SPARE_ARGS && a.capacity() <= SPARE_ARG_BYTES {
                a.clear();
                self.spare.push(a);
            }
        }
        if args.capacity() <= SPARE_ARGS {
            self.spare_list = args;
        }
    }

    /// A copy of `bytes` in a spare buffer if there is one.
    fn arg(&mut self, bytes: &[u8]) -> Vec<u8> {
        match self.spare.pop() {
            Some(mut a) => {
                a.extend_from_slice(bytes);
                a
            }
            None => bytes.to_vec(),
        }
    }

    /// Whether the parser holds part of a request.
    #[must_use]
    pub fn in_request(&self) -> bool {
        self.partial.is_some()
    }

    /// How many more bytes the bulk being received needs, if one is
    /// (a hint for growing the read buffer; never more than the declared
    /// length plus its line end).
    #[must_use]
    pub fn bulk_remaining(&self, buffered: usize) -> Option<usize> {
        let len = self.partial.as_ref()?.bulk_len?;
        Some((len + 2).saturating_sub(buffered))
    }

    /// Parses from `buf` (the bytes received and not yet consumed): returns
    /// the number of bytes consumed and what was found. Call again with the
    /// rest after a [`Parsed::Request`]; after [`Parsed::Incomplete`], call
    /// again once more bytes arrived (`buf` then starts with the bytes not
    /// consumed). `authenticated` false applies Redis's tighter limits for
    /// clients that still have to authenticate.
    ///
    /// # Errors
    /// A [`ProtocolError`] for malformed input; the parser's state is then
    /// unspecified (the connection is to be closed).
    pub fn parse(&mut self, buf: &[u8], authenticated: bool) -> Result<(usize, Parsed), ProtocolError> {
        let mut pos = 0;
        let mut mb = if let Some(mb) = self.partial.take() {
            mb
        } else {
            let Some(&first) = buf.first() else { return Ok((0, Parsed::Incomplete)) };
            if first != b'*' {
                return parse_inline(buf);
            }
            let Some((n, used)) = count_line(buf, ProtocolError::TooBigMultibulkCount)? else {
                return Ok((0, Parsed::Incomplete));
            };
            pos = used;
            let n = match n {
                Some(n) if n <= 0 => return Ok((pos, Parsed::Request(Vec::new()))),
                Some(n) => usize::try_from(n).ok().filter(|&n| n <= MAX_MULTIBULK_LEN),
                None => None,
            };
            let Some(n) = n else { return Err(ProtocolError::InvalidMultibulkLength) };
            if !authenticated && n > UNAUTH_MAX_MULTIBULK {
                return Err(ProtocolError::UnauthenticatedMultibulkLength);
            }
            // The count is only a claim: reserve for a few arguments.
            let mut args = std::mem::take(&mut self.spare_list);
            args.reserve(n.min(16));
            Multibulk { left: n, args, bulk_len: None }
        };
        while mb.left > 0 {
            let rest = &buf[pos..];
            let len = if let Some(len) = mb.bulk_len {
                len
            } else {
                let Some(&first) = rest.first() else { break };
                if first != b'$' {
                    return Err(ProtocolError::ExpectedDollar(first));
                }
                let Some((n, used)) = count_line(rest, ProtocolError::TooBigBulkCount)? else { break };
                let len = n
                    .and_then(|n| usize::try_from(n).ok())
                    .filter(|&n| n <= MAX_BULK_LEN)
                    .ok_or(ProtocolError::InvalidBulkLength)?;
                if !authenticated && len > UNAUTH_MAX_BULK {
                    return Err(ProtocolError::UnauthenticatedBulkLength);
                }
                pos += used;
                mb.bulk_len = Some(len);
                len
            };
            let rest = &buf[pos..];
            // Like Redis, the two bytes after the data are taken as the line
            // end without looking at them.
            if rest.len() < len + 2 {
                break;
            }
            let arg = self.arg(&rest[..len]);
            mb.args.push(arg);
            pos += len + 2;
            mb.bulk_len = None;
            mb.left -= 1;
        }
        if mb.left == 0 {
            Ok((pos, Parsed::Request(mb.args)))
        } else {
            self.partial = Some(mb);
            Ok((pos, Parsed::Incomplete))
        }
    }
}

/// An inline request: one line, split like redis-cli input.
///
/// Redis finds the line's end with `strchr`, which stops at a NUL byte: a
/// NUL before the newline means the line never ends, so the request is
/// never run (it is neither cut at the NUL nor kept whole), and the
/// connection waits until more than [`MAX_INLINE_LEN`] bytes are pending,
/// then gets `too big inline request`. This does the same.
fn parse_inline(buf: &[u8]) -> Result<(usize, Parsed), ProtocolError> {
    let Some(nl) = buf.iter().position(|&c| c == b'\n' || c == 0).filter(|&at| buf[at] == b'\n') else {
        if buf.len() > MAX_INLINE_LEN {
            return Err(ProtocolError::TooBigInline);
        }
        return Ok((0, Parsed::Incomplete));
    };
    if nl > MAX_INLINE_LEN {
        return Err(ProtocolError::TooBigInline);
    }
    let line = &buf[..nl];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let args = split_args(line).ok_or(ProtocolError::UnbalancedQuotes)?;
    Ok((nl + 1, Parsed::Request(args)))
}

/// A `*N\r\n` or `$N\r\n` header at the start of `buf`: the number (`None`
/// if it is not one) and the bytes the line takes; `Ok(None)` if the line
/// is not complete yet. Like Redis, the line ends at the first `\r`, and
/// the byte after it is taken as the `\n`.
fn count_line(buf: &[u8], too_big: ProtocolError) -> Result<Option<(Option<i64>, usize)>, ProtocolError> {
    // What clients send: a short count without sign or leading zero, read
    // in the same pass that finds the `\r`. Anything else takes the general
    // path below, which reads such a count the same way.
    let digits = buf.get(1..).unwrap_or_default();
    if let Some((&first @ b'1'..=b'9', rest)) = digits.split_first() {
        let mut n = i64::from(first - b'0');
        for (i, &c) in rest.iter().take(FAST_COUNT_DIGITS).enumerate() {
            if c.is_ascii_digit() {
                n = n * 10 + i64::from(c - b'0');
            } else if c == b'\r' {
                // `*`, the first digit, `i` more, then `\r\n`.
                let used = i + 4;
                return Ok((used <= buf.len()).then_some((Some(n), used)));
            } else {
                break;
            }
        }
    }
    count_line_general(buf, too_big)
}

/// [`count_line`] for any line: finds the `\r`, then reads the count.
fn count_line_general(buf: &[u8], too_big: ProtocolError) -> Result<Option<(Option<i64>, usize)>, ProtocolError> {
    let Some(cr) = buf.iter().take(MAX_INLINE_LEN + 1).position(|&c| c == b'\r') else {
        if buf.len() > MAX_INLINE_LEN {
            return Err(too_big);
        }
        return Ok(None);
    };
    if cr + 2 > buf.len() {
        return Ok(None);
    }
    Ok(Some((bitsled::parse_integer(&buf[1..cr]), cr + 2)))
}

/// Digits after the first of a count [`count_line`] reads in its first
/// pass: at most 18 digits in all, below 10^18, so the count cannot
/// overflow an `i64`.
const FAST_COUNT_DIGITS: usize = 17;

/// `args` as a RESP multibulk request.
#[must_use]
pub fn encode_request(args: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        crate::command::write_bulk(a, &mut out);
    }
    out
}

/// Everything a parser makes of `data` fed at once: the requests, and the
/// error that stopped it (if any). Unauthenticated limits apply when
/// `authenticated` is false.
fn parse_all(data: &[u8], chunks: &[usize], authenticated: bool) -> (Vec<Vec<Vec<u8>>>, Option<ProtocolError>) {
    let mut parser = Parser::new();
    let mut requests = Vec::new();
    let (mut buffered, mut lo) = (0usize, 0usize);
    let mut chunk_iter = chunks.iter().copied().cycle();
    loop {
        // Deliver the next chunk (the whole rest when there are no chunks).
        let step = chunk_iter.next().unwrap_or(data.len()).max(1);
        let delivered_all = buffered >= data.len();
        buffered = (buffered + step).min(data.len());
        loop {
            match parser.parse(&data[lo..buffered], authenticated) {
                Err(e) => return (requests, Some(e)),
                Ok((used, Parsed::Request(args))) => {
                    lo += used;
                    // Handed back as a connection does, so every request
                    // after the first is parsed into reused buffers.
                    requests.push(args.clone());
                    parser.recycle(args);
                }
                Ok((used, Parsed::Incomplete)) => {
                    lo += used;
                    break;
                }
            }
        }
        if delivered_all {
            return (requests, None);
        }
    }
}

/// The fuzzing oracle of the request parser; panics when a property fails.
///
/// The first byte of `data` picks the chunk sizes the rest is delivered in
/// (1 to 16 bytes, cycling, or all at once) and whether the client is
/// authenticated. Properties: parsing never panics; delivering the bytes
/// in chunks gives the same requests and the same error as delivering them
/// at once; every parsed multibulk request, encoded again, parses back to
/// the same arguments; an error's text is one line starting with
/// `ERR Protocol error: `.
#[doc(hidden)]
pub fn check_parse(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    let authenticated = mode & 0x80 == 0;
    let chunks: Vec<usize> = match mode & 0x0f {
        0 => Vec::new(),
        k => (1..=usize::from(k)).collect(),
    };
    let (whole, whole_err) = parse_all(rest, &[], authenticated);
    let (chunked, chunked_err) = parse_all(rest, &chunks, authenticated);
    assert_eq!(whole, chunked, "chunking changed the requests");
    assert_eq!(whole_err, chunked_err, "chunking changed the error");
    if let Some(e) = whole_err {
        let text = e.text();
        assert!(text.starts_with(b"ERR Protocol error: "), "{text:?}");
        assert!(!text.contains(&b'\r') && !text.contains(&b'\n'), "{text:?}");
    }
    for req in whole.iter().filter(|r| !r.is_empty()) {
        let encoded = encode_request(req);
        let (again, err) = parse_all(&encoded, &[], true);
        assert_eq!(err, None, "re-encoded request failed to parse");
        assert_eq!(again, vec![req.clone()], "re-encoded request changed");
    }
}

/// A request read ahead of the one running ([`peek_request`]).
#[derive(Debug, PartialEq, Eq)]
pub struct Peek<'a> {
    /// Its first argument (the command's name; empty if it has none).
    pub name: &'a [u8],
    /// Its second argument (a command's first key, for most commands).
    pub key: Option<&'a [u8]>,
    /// The bytes the request takes.
    pub len: usize,
}

/// The multibulk request at the start of `buf` as a look ahead reads it.
/// `None` unless the whole request (at most [`PEEK_MAX_ARGS`] arguments)
/// is in `buf`; never an error (the parser judges the request when it
/// comes to it).
#[must_use]
pub fn peek_request(buf: &[u8]) -> Option<Peek<'_>> {
    let (n, mut pos) = peek_count(buf, b'*')?;
    if n > PEEK_MAX_ARGS {
        return None;
    }
    let mut peek = Peek { name: &[], key: None, len: 0 };
    for i in 0..n {
        let (len, used) = peek_count(buf.get(pos..)?, b'$')?;
        pos += used;
        let end = pos.checked_add(len)?;
        let arg = buf.get(pos..end)?;
        if buf.get(end..end + 2)? != b"\r\n" {
            return None;
        }
        match i {
            0 => peek.name = arg,
            1 => peek.key = Some(arg),
            _ => {}
        }
        pos = end + 2;
    }
    peek.len = pos;
    Some(peek)
}

/// Arguments a look ahead walks at most ([`peek_request`]).
pub const PEEK_MAX_ARGS: usize = 16;

/// A count line `<mark><count>\r\n` at the start of `buf`, read as the
/// parser reads it ([`count_line`]): its count and the bytes it takes;
/// `None` for another mark, a line not complete, or a count that is not a
/// length.
fn peek_count(buf: &[u8], mark: u8) -> Option<(usize, usize)> {
    if buf.first() != Some(&mark) {
        return None;
    }
    let (n, used) = count_line(buf, ProtocolError::TooBigBulkCount).ok()??;
    Some((usize::try_from(n?).ok()?, used))
}

#[cfg(test)]
mod tests {
    /// Invariant: the first pass of `count_line` reads every header line
    /// exactly as the general path does: counts of every length, signs,
    /// leading zeros, junk, lines cut before their `\n` or their `\r`.
    #[test]
    fn count_line_fast_pass_matches_the_general_path() {
        let mut lines: Vec<Vec<u8>> = Vec::new();
        for body in [
            "",
            "0",
            "00",
            "01",
            "7",
            "10",
            "-1",
            "-0",
            "+5",
            "12a",
            " 3",
            "99999999999999999",
            "123456789012345678",
            "9223372036854775807",
            "9223372036854775808",
            "18446744073709551616",
        ] {
            for end in ["", "\r", "\r\n", "\r\nrest", "\n", "x\r\n"] {
                lines.push(format!("${body}{end}").into_bytes());
            }
        }
        for n in 0..2000u64 {
            lines.push(format!("*{n}\r\n").into_bytes());
        }
        for line in &lines {
            let fast = count_line(line, ProtocolError::TooBigBulkCount);
            let general = count_line_general(line, ProtocolError::TooBigBulkCount);
            assert_eq!(fast, general, "{:?}", String::from_utf8_lossy(line));
        }
    }

    use super::*;

    fn v(s: &[&str]) -> Vec<Vec<u8>> {
        s.iter().map(|x| x.as_bytes().to_vec()).collect()
    }

    fn all(data: &[u8]) -> (Vec<Vec<Vec<u8>>>, Option<ProtocolError>) {
        parse_all(data, &[], true)
    }

    /// Invariant: a look ahead finds exactly the requests the parser
    /// takes whole, with the parser's byte count and first two arguments,
    /// and nothing (never a wrong length) for a request cut short, an
    /// inline command or a long multibulk.
    #[test]
    fn peek_agrees_with_the_parser() {
        let mut data = Vec::new();
        for args in
            [v(&["SETBIT", "uid:sign:7:202611", "3", "1"]), v(&["PING"]), v(&["GET", ""]), v(&["SET", "k", "v"])]
        {
            data.extend_from_slice(&encode_request(&args));
        }
        let mut parser = Parser::new();
        let mut at = 0;
        while at < data.len() {
            let peeked = peek_request(&data[at..]);
            let (used, parsed) = parser.parse(&data[at..], true).unwrap();
            let Parsed::Request(args) = parsed else { panic!("whole requests only") };
            let want = Peek { name: &args[0], key: args.get(1).map(Vec::as_slice), len: used };
            assert_eq!(peeked, Some(want));
            for cut in 0..used {
                assert_eq!(peek_request(&data[at..at + cut]), None, "cut at {cut}");
            }
            at += used;
        }
        assert_eq!(peek_request(b"GET key\r\n"), None);
        let long: Vec<Vec<u8>> = (0..=PEEK_MAX_ARGS).map(|i| i.to_string().into_bytes()).collect();
        assert_eq!(peek_request(&encode_request(&long)), None);
        assert_eq!(peek_request(b"*2\r\n$3\r\nGET\r\n$1\r\nkXY"), None, "bad terminator");
    }

    /// Multibulk and inline requests, pipelined, parse to their arguments.
    #[test]
    fn parses_multibulk_and_inline() {
        let data = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\nset 'a b' \"\\x01\"\n\r\n*0\r\n*-1\r\n";
        let (reqs, err) = all(data);
        assert_eq!(err, None);
        assert_eq!(
            reqs,
            vec![
                v(&["GET", "k"]),
                v(&["PING"]),
                vec![b"set".to_vec(), b"a b".to_vec(), vec![1]],
                vec![],
                vec![],
                vec![]
            ]
        );
    }

    /// Reused argument buffers hold only their new bytes: requests after
    /// longer and shorter ones (one too large to keep, an empty argument)
    /// parse to exactly their arguments.
    #[test]
    fn reused_buffers_hold_only_the_new_request() {
        let long = "x".repeat(300);
        let data = format!(
            "*3\r\n$3\r\nSET\r\n$6\r\nabcdef\r\n$300\r\n{long}\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n\
             *3\r\n$3\r\nSET\r\n$2\r\nkk\r\n$0\r\n\r\n*1\r\n$4\r\nPING\r\n"
        );
        let (reqs, err) = all(data.as_bytes());
        assert_eq!(err, None);
        let first = vec![b"SET".to_vec(), b"abcdef".to_vec(), long.into_bytes()];
        assert_eq!(reqs, vec![first, v(&["GET", "k"]), v(&["SET", "kk", ""]), v(&["PING"])]);
    }

    /// Byte-at-a-time delivery gives the same requests, and a bulk's data
    /// may contain CR LF.
    #[test]
    fn incremental_delivery() {
        let data = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n*1\r\n$4\r\nPING\r\n";
        let (one, _) = all(data);
        let (bytes, err) = parse_all(data, &[1], true);
        assert_eq!(err, None);
        assert_eq!(one, bytes);
        assert_eq!(one[0][2], b"a\r\nb");
    }

    /// A NUL byte before an inline request's newline: the request is
    /// never complete (Redis's `strchr` stops at the NUL), so nothing is
    /// run, not even the part before the NUL; requests before it are, and
    /// more than 64 KiB pending is `too big inline request`.
    #[test]
    fn nul_in_an_inline_request_never_ends_it() {
        let (reqs, err) = all(b"SET important 1\r\nDEL important\0-suffix\r\nEXISTS important\r\n");
        assert_eq!((reqs, err), (vec![v(&["SET", "important", "1"])], None));
        assert_eq!(all(b"SET k v\0 EX 1\r\nTTL k\r\n"), (vec![], None));
        assert_eq!(all(b"\0\r\n"), (vec![], None));
        let mut long = b"DEL k\0".to_vec();
        long.extend(vec![b'\n'; MAX_INLINE_LEN]);
        assert_eq!(all(&long), (vec![], Some(ProtocolError::TooBigInline)));
        // In a bulk argument a NUL is data.
        assert_eq!(all(b"*2\r\n$4\r\nECHO\r\n$3\r\na\0b\r\n").0, vec![vec![b"ECHO".to_vec(), b"a\0b".to_vec()]]);
        check_parse(b"\x03PING\r\nGET a\0b\r\nPING\r\n");
    }

    /// Redis's protocol error texts.
    #[test]
    fn protocol_errors() {
        let err = |d: &[u8]| all(d).1.map(|e| String::from_utf8(e.text()).unwrap());
        assert_eq!(err(b"*x\r\n").as_deref(), Some("ERR Protocol error: invalid multibulk length"));
        assert_eq!(err(b"*1048577\r\n").as_deref(), Some("ERR Protocol error: invalid multibulk length"));
        assert_eq!(err(b"*1\r\n$-1\r\n").as_deref(), Some("ERR Protocol error: invalid bulk length"));
        assert_eq!(err(b"*1\r\n$536870913\r\n").as_deref(), Some("ERR Protocol error: invalid bulk length"));
        assert_eq!(err(b"*1\r\n$01\r\n").as_deref(), Some("ERR Protocol error: invalid bulk length"));
        assert_eq!(err(b"*1\r\nx\r\n").as_deref(), Some("ERR Protocol error: expected '$', got 'x'"));
        assert_eq!(err(b"get \"x\r\n").as_deref(), Some("ERR Protocol error: unbalanced quotes in request"));
        assert_eq!(err(&vec![b'a'; MAX_INLINE_LEN + 1]).as_deref(), Some("ERR Protocol error: too big inline request"));
        let mut long = b"*".to_vec();
        long.extend(vec![b'1'; MAX_INLINE_LEN + 1]);
        assert_eq!(err(&long).as_deref(), Some("ERR Protocol error: too big mbulk count string"));
        // Accepted limits: exactly the maximum counts.
        assert_eq!(err(b"*1048576\r\n"), None);
        assert_eq!(err(b"*1\r\n$536870912\r\n"), None);
    }

    /// Before authentication, at most 10 arguments of at most 16 KiB.
    #[test]
    fn unauthenticated_limits() {
        assert_eq!(parse_all(b"*11\r\n", &[], false).1, Some(ProtocolError::UnauthenticatedMultibulkLength));
        assert_eq!(parse_all(b"*1\r\n$16385\r\n", &[], false).1, Some(ProtocolError::UnauthenticatedBulkLength));
        assert_eq!(parse_all(b"*10\r\n$16384\r\n", &[], false).1, None);
    }

    /// A huge declared bulk reserves nothing up front: the parser keeps
    /// only the arguments it has received.
    #[test]
    fn declared_length_is_not_allocated() {
        let mut p = Parser::new();
        let (used, got) = p.parse(b"*2\r\n$536870912\r\nab", true).unwrap();
        assert_eq!((used, got), (16, Parsed::Incomplete));
        assert_eq!(p.bulk_remaining(2), Some(536_870_912));
        let cap = p.partial.as_ref().map(|m| m.args.capacity()).unwrap();
        assert!(cap <= 16, "{cap}");
    }

    /// The fuzz oracle holds on a few hand-picked inputs.
    #[test]
    fn oracle_on_samples() {
        for d in [
            &b"\x03*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n"[..],
            b"\x81*11\r\n",
            b"\x05*1\r\n$x\r\n",
            b"\x00\"\r\n",
            b"\x0f",
        ] {
            check_parse(d);
        }
    }
}
