//! The bytes between a master and a replica after `PSYNC`: the master's
//! `+FULLRESYNC <replid> <offset>` or `+CONTINUE <replid>` line, then
//! messages `kind u8 | value u64 LE | length u32 LE | payload`; the
//! replica sends `REPLCONF ACK <offset>` as a RESP command.

use std::io::{self, BufRead, Read, Write};

/// A chunk of the snapshot's records (payload: a frame).
pub(crate) const CHUNK: u8 = 1;
/// The snapshot is over; value: the offset the replica is consistent at.
pub(crate) const END: u8 = 2;
/// A frame of the feed; value: the offset it ends at.
pub(crate) const FRAME: u8 = 3;
/// Nothing new; value: the master's offset. Sent each second.
pub(crate) const PING: u8 = 4;

/// The largest payload a replica accepts: a write-back batch is bounded
/// far below it.
const MAX_PAYLOAD: u32 = 1 << 30;

/// Writes one message.
pub(crate) fn write_msg(w: &mut impl Write, kind: u8, value: u64, payload: &[u8]) -> io::Result<()> {
    let len = u32::try_from(payload.len()).map_err(|_| io::Error::other("a replication message past 4 GiB"))?;
    let mut head = [0u8; 13];
    head[0] = kind;
    head[1..9].copy_from_slice(&value.to_le_bytes());
    head[9..13].copy_from_slice(&len.to_le_bytes());
    w.write_all(&head)?;
    w.write_all(payload)
}

/// Reads one message: its kind, value and payload.
pub(crate) fn read_msg(r: &mut impl Read) -> io::Result<(u8, u64, Vec<u8>)> {
    let mut head = [0u8; 13];
    r.read_exact(&mut head)?;
    let kind = head[0];
    let value = u64::from_le_bytes(head[1..9].try_into().unwrap_or_default());
    let len = u32::from_le_bytes(head[9..13].try_into().unwrap_or_default());
    if !(CHUNK..=PING).contains(&kind) || len > MAX_PAYLOAD {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("bad replication message (kind {kind}, {len} bytes)"),
        ));
    }
    let mut payload = vec![0; len as usize];
    r.read_exact(&mut payload)?;
    Ok((kind, value, payload))
}

/// Writes `args` as a RESP command.
pub(crate) fn write_command(w: &mut impl Write, args: &[&[u8]]) -> io::Result<()> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    w.write_all(&out)?;
    w.flush()
}

/// Reads one line (a status or error reply), without its CRLF.
pub(crate) fn read_line(r: &mut impl BufRead) -> io::Result<String> {
    let mut line = Vec::new();
    r.take(64 * 1024).read_until(b'\n', &mut line)?;
    if !line.ends_with(b"\r\n") {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the master closed the connection"));
    }
    line.truncate(line.len() - 2);
    Ok(String::from_utf8_lossy(&line).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invariant: messages read back as written; a bad kind is an error.
    #[test]
    fn messages_round_trip() {
        let mut b = Vec::new();
        write_msg(&mut b, FRAME, 77, b"abc").unwrap();
        write_msg(&mut b, PING, 9, b"").unwrap();
        let mut r = &b[..];
        assert_eq!(read_msg(&mut r).unwrap(), (FRAME, 77, b"abc".to_vec()));
        assert_eq!(read_msg(&mut r).unwrap(), (PING, 9, Vec::new()));
        assert!(read_msg(&mut r).is_err());
        let mut bad = b.clone();
        bad[0] = 9;
        assert!(read_msg(&mut &bad[..]).is_err());
    }
}
