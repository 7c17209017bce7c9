//! Replies printed as `redis-cli --no-raw` prints them (over RESP2, so maps
//! and sets print as arrays).

use std::fmt::Write as _;

use super::Reply;

/// The bytes `redis-cli --no-raw` prints for `reply`, ending with a newline.
///
/// Status text is printed as is; integers as `(integer) N`; bulk strings
/// double-quoted with `\\ \" \n \r \t \a \b` escapes and `\xhh` for any
/// other byte outside `0x20..=0x7e`; nil as `(nil)`; errors as
/// `(error) TEXT` with the error's bytes as they are; arrays one element a
/// line, numbered from 1 with indexes right-aligned to the widest, nested
/// arrays indented under their index, and `(empty array)` when empty.
///
/// ```
/// use bitsled_redis::command::{format::format_reply, Reply};
/// let r = Reply::Array(vec![Reply::Integer(1), Reply::Bulk(Some(b"a\n".to_vec())), Reply::Bulk(None)]);
/// assert_eq!(format_reply(&r), b"1) (integer) 1\n2) \"a\\n\"\n3) (nil)\n");
/// ```
#[must_use]
pub fn format_reply(reply: &Reply) -> Vec<u8> {
    let mut out = Vec::new();
    format_into(&mut out, reply, "");
    out
}

fn format_into(out: &mut Vec<u8>, reply: &Reply, prefix: &str) {
    match reply {
        Reply::Status(s) => {
            out.extend_from_slice(s.as_bytes());
            out.push(b'\n');
        }
        Reply::Error(e) => {
            out.extend_from_slice(b"(error) ");
            out.extend_from_slice(e);
            out.push(b'\n');
        }
        Reply::Integer(n) => out.extend_from_slice(format!("(integer) {n}\n").as_bytes()),
        Reply::Bool(b) => out.extend_from_slice(format!("(integer) {}\n", u8::from(*b)).as_bytes()),
        Reply::Bulk(Some(b)) => {
            let mut text = String::new();
            push_repr(&mut text, b);
            out.extend_from_slice(text.as_bytes());
            out.push(b'\n');
        }
        Reply::Bulk(None) | Reply::NilArray => out.extend_from_slice(b"(nil)\n"),
        Reply::Map(pairs) => {
            let flat: Vec<Reply> = pairs.iter().flat_map(|(k, v)| [k.clone(), v.clone()]).collect();
            format_items(out, &flat, prefix);
        }
        Reply::Array(items) | Reply::Set(items) | Reply::Push(items) => format_items(out, items, prefix),
        // Printed as redis-cli prints replies that arrive one after another.
        Reply::Several(replies) => replies.iter().for_each(|r| format_into(out, r, prefix)),
    }
}

/// An array's elements, one a line under right-aligned indexes.
fn format_items(out: &mut Vec<u8>, items: &[Reply], prefix: &str) {
    if items.is_empty() {
        out.extend_from_slice(b"(empty array)\n");
        return;
    }
    let width = items.len().to_string().len();
    let child_prefix = format!("{prefix}{}", " ".repeat(width + 2));
    for (i, item) in items.iter().enumerate() {
        let lead = if i == 0 { "" } else { prefix };
        out.extend_from_slice(format!("{lead}{:>width$}) ", i + 1).as_bytes());
        format_into(out, item, &child_prefix);
    }
}

/// Appends `bytes` quoted as Redis's `sdscatrepr` does.
pub fn push_repr(out: &mut String, bytes: &[u8]) {
    out.push('"');
    for &c in bytes {
        match c {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x07 => out.push_str("\\a"),
            0x08 => out.push_str("\\b"),
            0x20..=0x7e => out.push(char::from(c)),
            other => {
                let _ = write!(out, "\\x{other:02x}");
            }
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scalars print as redis-cli prints them (checked against redis-cli 7.0.15).
    #[test]
    fn scalars() {
        let f = |r: &Reply| String::from_utf8(format_reply(r)).unwrap();
        assert_eq!(f(&Reply::Status("OK".into())), "OK\n");
        assert_eq!(f(&Reply::Integer(-3)), "(integer) -3\n");
        assert_eq!(f(&Reply::Bulk(None)), "(nil)\n");
        assert_eq!(f(&Reply::Error("ERR syntax error".into())), "(error) ERR syntax error\n");
        let b = Reply::Bulk(Some(b"a\x00\n\"\\\x7f\xfe\t\r\x07\x08 ~".to_vec()));
        assert_eq!(f(&b), "\"a\\x00\\n\\\"\\\\\\x7f\\xfe\\t\\r\\a\\b ~\"\n");
        assert_eq!(f(&Reply::Array(vec![])), "(empty array)\n");
        assert_eq!(format_reply(&Reply::Error(b"ERR \xff".to_vec())), b"(error) ERR \xff\n", "error bytes as they are");
    }

    /// Indexes are right-aligned to the widest, as redis-cli does from 10
    /// elements on.
    #[test]
    fn wide_arrays_align_indexes() {
        let r = Reply::Array((0..10).map(Reply::Integer).collect());
        let text = String::from_utf8(format_reply(&r)).unwrap();
        assert!(text.starts_with(" 1) (integer) 0\n 2) (integer) 1\n"), "{text}");
        assert!(text.ends_with("10) (integer) 9\n"), "{text}");
    }

    /// Nested arrays continue under their parent's index.
    #[test]
    fn nested_arrays_indent() {
        let r = Reply::Array(vec![
            Reply::Array(vec![Reply::Integer(1), Reply::Integer(2)]),
            Reply::Array(vec![]),
            Reply::Bulk(Some(b"x".to_vec())),
        ]);
        assert_eq!(format_reply(&r), b"1) 1) (integer) 1\n   2) (integer) 2\n2) (empty array)\n3) \"x\"\n");
    }
}
