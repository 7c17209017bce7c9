//! Transactions: MULTI, EXEC, DISCARD. Queueing itself happens in the
//! session's dispatch; EXEC runs the queue with no other client's command
//! in between (it holds the server's transaction lock exclusively).

use std::sync::Arc;

use super::session::{resolve, Multi, Session};
use super::{CmdResult, Fail, Reply};

/// `MULTI`.
pub(crate) fn multi(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    if s.multi.is_some() {
        return Err(Fail::new("ERR MULTI calls can not be nested"));
    }
    s.multi = Some(Multi { queue: Vec::new(), dirty: false });
    Ok(Reply::ok())
}

/// `DISCARD`.
pub(crate) fn discard(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    match s.multi.take() {
        Some(_) => Ok(Reply::ok()),
        None => Err(Fail::new("ERR DISCARD without MULTI")),
    }
}

/// `EXEC`: the replies of the queued commands, or EXECABORT if one was
/// refused while queueing.
pub(crate) fn exec(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    let Some(m) = s.multi.take() else { return Err(Fail::new("ERR EXEC without MULTI")) };
    if m.dirty {
        return Err(Fail::new("EXECABORT Transaction discarded because of previous errors."));
    }
    let server = s.server.as_ref().map(|l| Arc::clone(&l.shared));
    let _exclusive = server.as_ref().map(|sh| sh.exec_lock.write());
    let mut replies = Vec::with_capacity(m.queue.len());
    for args in &m.queue {
        // Checked when queued; resolved again to run.
        replies.push(match resolve(args) {
            Ok(spec) => s.run(spec, args, true),
            Err(Fail(text)) => Reply::Error(text),
        });
    }
    Ok(Reply::Array(replies))
}
