//! Server commands: CLIENT, INFO, CONFIG, SHUTDOWN. They describe or change
//! the server behind the session; outside a server (the CLI) INFO describes
//! the database alone and the others answer an error.

use std::sync::atomic::Ordering;

use super::session::{Close, Session};
use super::{CmdResult, Fail, Reply};
use crate::server::{info, Link};

/// The server behind `s`, or the error for a command that needs one.
fn server(s: &Session) -> Result<&Link, Fail> {
    s.server.as_ref().ok_or_else(|| Fail::new("ERR this command needs a connection to `bitsled serve`"))
}

fn help(lines: &[&str]) -> CmdResult {
    Ok(Reply::Array(lines.iter().map(|l| Reply::Status((*l).into())).collect()))
}

/// `CLIENT ID`.
pub(crate) fn client_id(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Integer(i64::try_from(server(s)?.info.id).unwrap_or(i64::MAX)))
}

/// `CLIENT GETNAME`.
pub(crate) fn client_getname(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    server(s)?;
    Ok(Reply::Bulk(s.name.clone()))
}

/// `CLIENT SETNAME name`.
pub(crate) fn client_setname(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    server(s)?;
    s.set_name(a[2].clone())?;
    Ok(Reply::ok())
}

/// `CLIENT SETINFO attr value` (what client libraries send on connect):
/// accepted and ignored.
pub(crate) fn client_setinfo(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    server(s)?;
    Ok(Reply::ok())
}

/// `CLIENT INFO`: this client's line.
pub(crate) fn client_info(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    let link = server(s)?;
    let line = info::client_line(&link.info, s.multi.as_ref().map(|m| m.queue.len()));
    Ok(Reply::bulk(line))
}

/// `CLIENT LIST`: every client's line, by id.
pub(crate) fn client_list(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    let link = server(s)?;
    if a.len() > 2 {
        return Err(Fail::new(super::args::ERR_SYNTAX));
    }
    let mut clients: Vec<_> = link.shared.clients.lock().values().cloned().collect();
    clients.sort_by_key(|c| c.id);
    let mut text = String::new();
    for c in &clients {
        let multi = if c.id == link.info.id { s.multi.as_ref().map(|m| m.queue.len()) } else { None };
        text.push_str(&info::client_line(c, multi));
    }
    Ok(Reply::bulk(text))
}

/// `CLIENT HELP`.
pub(crate) fn client_help(_s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    help(&[
        "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GETNAME",
        "    Return the name of the current connection.",
        "ID",
        "    Return the ID of the current connection.",
        "INFO",
        "    Return information about the current client connection.",
        "LIST",
        "    Return information about client connections.",
        "SETNAME <name>",
        "    Assign the name <name> to the current connection.",
        "HELP",
        "    Print this help.",
    ])
}

/// `INFO [section...]`.
pub(crate) fn info(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::bulk(info::info(&s.db, s.server.as_ref().map(|l| &*l.shared), &a[1..])?))
}

/// `CONFIG GET pattern...`: the known parameters matching any pattern.
pub(crate) fn config_get(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    Ok(Reply::Map(info::config_get(&server(s)?.shared, &a[2..])))
}

/// `CONFIG SET`: nothing can be changed at run time.
pub(crate) fn config_set(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    server(s)?;
    let mut text = b"ERR Unknown option or number of arguments for CONFIG SET - '".to_vec();
    text.extend_from_slice(&a[2]);
    text.push(b'\'');
    Err(Fail(text))
}

/// `CONFIG RESETSTAT`.
pub(crate) fn config_resetstat(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    let st = &server(s)?.shared.stats;
    st.commands.lock().clear();
    st.errors.lock().clear();
    st.commands_processed.store(0, Ordering::Relaxed);
    st.connections_received.store(0, Ordering::Relaxed);
    st.rejected_connections.store(0, Ordering::Relaxed);
    st.net_input_bytes.store(0, Ordering::Relaxed);
    st.net_output_bytes.store(0, Ordering::Relaxed);
    s.stats.clear();
    s.errors.clear();
    Ok(Reply::ok())
}

/// `CONFIG REWRITE`.
pub(crate) fn config_rewrite(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    server(s)?;
    Err(Fail::new("ERR The server is running without a config file"))
}

/// `CONFIG HELP`.
pub(crate) fn config_help(_s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    help(&[
        "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "GET <pattern>",
        "    Return parameters matching the glob-like <pattern> and their values.",
        "SET <directive> <value>",
        "    Set the configuration <directive> to <value>.",
        "RESETSTAT",
        "    Reset statistics reported by the INFO command.",
        "REWRITE",
        "    Rewrite the configuration file.",
        "HELP",
        "    Print this help.",
    ])
}

/// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]`: makes everything
/// acknowledged durable (whatever the option: there is no separate
/// snapshot to skip), stops the server and closes the connection without a
/// reply, as Redis does.
pub(crate) fn shutdown(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    let link = server(s)?;
    for opt in &a[1..] {
        let opt = opt.to_ascii_lowercase();
        if opt == b"abort" {
            return Err(Fail::new("ERR No shutdown in progress."));
        }
        if !matches!(opt.as_slice(), b"nosave" | b"save" | b"now" | b"force") {
            return Err(Fail::new(super::args::ERR_SYNTAX));
        }
    }
    if let Err(e) = link.shared.db.flush() {
        eprintln!("bitsled serve: SHUTDOWN: flush failed: {e}");
        return Err(Fail::new("ERR Errors trying to SHUTDOWN. Check logs."));
    }
    link.shared.begin_shutdown();
    s.close = Some(Close::Silently);
    Ok(Reply::ok())
}
