//! The command-line syntax of `redis-cli`: one command per line, arguments
//! separated by blanks, `"..."` with backslash escapes and `'...'` literal.
//!
//! This follows Redis's `sdssplitargs` byte for byte, so a script written
//! for `redis-cli` splits into the same arguments here.

/// Splits one line into arguments like `redis-cli` does, or returns `None`
/// for unbalanced quotes or a closing quote followed by something other
/// than a blank (`redis-cli` then prints `Invalid argument(s)`).
///
/// Inside `"..."`: `\xHH` (two hex digits) is that byte; `\n \r \t \b \a`
/// are control characters; a backslash before any other character gives
/// that character. Inside `'...'`: only `\'` is an escape. Outside quotes,
/// an argument ends at a space, tab, CR or LF, and a quote opens a quoted
/// part of the same argument. A NUL byte ends the line, as in C.
///
/// ```
/// use bitsled_redis::command::cli_syntax::split_args;
/// let args = split_args(br#"SET "a b\x00" 'it\'s' plain"#).unwrap();
/// assert_eq!(args, vec![b"SET".to_vec(), b"a b\0".to_vec(), b"it's".to_vec(), b"plain".to_vec()]);
/// assert_eq!(split_args(b"GET \"open"), None);
/// ```
#[must_use]
pub fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    // C string semantics: the line ends at the first NUL.
    let line = &line[..line.iter().position(|&c| c == 0).unwrap_or(line.len())];
    let at = |i: usize| line.get(i).copied().unwrap_or(0);
    let mut args = Vec::new();
    let mut p = 0usize;
    loop {
        while p < line.len() && is_c_space(line[p]) {
            p += 1;
        }
        if p >= line.len() {
            return Some(args);
        }
        let mut current = Vec::new();
        let (mut in_double, mut in_single) = (false, false);
        loop {
            let c = at(p);
            if in_double {
                if c == b'\\' && at(p + 1) == b'x' && hex(at(p + 2)).is_some() && hex(at(p + 3)).is_some() {
                    let (hi, lo) = (hex(at(p + 2)).unwrap_or(0), hex(at(p + 3)).unwrap_or(0));
                    current.push(hi * 16 + lo);
                    p += 3;
                } else if c == b'\\' && at(p + 1) != 0 {
                    p += 1;
                    current.push(match at(p) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                } else if c == b'"' {
                    if at(p + 1) != 0 && !is_c_space(at(p + 1)) {
                        return None;
                    }
                    p += 1;
                    break;
                } else if c == 0 {
                    return None;
                } else {
                    current.push(c);
                }
            } else if in_single {
                if c == b'\\' && at(p + 1) == b'\'' {
                    p += 1;
                    current.push(b'\'');
                } else if c == b'\'' {
                    if at(p + 1) != 0 && !is_c_space(at(p + 1)) {
                        return None;
                    }
                    p += 1;
                    break;
                } else if c == 0 {
                    return None;
                } else {
                    current.push(c);
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => {
                        if c != 0 {
                            p += 1;
                        }
                        break;
                    }
                    b'"' => in_double = true,
                    b'\'' => in_single = true,
                    other => current.push(other),
                }
            }
            p += 1;
        }
        args.push(current);
    }
}

/// C's `isspace` in the C locale.
fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn hex(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(s: &[u8]) -> Option<Vec<String>> {
        split_args(s).map(|v| v.into_iter().map(|a| String::from_utf8_lossy(&a).into_owned()).collect())
    }

    /// Blanks separate arguments; runs of blanks and leading/trailing blanks
    /// produce no empty arguments.
    #[test]
    fn plain_words() {
        assert_eq!(split(b"  SET\tk  v \r\n"), Some(vec!["SET".into(), "k".into(), "v".into()]));
        assert_eq!(split(b""), Some(vec![]));
        assert_eq!(split(b"   "), Some(vec![]));
    }

    /// Every escape of `sdssplitargs` inside double quotes.
    #[test]
    fn double_quote_escapes() {
        let a = split_args(br#""\x41\x7f\xFF\n\r\t\b\a\\\"\q""#).unwrap();
        assert_eq!(a, vec![b"A\x7f\xff\n\r\t\x08\x07\\\"q".to_vec()]);
        // An incomplete \x escape is a plain escaped 'x'.
        assert_eq!(split_args(br#""\x4""#).unwrap(), vec![b"x4".to_vec()]);
        assert_eq!(split_args(br#""""#).unwrap(), vec![Vec::<u8>::new()]);
    }

    /// Single quotes are literal except for `\'`.
    #[test]
    fn single_quotes() {
        assert_eq!(split_args(br"'a\nb\'c'").unwrap(), vec![br"a\nb'c".to_vec()]);
    }

    /// A quote may open in the middle of an argument; a closing quote must be
    /// followed by a blank or the end; unterminated quotes are errors.
    #[test]
    fn quote_rules() {
        assert_eq!(split(b"ab\"c d\" e"), Some(vec!["abc d".into(), "e".into()]));
        assert_eq!(split(b"\"a\"b"), None);
        assert_eq!(split(b"'a'b"), None);
        assert_eq!(split(b"\"abc"), None);
        assert_eq!(split(b"'abc"), None);
        assert_eq!(split(b"\"abc\\"), None);
    }

    /// A NUL byte ends the line.
    #[test]
    fn nul_ends_the_line() {
        assert_eq!(split(b"a b\0c d"), Some(vec!["a".into(), "b".into()]));
    }
}
