//! Pub/sub commands: SUBSCRIBE, PSUBSCRIBE and SSUBSCRIBE with their
//! UN- forms, PUBLISH, SPUBLISH, PUBSUB, and what being subscribed changes
//! in a RESP2 session (which commands it may run, how PING answers).
//!
//! The session keeps the client's own subscriptions (what each
//! confirmation counts); the server, through [`Host`], keeps who listens to
//! what and delivers published messages into the subscribers' connections.

use std::sync::Arc;

use super::admin::server;
use super::host::{Host, SubKind};
use super::session::{Proto, Session};
use super::{args, CmdResult, Fail, Reply};

/// The commands a RESP2 client may run while subscribed (Redis 7.0's
/// list, by full name).
const ALLOWED_WHILE_SUBSCRIBED: &[&str] =
    &["ping", "subscribe", "ssubscribe", "unsubscribe", "sunsubscribe", "psubscribe", "punsubscribe", "quit", "reset"];

/// The refusal of command `name` (its full name, `container|sub` for a
/// subcommand) for a RESP2 session in the subscribed state, or `None` if it
/// may run.
pub(super) fn refusal_while_subscribed(s: &Session, name: &str) -> Option<String> {
    (s.proto == Proto::Resp2 && s.subscribed() && !ALLOWED_WHILE_SUBSCRIBED.contains(&name)).then(|| {
        format!(
            "ERR Can't execute '{name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed \
             in this context"
        )
    })
}

/// PING of a RESP2 session in the subscribed state: `["pong", message]`
/// (the message empty when none is given).
pub(super) fn subscribed_ping(a: &[Vec<u8>]) -> Reply {
    let message = a.get(1).cloned().unwrap_or_default();
    Reply::Array(vec![Reply::bulk("pong"), Reply::Bulk(Some(message))])
}

/// The confirmation of one (un)subscription: `[what, name, count]`, the
/// name nil for an UNSUBSCRIBE of nothing.
fn confirmation(what: &str, name: Option<&[u8]>, count: usize) -> Reply {
    Reply::Push(vec![
        Reply::bulk(what),
        Reply::Bulk(name.map(<[u8]>::to_vec)),
        Reply::Integer(i64::try_from(count).unwrap_or(i64::MAX)),
    ])
}

fn host_of(s: &Session) -> Result<Arc<dyn Host>, Fail> {
    server(s).map(Arc::clone)
}

fn subscribe_to(s: &mut Session, a: &[Vec<u8>], kind: SubKind) -> CmdResult {
    let host = host_of(s)?;
    let mut replies = Vec::with_capacity(a.len() - 1);
    for name in &a[1..] {
        if s.subs.of_mut(kind).insert(name.clone()) {
            host.subscribe(kind, name);
        }
        replies.push(confirmation(kind.subscribed(), Some(name), s.subs.count(kind)));
    }
    Ok(Reply::Several(replies))
}

fn unsubscribe_from(s: &mut Session, a: &[Vec<u8>], kind: SubKind) -> CmdResult {
    let host = host_of(s)?;
    let names: Vec<Vec<u8>> = if a.len() > 1 { a[1..].to_vec() } else { s.subs.of(kind).iter().cloned().collect() };
    if names.is_empty() {
        return Ok(Reply::Several(vec![confirmation(kind.unsubscribed(), None, s.subs.count(kind))]));
    }
    let mut replies = Vec::with_capacity(names.len());
    for name in names {
        if s.subs.of_mut(kind).remove(&name) {
            host.unsubscribe(kind, &name);
        }
        replies.push(confirmation(kind.unsubscribed(), Some(&name), s.subs.count(kind)));
    }
    Ok(Reply::Several(replies))
}

/// Drops every subscription of the session without confirmations (RESET,
/// and a connection that ends), and its CLIENT TRACKING.
pub(crate) fn unsubscribe_all(s: &mut Session) {
    let Some(host) = s.host.clone() else { return };
    if s.tracking.take().is_some() {
        host.set_tracking(None);
    }
    s.caching = None;
    for kind in SubKind::ALL {
        for name in std::mem::take(s.subs.of_mut(kind)) {
            host.unsubscribe(kind, &name);
        }
    }
}

/// `SUBSCRIBE channel [channel ...]`.
pub(crate) fn subscribe(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    subscribe_to(s, a, SubKind::Channel)
}

/// `PSUBSCRIBE pattern [pattern ...]`.
pub(crate) fn psubscribe(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    subscribe_to(s, a, SubKind::Pattern)
}

/// `SSUBSCRIBE shardchannel [shardchannel ...]`.
pub(crate) fn ssubscribe(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    subscribe_to(s, a, SubKind::Shard)
}

/// `UNSUBSCRIBE [channel ...]`.
pub(crate) fn unsubscribe(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    unsubscribe_from(s, a, SubKind::Channel)
}

/// `PUNSUBSCRIBE [pattern ...]`.
pub(crate) fn punsubscribe(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    unsubscribe_from(s, a, SubKind::Pattern)
}

/// `SUNSUBSCRIBE [shardchannel ...]`.
pub(crate) fn sunsubscribe(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    unsubscribe_from(s, a, SubKind::Shard)
}

fn count(n: usize) -> Reply {
    Reply::Integer(i64::try_from(n).unwrap_or(i64::MAX))
}

