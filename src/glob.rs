//! Redis-style glob patterns for key listing: `*`, `?`, `[abc]`, `[^a]`,
//! `[a-z]`, and `\` to escape the next byte. Byte-wise, case-sensitive.

/// Whether `name` matches `pattern`.
pub fn glob_match(pattern: &[u8], name: &[u8]) -> bool {
    // Backtracking only to the most recent `*` keeps this linear-ish.
    let (mut p, mut n) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while n < name.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    star = Some((p, n));
                    p += 1;
                    continue;
                }
                b'?' => {
                    p += 1;
                    n += 1;
                    continue;
                }
                b'[' => {
                    if let Some((matched, next)) = class_match(pattern, p, name[n]) {
                        if matched {
                            p = next;
                            n += 1;
                            continue;
                        }
                    }
                }
                b'\\' if p + 1 < pattern.len() => {
                    if pattern[p + 1] == name[n] {
                        p += 2;
                        n += 1;
                        continue;
                    }
                }
                c => {
                    if c == name[n] {
                        p += 1;
                        n += 1;
                        continue;
                    }
                }
            }
        }
        match star {
            Some((sp, sn)) => {
                p = sp + 1;
                n = sn + 1;
                star = Some((sp, sn + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Matches byte `c` against the class starting at `pattern[at] == b'['`.
/// Returns whether it matched and the index after the class; `None` for an
/// unterminated class (Redis then treats the rest as the class).
fn class_match(pattern: &[u8], at: usize, c: u8) -> Option<(bool, usize)> {
    let mut i = at + 1;
    let negate = pattern.get(i) == Some(&b'^');
    if negate {
        i += 1;
    }
    let mut matched = false;
    loop {
        match pattern.get(i) {
            None => return Some((matched != negate, i)),
            Some(b']') => return Some((matched != negate, i + 1)),
            Some(b'\\') if i + 1 < pattern.len() => {
                matched |= pattern[i + 1] == c;
                i += 2;
            }
            Some(&lo) if pattern.get(i + 1) == Some(&b'-') && i + 2 < pattern.len() && pattern[i + 2] != b']' => {
                let hi = pattern[i + 2];
                let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
                matched |= (lo..=hi).contains(&c);
                i += 3;
            }
            Some(&x) => {
                matched |= x == c;
                i += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn redis_keys_examples() {
        // From the Redis KEYS documentation.
        for (pat, yes, no) in [
            (&b"h?llo"[..], &[&b"hello"[..], b"hallo", b"hxllo"][..], &[&b"hllo"[..], b"heello"][..]),
            (b"h*llo", &[b"hllo", b"heeeello"], &[b"hell"]),
            (b"h[ae]llo", &[b"hello", b"hallo"], &[b"hillo"]),
            (b"h[^e]llo", &[b"hallo", b"hbllo"], &[b"hello"]),
            (b"h[a-b]llo", &[b"hallo", b"hbllo"], &[b"hcllo"]),
            (b"*", &[b"", b"anything"], &[]),
            (b"checkin:2026*", &[b"checkin:20260101"], &[b"checkin:2025", b"x"]),
            (b"a\\*b", &[b"a*b"], &[b"axb"]),
        ] {
            for y in yes {
                assert!(glob_match(pat, y), "{pat:?} should match {y:?}");
            }
            for n in no {
                assert!(!glob_match(pat, n), "{pat:?} should not match {n:?}");
            }
        }
    }
}
