//! The interactive prompt of `bitsled`, driven through a real terminal:
//! the test runs the binary inside a detached `tmux` session (on its own
//! tmux socket, which it removes at the end), types into it and reads the
//! screen.
//!
//! It checks the prompt, that a command runs, that Up recalls the previous
//! line from the history, that Ctrl-A/Ctrl-E line editing works, that the
//! history is written to `$HOME/.bitsled_history`, that a second session
//! finds it there and that Ctrl-D leaves.
//!
//! If `tmux` is missing, the test prints a notice and passes, unless
//! `BITSLED_REQUIRE_TMUX=1` is set, in which case it fails. Install it with
//! `apt-get install tmux`.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// A tmux server on a socket of its own, killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux").arg("-L").arg(&self.socket).args(args).output().expect("running tmux")
    }

    /// Starts `command` in a new detached session `name`.
    fn start(&self, name: &str, command: &str) {
        let out = self.run(&["new-session", "-d", "-s", name, "-x", "120", "-y", "40", command]);
        assert!(out.status.success(), "tmux new-session: {}", String::from_utf8_lossy(&out.stderr));
        // Keep the pane after the program exits, so its exit can be seen.
        self.run(&["set-option", "-t", name, "remain-on-exit", "on"]);
    }

    /// Sends keys (tmux key names, e.g. `Enter`, `Up`, `C-d`).
    fn keys(&self, name: &str, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", name];
        args.extend_from_slice(keys);
        let out = self.run(&args);
        assert!(out.status.success(), "tmux send-keys: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// Types literal text.
    fn type_text(&self, name: &str, text: &str) {
        let out = self.run(&["send-keys", "-t", name, "-l", text]);
        assert!(out.status.success(), "tmux send-keys -l: {}", String::from_utf8_lossy(&out.stderr));
    }

    fn screen(&self, name: &str) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", name]).stdout).into_owned()
    }

    /// Whether the program in session `name` has exited.
    fn dead(&self, name: &str) -> bool {
        let out = self.run(&["display-message", "-p", "-t", name, "#{pane_dead}"]);
        String::from_utf8_lossy(&out.stdout).trim() == "1"
    }

    /// Waits until `check` accepts the screen; panics with the screen after 10 s.
    fn wait_for(&self, name: &str, what: &str, check: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen(name);
            if check(&screen) {
                return screen;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "waiting for {what}; screen:\n{screen}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn wait_dead(&self, name: &str) {
        let start = Instant::now();
        while !self.dead(name) {
            assert!(start.elapsed() < Duration::from_secs(10), "bitsled did not exit; screen:\n{}", self.screen(name));
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

fn tmux_available() -> bool {
    Command::new("tmux").arg("-V").output().is_ok_and(|o| o.status.success())
}

fn shell_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

/// Lines of the screen that start with the prompt.
fn prompts(screen: &str) -> Vec<&str> {
    screen.lines().filter(|l| l.starts_with("bitsled>")).collect()
}

#[test]
fn repl_in_a_terminal() {
    if !tmux_available() {
        assert!(std::env::var("BITSLED_REQUIRE_TMUX").as_deref() != Ok("1"), "tmux is missing and required");
        eprintln!("notice: tmux is missing, skipping the terminal test of the bitsled prompt");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let db = dir.path().join("db");
    let command = format!(
        "env HOME={} TERM=xterm {} --db {}",
        shell_quote(&home),
        shell_quote(Path::new(env!("CARGO_BIN_EXE_bitsled"))),
        shell_quote(&db)
    );
    let tmux = Tmux { socket: format!("bitsled-test-{}", std::process::id()) };

    tmux.start("a", &command);
    tmux.wait_for("a", "the first prompt", |s| prompts(s).len() == 1);
    tmux.type_text("a", "SETBIT k 7 1");
    tmux.keys("a", &["Enter"]);
    tmux.wait_for("a", "the first reply", |s| s.contains("(integer) 0") && prompts(s).len() == 2);
    // Up recalls the line; running it again sees the bit already set.
    tmux.keys("a", &["Up", "Enter"]);
    let screen = tmux.wait_for("a", "the recalled command's reply", |s| s.contains("(integer) 1"));
    assert_eq!(prompts(&screen).iter().filter(|l| l.contains("SETBIT k 7 1")).count(), 2, "{screen}");
    // Line editing: type the end first, go to the start (Ctrl-A), type the
    // beginning, go to the end (Ctrl-E), finish the line.
    tmux.type_text("a", " k");
    tmux.keys("a", &["C-a"]);
    tmux.type_text("a", "get");
    tmux.keys("a", &["C-e", "Enter"]);
    tmux.wait_for("a", "GET's reply", |s| s.contains("\"\\x01\""));
    tmux.keys("a", &["C-d"]);
    tmux.wait_dead("a");

    let history = std::fs::read_to_string(home.join(".bitsled_history")).unwrap();
    assert!(history.contains("SETBIT k 7 1") && history.contains("get k"), "{history}");
    assert_eq!(history.matches("SETBIT k 7 1").count(), 1, "repeated lines are kept once: {history}");

    // A new session finds the history (Up, Up reaches the SETBIT line)
    // and `quit` leaves.
    tmux.start("b", &command);
    tmux.wait_for("b", "the prompt of the second session", |s| prompts(s).len() == 1);
    tmux.keys("b", &["Up", "Up"]);
    tmux.wait_for("b", "the recalled line", |s| s.contains("bitsled> SETBIT k 7 1"));
    tmux.keys("b", &["C-u"]);
    tmux.type_text("b", "quit");
    tmux.keys("b", &["Enter"]);
    tmux.wait_dead("b");
}
