//! Running redis-cli-syntax lines: scripts on stdin and the REPL share it.

use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use anyhow::Result;
use bitsled::Db;
use bitsled_redis::command::cli_syntax::split_args;
use bitsled_redis::command::format::format_reply;
use bitsled_redis::command::Session;

/// What one input line asks for, following redis-cli's interactive loop.
enum Line {
    Skip,
    Quit,
    Print(&'static str),
    Run { args: Vec<Vec<u8>>, repeat: u64 },
}

/// Interprets one line as redis-cli does: `quit`/`exit` leave, a leading
/// number repeats the command, unbalanced quotes are reported.
fn interpret(line: &[u8]) -> Line {
    let Some(mut args) = split_args(line) else { return Line::Print("Invalid argument(s)\n") };
    let Some(first) = args.first() else { return Line::Skip };
    if first.eq_ignore_ascii_case(b"quit") || first.eq_ignore_ascii_case(b"exit") {
        return Line::Quit;
    }
    if args.len() > 1 {
        if let Some(n) = strtol_whole(first) {
            if n <= 0 {
                return Line::Print("Invalid redis-cli repeat command option value.\n");
            }
            args.remove(0);
            return Line::Run { args, repeat: n.unsigned_abs() };
        }
    }
    Line::Run { args, repeat: 1 }
}

/// C's `strtol(s, &end, 10)` when it consumes all of `s` (as redis-cli
/// checks for a repeat count): leading blanks, a sign, digits. An empty
/// string counts as 0, as in C; out of range is `Some(0)` (invalid).
fn strtol_whole(s: &[u8]) -> Option<i64> {
    let t = s.iter().position(|c| !c.is_ascii_whitespace()).map_or(&s[s.len()..], |i| &s[i..]);
    if t.is_empty() {
        return s.is_empty().then_some(0);
    }
    let (neg, digits) = match t[0] {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let v = std::str::from_utf8(digits).ok()?.parse::<i64>().unwrap_or(0);
    Some(if neg { -v } else { v })
}

/// Runs redis-cli-syntax lines from `input`, printing replies as
/// `redis-cli --no-raw` does (including its `(N.NNs)` line after a command
/// that took 0.5 s or more).
pub(crate) fn run_script(db: &Db, input: impl BufRead, out: &mut impl Write) -> Result<()> {
    // One session for the whole script, as redis-cli keeps one connection.
    let mut session = Session::new(db.clone());
    for line in input.split(b'\n') {
        let line = line?;
        if !run_line(&mut session, &line, out)? {
            break;
        }
    }
    Ok(())
}

/// Runs one line; returns false when the input asks to quit.
pub(crate) fn run_line(session: &mut Session, line: &[u8], out: &mut impl Write) -> Result<bool> {
    match interpret(line) {
        Line::Skip => {}
        Line::Quit => return Ok(false),
        Line::Print(text) => out.write_all(text.as_bytes())?,
        Line::Run { args, repeat } => {
            for _ in 0..repeat {
                let t = Instant::now();
                let reply = session.execute(&args);
                out.write_all(&format_reply(&reply))?;
                let elapsed = t.elapsed();
                if elapsed >= Duration::from_millis(500) {
                    writeln!(out, "({:.2}s)", elapsed.as_secs_f64())?;
                }
            }
        }
    }
    out.flush()?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// redis-cli's repeat prefix: a whole number before a command.
    #[test]
    fn repeat_prefix() {
        assert!(matches!(interpret(b"3 ping"), Line::Run { repeat: 3, .. }));
        assert!(matches!(interpret(b"0 ping"), Line::Print(_)));
        assert!(matches!(interpret(b"-1 ping"), Line::Print(_)));
        assert!(matches!(interpret(b"'' ping"), Line::Print(_)));
        assert!(matches!(interpret(b"3x ping"), Line::Run { repeat: 1, .. }));
        assert!(matches!(interpret(b"3"), Line::Run { repeat: 1, .. }));
        assert!(matches!(interpret(b"QUIT"), Line::Quit));
        assert!(matches!(interpret(b"   "), Line::Skip));
        assert!(matches!(interpret(b"get \"x"), Line::Print("Invalid argument(s)\n")));
    }
}
