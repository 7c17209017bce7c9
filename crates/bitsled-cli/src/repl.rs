//! The interactive prompt: line editing and history around the script
//! runner.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Result;
use bitsled::Db;
use bitsled_redis::command::Session;

use crate::script::run_line;

/// The prompt of the interactive loop.
pub(crate) const PROMPT: &str = "bitsled> ";

/// Where the interactive loop gets its lines: a line editor on a terminal,
/// a list of lines in tests.
pub(crate) trait LineSource {
    /// The next line without its newline; `None` when the user leaves
    /// (Ctrl-D, or Ctrl-C as in redis-cli).
    fn read_line(&mut self, prompt: &str) -> Result<Option<String>>;
    /// Remembers a line for the history (Up / Ctrl-R).
    fn remember(&mut self, line: &str);
}

/// The interactive loop: reads lines from `source`, keeps the non-blank ones
/// in its history and runs them until the input ends or asks to quit.
pub(crate) fn repl_loop(db: &Db, source: &mut impl LineSource, out: &mut impl Write) -> Result<()> {
    let mut session = Session::new(db.clone());
    while let Some(line) = source.read_line(PROMPT)? {
        if !line.trim().is_empty() {
            source.remember(&line);
        }
        if !run_line(&mut session, line.as_bytes(), out)? {
            break;
        }
    }
    Ok(())
}

/// Lines kept in the history.
const HISTORY_SIZE: usize = 1000;

/// A `rustyline` editor: line editing, history in memory and, when `HOME` is
/// set, in `~/.bitsled_history` (loaded at start, saved after each line;
/// failures to read or write it are ignored).
struct Readline {
    editor: rustyline::DefaultEditor,
    history: Option<PathBuf>,
}

impl Readline {
    fn new() -> Result<Readline> {
        let config = rustyline::Config::builder()
            .max_history_size(HISTORY_SIZE)?
            .history_ignore_dups(true)?
            .auto_add_history(false)
            .build();
        let mut editor = rustyline::DefaultEditor::with_config(config)?;
        let history =
            std::env::var_os("HOME").filter(|h| !h.is_empty()).map(|h| PathBuf::from(h).join(".bitsled_history"));
        if let Some(path) = &history {
            let _ = editor.load_history(path);
        }
        Ok(Readline { editor, history })
    }
}

impl LineSource for Readline {
    fn read_line(&mut self, prompt: &str) -> Result<Option<String>> {
        use rustyline::error::ReadlineError;
        match self.editor.readline(prompt) {
            Ok(line) => Ok(Some(line)),
            Err(ReadlineError::Eof | ReadlineError::Interrupted) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn remember(&mut self, line: &str) {
        let _ = self.editor.add_history_entry(line);
        if let Some(path) = &self.history {
            let _ = self.editor.save_history(path);
        }
    }
}

/// The interactive prompt, with line editing and history.
pub(crate) fn repl(db: &Db) -> Result<()> {
    repl_loop(db, &mut Readline::new()?, &mut std::io::stdout())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bitsled::Config;

    /// Lines from a list, as a terminal would give them.
    struct Lines {
        lines: std::vec::IntoIter<&'static str>,
        history: Vec<String>,
        prompts: usize,
    }

    impl LineSource for Lines {
        fn read_line(&mut self, prompt: &str) -> Result<Option<String>> {
            assert_eq!(prompt, PROMPT);
            self.prompts += 1;
            Ok(self.lines.next().map(str::to_string))
        }

        fn remember(&mut self, line: &str) {
            self.history.push(line.to_string());
        }
    }

    fn run_repl(lines: Vec<&'static str>) -> (String, Lines) {
        let dir = tempfile::tempdir().unwrap();
        let db = Config::new(dir.path()).open().unwrap();
        let mut source = Lines { lines: lines.into_iter(), history: Vec::new(), prompts: 0 };
        let mut out = Vec::new();
        repl_loop(&db, &mut source, &mut out).unwrap();
        (String::from_utf8(out).unwrap(), source)
    }

    /// The loop runs each line, remembers the non-blank ones and stops at
    /// `quit` (later lines are not run) or at the end of input (Ctrl-D).
    #[test]
    fn repl_runs_lines_until_quit() {
        let (out, src) = run_repl(vec!["SETBIT k 7 1", "", "  ", "get k", "2 ping", "get \"x", "QUIT", "setbit k 0 1"]);
        assert_eq!(out, "(integer) 0\n\"\\x01\"\nPONG\nPONG\nInvalid argument(s)\n");
        assert_eq!(src.history, ["SETBIT k 7 1", "get k", "2 ping", "get \"x", "QUIT"]);
        assert_eq!(src.prompts, 7);

        let (out, src) = run_repl(vec!["exists k", "exit"]);
        assert_eq!(out, "(integer) 0\n");
        assert_eq!(src.prompts, 2);

        let (out, src) = run_repl(vec!["echo a"]);
        assert_eq!(out, "\"a\"\n");
        assert_eq!(src.prompts, 2, "reads again until the end of input");
    }
}
