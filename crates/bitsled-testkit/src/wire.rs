//! Reading a server's replies off a socket, for the tests that speak to
//! `bitsled serve` (in-process or the binary) byte by byte.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{Ipv4Addr, TcpStream};

/// A command line split at single spaces into its arguments (the
/// differential tests' way of writing a call).
#[must_use]
pub fn words(line: &str) -> Vec<Vec<u8>> {
    line.split(' ').map(|w| w.as_bytes().to_vec()).collect()
}

/// Reads until the server closes the connection: everything received, and
/// whether it was closed (false if the read timeout ran out first). A reset
/// connection counts as closed.
pub fn read_to_close(s: &mut TcpStream) -> (Vec<u8>, bool) {
    let mut got = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => return (got, true),
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => return (got, false),
            Err(_) => return (got, true),
        }
    }
}

/// Sends `request` (the server may close before taking all of it) and
/// reads as [`read_to_close`] does.
pub fn send_and_read_to_close(s: &mut TcpStream, request: &[u8]) -> (Vec<u8>, bool) {
    let _ = s.write_all(request);
    read_to_close(s)
}

/// Reads exactly `n` bytes.
///
/// # Panics
/// If the connection ends or times out first.
pub fn read_exact(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut v = vec![0; n];
    s.read_exact(&mut v).expect("read reply");
    v
}

/// Sends `request` and reads exactly `want.len()` bytes, which must be
/// `want`.
///
/// # Panics
/// If they differ, or the connection ends or times out first.
pub fn expect(s: &mut TcpStream, request: &[u8], want: &[u8]) {
    s.write_all(request).expect("write");
    let mut got = vec![0; want.len()];
    s.read_exact(&mut got).unwrap_or_else(|e| panic!("reading {:?}: {e}", String::from_utf8_lossy(want)));
    assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(want));
}

/// Reads one whole RESP2 reply (nested arrays included) from `r` and
/// appends its exact bytes to `out`.
///
/// # Panics
/// If the connection ends first or a length line does not parse.
pub fn read_reply(r: &mut impl BufRead, out: &mut Vec<u8>) {
    let start = out.len();
    r.read_until(b'\n', out).expect("read a reply line");
    let line = &out[start..];
    assert!(line.ends_with(b"\r\n"), "the connection closed or sent {line:?}");
    let kind = line[0];
    let number = std::str::from_utf8(&line[1..line.len() - 2]).ok().and_then(|s| s.parse::<i64>().ok());
    match kind {
        b'$' => {
            if let Ok(n) = usize::try_from(number.expect("RESP length")) {
                let at = out.len();
                out.resize(at + n + 2, 0);
                r.read_exact(&mut out[at..]).expect("read a bulk string");
            }
        }
        b'*' => {
            for _ in 0..number.expect("RESP length").max(0) {
                read_reply(r, out);
            }
        }
        _ => {}
    }
}

/// One connection to a RESP server on a loopback port, for tests that
/// compare raw replies.
pub struct Client {
    stream: BufReader<TcpStream>,
}

impl Client {
    /// Connects to `port` on 127.0.0.1.
    ///
    /// # Panics
    /// If the connection is refused.
    #[must_use]
    pub fn connect(port: u16) -> Client {
        let stream = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        Client { stream: BufReader::new(stream) }
    }

    /// Sends `args` as one command and returns the reply's exact RESP2
    /// bytes.
    ///
    /// # Panics
    /// If the connection fails.
    pub fn call(&mut self, args: &[Vec<u8>]) -> Vec<u8> {
        let mut request = format!("*{}\r\n", args.len()).into_bytes();
        for a in args {
            request.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
            request.extend_from_slice(a);
            request.extend_from_slice(b"\r\n");
        }
        self.stream.get_mut().write_all(&request).expect("write");
        let mut out = Vec::new();
        read_reply(&mut self.stream, &mut out);
        out
    }
}
