//! Connection commands: AUTH, HELLO, SELECT, QUIT, RESET.

use super::session::{Close, Proto, Session};
use super::{CmdResult, Fail, Reply};

const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// The Redis version whose protocol and commands bitsled follows; INFO and
/// HELLO report it so that clients pick the matching behaviour.
pub(crate) const REDIS_VERSION: &str = "7.0.0";

impl Session {
    /// The password clients must give, if the server has one.
    fn requirepass(&self) -> Option<&[u8]> {
        self.host.as_ref().and_then(|h| h.requirepass())
    }

    /// Whether `user`/`pass` are the default user's credentials.
    fn credentials_ok(&self, user: Option<&[u8]>, pass: &[u8]) -> bool {
        let default_user = user.is_none_or(|u| u == b"default");
        match self.requirepass() {
            None => default_user,
            Some(p) => default_user && constant_time_eq(pass, p),
        }
    }

    /// Sets the client's name (CLIENT SETNAME, HELLO SETNAME); an empty
    /// name removes it.
    pub(crate) fn set_name(&mut self, name: Vec<u8>) -> Result<(), Fail> {
        if name.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
            return Err(Fail::new("ERR Client names cannot contain spaces, newlines or special characters."));
        }
        let name = (!name.is_empty()).then_some(name);
        if let Some(host) = &self.host {
            host.set_client_name(name.as_deref());
        }
        self.name = name;
        Ok(())
    }

    fn set_proto(&mut self, proto: Proto) {
        self.proto = proto;
        if let Some(host) = &self.host {
            host.set_client_proto(proto);
        }
    }

    /// The client's id (0 outside a server).
    pub(crate) fn client_id(&self) -> u64 {
        self.host.as_ref().map_or(0, |h| h.client_id())
    }
}

/// `AUTH [username] password`.
pub(crate) fn auth(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    let (user, pass) = match a.len() {
        2 => (None, &a[1]),
        3 => (Some(a[1].as_slice()), &a[2]),
        _ => return Err(Fail::new(super::args::ERR_SYNTAX)),
    };
    if user.is_none() && s.requirepass().is_none() {
        return Err(Fail::new(
            "ERR AUTH <password> called without any password configured for the default user. Are you sure your \
             configuration is correct?",
        ));
    }
    if s.credentials_ok(user, pass) {
        s.authed = true;
        Ok(Reply::ok())
    } else {
        Err(Fail::new(WRONGPASS))
    }
}

/// `HELLO [protover [AUTH username password] [SETNAME clientname]]`.
pub(crate) fn hello(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    let mut proto = s.proto;
    if let Some(v) = a.get(1) {
        match std::str::from_utf8(v).ok().and_then(|t| t.parse::<i64>().ok()) {
            None => return Err(Fail::new("ERR Protocol version is not an integer or out of range")),
            Some(2) => proto = Proto::Resp2,
            Some(3) => proto = Proto::Resp3,
            Some(_) => return Err(Fail::new("NOPROTO unsupported protocol version")),
        }
    }
    let (mut creds, mut setname) = (None, None);
    let mut i = 2;
    while i < a.len() {
        let opt = a[i].to_ascii_lowercase();
        if opt == b"auth" && i + 2 < a.len() {
            creds = Some((a[i + 1].clone(), a[i + 2].clone()));
            i += 3;
        } else if opt == b"setname" && i + 1 < a.len() {
            setname = Some(a[i + 1].clone());
            i += 2;
        } else {
            let mut text = b"ERR Syntax error in HELLO option '".to_vec();
            text.extend_from_slice(&a[i]);
            text.push(b'\'');
            return Err(Fail(text));
        }
    }
    if let Some((user, pass)) = creds {
        if !s.credentials_ok(Some(&user), &pass) {
            return Err(Fail::new(WRONGPASS));
        }
        s.authed = true;
    }
    if !s.authed {
        // Redis 7.0.15's words, byte for byte.
        return Err(Fail::new(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> \
             <pass> option can be used to authenticate the client and select the RESP protocol version at the same \
             time",
        ));
    }
    if let Some(name) = setname {
        s.set_name(name)?;
    }
    s.set_proto(proto);
    let field = |f: &str, v: Reply| (Reply::bulk(f), v);
    Ok(Reply::Map(vec![
        field("server", Reply::bulk("bitsled")),
        field("version", Reply::bulk(REDIS_VERSION)),
        field("proto", Reply::Integer(if proto == Proto::Resp3 { 3 } else { 2 })),
        field("id", Reply::Integer(i64::try_from(s.client_id()).unwrap_or(i64::MAX))),
        field("mode", Reply::bulk("standalone")),
        field("role", Reply::bulk("master")),
        field("modules", Reply::Array(Vec::new())),
    ]))
}

/// `SELECT index`.
pub(crate) fn select(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    let index = super::keyspace::db_index(&s.db, &a[1], None)?;
    if index != 0 && s.in_cluster() {
        return Err(Fail::new("ERR SELECT is not allowed in cluster mode"));
    }
    s.db = s.db.select(index)?;
    if let Some(host) = &s.host {
        host.set_client_db(index);
    }
    Ok(Reply::ok())
}

/// `QUIT`: OK, then the connection closes.
pub(crate) fn quit(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    s.close = Some(Close::AfterReply);
    Ok(Reply::ok())
}

/// `RESET`: back to a new connection's state (no transaction, no watched
/// keys, database 0, RESP2, no name, authenticated only if no password is
/// set).
pub(crate) fn reset(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    s.multi = None;
    super::pubsub::unsubscribe_all(s);
    s.reply_mode = super::ReplyMode::On;
    s.watches.clear();
    s.db = s.db.select(0)?;
    if let Some(host) = &s.host {
        host.set_client_db(0);
    }
    s.set_proto(Proto::Resp2);
    // Removing the name cannot fail.
    let _ = s.set_name(Vec::new());
    s.authed = s.requirepass().is_none();
    Ok(Reply::Status("RESET".into()))
}

/// Compares without an early exit on the first differing byte.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for (i, &x) in a.iter().enumerate() {
        diff |= x ^ b.get(i % b.len().max(1)).copied().unwrap_or(0);
    }
    diff == 0
}