/// `PUBLISH channel message`: the number of deliveries.
pub(crate) fn publish(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    Ok(count(server(s)?.publish(false, &a[1], &a[2])))
}

/// `SPUBLISH shardchannel message`.
pub(crate) fn spublish(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    Ok(count(server(s)?.publish(true, &a[1], &a[2])))
}

/// The error for a PUBSUB subcommand given the wrong number of arguments.
fn pubsub_syntax(sub: &[u8]) -> Fail {
    let mut text = b"ERR unknown subcommand or wrong number of arguments for '".to_vec();
    text.extend_from_slice(super::c_str(sub, 128));
    text.extend_from_slice(b"'. Try PUBSUB HELP.");
    Fail(super::sanitize(text))
}

fn channels(s: &Session, a: &[Vec<u8>], shard: bool) -> CmdResult {
    if a.len() > 3 {
        return Err(pubsub_syntax(&a[1]));
    }
    let names = server(s)?.pubsub_channels(shard, a.get(2).map(Vec::as_slice));
    Ok(Reply::Array(names.into_iter().map(|n| Reply::Bulk(Some(n))).collect()))
}

fn numsub(s: &Session, a: &[Vec<u8>], shard: bool) -> CmdResult {
    let host = server(s)?;
    let mut out = Vec::with_capacity(2 * (a.len() - 2));
    for channel in &a[2..] {
        out.push(Reply::Bulk(Some(channel.clone())));
        out.push(count(host.pubsub_numsub(shard, channel)));
    }
    Ok(Reply::Array(out))
}

/// `PUBSUB CHANNELS [pattern]`.
pub(crate) fn pubsub_channels(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    channels(s, a, false)
}

/// `PUBSUB SHARDCHANNELS [pattern]`.
pub(crate) fn pubsub_shardchannels(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    channels(s, a, true)
}

/// `PUBSUB NUMSUB [channel ...]`.
pub(crate) fn pubsub_numsub(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    numsub(s, a, false)
}

/// `PUBSUB SHARDNUMSUB [shardchannel ...]`.
pub(crate) fn pubsub_shardnumsub(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    numsub(s, a, true)
}

/// `PUBSUB NUMPAT`.
pub(crate) fn pubsub_numpat(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    Ok(count(server(s)?.pubsub_numpat()))
}

/// `PUBSUB HELP`.
pub(crate) fn pubsub_help(_s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    let lines = [
        "PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "CHANNELS [<pattern>]",
        "    Return the currently active channels matching a <pattern> (default: '*').",
        "NUMPAT",
        "    Return number of subscriptions to patterns.",
        "NUMSUB [<channel> ...]",
        "    Return the number of subscribers for the specified channels, excluding",
        "    pattern subscriptions(default: no channels).",
        "SHARDCHANNELS [<pattern>]",
        "    Return the currently active shard level channels matching a <pattern> (default: '*').",
        "SHARDNUMSUB [<shardchannel> ...]",
        "    Return the number of subscribers for the specified shard level channel(s)",
        "HELP",
        "    Prints this help.",
    ];
    Ok(Reply::Array(lines.iter().map(|l| Reply::Status((*l).into())).collect()))
}

/// `CLIENT REPLY ON|OFF|SKIP`.
pub(crate) fn client_reply(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    server(s)?;
    use super::session::ReplyMode;
    s.reply_mode = if args::is(&a[2], "on") {
        ReplyMode::On
    } else if args::is(&a[2], "off") {
        ReplyMode::Off
    } else if args::is(&a[2], "skip") {
        // Unless replies are off already.
        if s.reply_mode == ReplyMode::Off {
            ReplyMode::Off
        } else {
            ReplyMode::SkipNext
        }
    } else {
        return Err(Fail::new(args::ERR_SYNTAX));
    };
    Ok(Reply::ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invariant: PING while subscribed in RESP2 answers `["pong", msg]`,
    /// the message empty when none is given.
    #[test]
    fn subscribed_ping_shape() {
        let r = subscribed_ping(&[b"ping".to_vec()]);
        assert_eq!(r.to_resp(), b"*2\r\n$4\r\npong\r\n$0\r\n\r\n");
        let r = subscribed_ping(&[b"ping".to_vec(), b"hi".to_vec()]);
        assert_eq!(r.to_resp(), b"*2\r\n$4\r\npong\r\n$2\r\nhi\r\n");
    }

    /// Invariant: a confirmation is a push in RESP3 and an array in RESP2,
    /// with a nil name for an UNSUBSCRIBE of nothing.
    #[test]
    fn confirmation_shapes() {
        let r = confirmation("unsubscribe", None, 0);
        assert_eq!(r.to_resp(), b"*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n");
        let mut out = Vec::new();
        confirmation("subscribe", Some(b"a"), 1).write(Proto::Resp3, &mut out);
        assert_eq!(out, b">3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n");
    }

    /// Invariant: with replies off, only pushes go out.
    #[test]
    fn pushes_only_keeps_pushes() {
        assert!(Reply::ok().pushes_only().is_none());
        let several = Reply::Several(vec![confirmation("subscribe", Some(b"a"), 1), Reply::Integer(3)]);
        let kept = several.pushes_only().map(|r| r.to_resp());
        assert_eq!(kept, Some(b"*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n".to_vec()));
    }
}
