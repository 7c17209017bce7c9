//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH. Queueing itself
//! happens in the session's dispatch; EXEC runs the queue with no other
//! client's command in between (it holds the server's transaction lock
//! exclusively), unless a watched key changed since WATCH: then it runs
//! nothing and replies nil, as Redis does.

use super::session::{Multi, Session};
use super::spec::Commands;
use super::{CmdResult, Fail, Reply};

/// `MULTI`.
pub(crate) fn multi(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    if s.multi.is_some() {
        return Err(Fail::new("ERR MULTI calls can not be nested"));
    }
    s.multi = Some(Multi { queue: Vec::new(), dirty: false });
    Ok(Reply::ok())
}

/// `DISCARD`: also forgets the watched keys.
pub(crate) fn discard(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    match s.multi.take() {
        Some(_) => {
            s.watches.clear();
            Ok(Reply::ok())
        }
        None => Err(Fail::new("ERR DISCARD without MULTI")),
    }
}

/// `WATCH key...`: EXEC will run nothing if any of them changes (is
/// written, deleted, expires, or its database is flushed or swapped while
/// it exists) before it.
pub(crate) fn watch(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    if s.multi.is_some() {
        return Err(Fail::new("ERR WATCH inside MULTI is not allowed"));
    }
    let keys: Vec<&[u8]> = a[1..].iter().map(Vec::as_slice).collect();
    let w = s.db.watch(&keys)?;
    s.watches.push(w);
    Ok(Reply::ok())
}

/// `UNWATCH`.
pub(crate) fn unwatch(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    s.watches.clear();
    Ok(Reply::ok())
}

/// `EXEC`: the replies of the queued commands, or EXECABORT if one was
/// refused while queueing.
pub(crate) fn exec(s: &mut Session, _a: &[Vec<u8>], commands: &dyn Commands) -> CmdResult {
    let Some(m) = s.multi.take() else { return Err(Fail::new("ERR EXEC without MULTI")) };
    let watches = std::mem::take(&mut s.watches);
    if m.dirty {
        return Err(Fail::new("EXECABORT Transaction discarded because of previous errors."));
    }
    // A clone of the host, so that the guard does not borrow the session
    // the queued commands run in.
    let host = s.host.clone();
    let _exclusive = host.as_ref().map(|h| h.transaction_lock().write());
    // Checked with every other client's commands held off, so nothing
    // changes a watched key between the check and the queue.
    if watches.iter().any(bitsled::Watch::changed) {
        return Ok(Reply::NilArray);
    }
    let mut replies = Vec::with_capacity(m.queue.len());
    s.executing = true;
    for args in &m.queue {
        // Checked when queued; resolved again to run.
        replies.push(commands.run_queued(s, args));
    }
    s.executing = false;
    Ok(Reply::Array(replies))
}
