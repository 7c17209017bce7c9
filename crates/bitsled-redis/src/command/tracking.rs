//! Client-side caching commands (CLIENT TRACKING, CACHING, TRACKINGINFO,
//! GETREDIR) with Redis 7.0's options, checks and error texts, and what
//! the dispatcher tells the server around each command while some client
//! tracks: the keys a tracking client is about to read, and the keys a
//! write command wrote.

use std::sync::Arc;

use super::admin::server;
use super::host::TrackingOptions;
use super::session::Session;
use super::spec::{Flags, Spec};
use super::{args, CmdResult, Fail, Reply};

/// Whether one prefix is a prefix of the other (Redis's
/// `stringCheckPrefix`: equal prefixes overlap too).
fn overlap(a: &[u8], b: &[u8]) -> bool {
    let n = a.len().min(b.len());
    a[..n] == b[..n]
}

fn prefix_error(new: &[u8], other: &[u8], existing: bool) -> Fail {
    let mut text = b"ERR Prefix '".to_vec();
    text.extend_from_slice(new);
    text.extend_from_slice(if existing {
        b"' overlaps with an existing prefix '"
    } else {
        b"' overlaps with another provided prefix '"
    });
    text.extend_from_slice(other);
    text.extend_from_slice(b"'. Prefixes for a single client must not overlap.");
    Fail(super::sanitize(text))
}

/// `CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN]
/// [OPTOUT] [NOLOOP]`.
pub(crate) fn client_tracking(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    let host = Arc::clone(server(s)?);
    let mut o = TrackingOptions::default();
    let mut prefixes: Vec<Vec<u8>> = Vec::new();
    let mut j = 3;
    while j < a.len() {
        let more = j + 1 < a.len();
        if args::is(&a[j], "redirect") && more {
            j += 1;
            if o.redirect.is_some() {
                return Err(Fail::new("ERR A client can only redirect to a single other client"));
            }
            let id = args::parse_i64(&a[j]).ok_or_else(|| Fail::new("ERR value is not an integer or out of range"))?;
            let id = u64::try_from(id).ok().filter(|&id| host.client_exists(id));
            o.redirect = Some(id.ok_or_else(|| Fail::new("ERR The client ID you want redirect to does not exist"))?);
        } else if args::is(&a[j], "bcast") {
            o.bcast = true;
        } else if args::is(&a[j], "optin") {
            o.optin = true;
        } else if args::is(&a[j], "optout") {
            o.optout = true;
        } else if args::is(&a[j], "noloop") {
            o.noloop = true;
        } else if args::is(&a[j], "prefix") && more {
            j += 1;
            prefixes.push(a[j].clone());
        } else {
            return Err(Fail::new(args::ERR_SYNTAX));
        }
        j += 1;
    }
    if args::is(&a[2], "off") {
        if s.tracking.take().is_some() {
            host.set_tracking(None);
        }
        s.caching = None;
        return Ok(Reply::ok());
    }
    if !args::is(&a[2], "on") {
        return Err(Fail::new(args::ERR_SYNTAX));
    }
    if !o.bcast && !prefixes.is_empty() {
        return Err(Fail::new("ERR PREFIX option requires BCAST mode to be enabled"));
    }
    if s.tracking.as_ref().is_some_and(|cur| cur.bcast != o.bcast) {
        return Err(Fail::new(
            "ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling \
             it with a different mode.",
        ));
    }
    if o.bcast && (o.optin || o.optout) {
        return Err(Fail::new("ERR OPTIN and OPTOUT are not compatible with BCAST"));
    }
    if o.optin && o.optout {
        return Err(Fail::new("ERR You can't specify both OPTIN mode and OPTOUT mode"));
    }
    if s.tracking.as_ref().is_some_and(|cur| (o.optin && cur.optout) || (o.optout && cur.optin)) {
        return Err(Fail::new(
            "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then \
             re-enabling it with a different mode.",
        ));
    }
    if o.bcast {
        let existing: &[Vec<u8>] = s.tracking.as_ref().map_or(&[], |cur| &cur.prefixes);
        for (i, p) in prefixes.iter().enumerate() {
            if let Some(e) = existing.iter().find(|e| overlap(e, p)) {
                return Err(prefix_error(p, e, true));
            }
            if let Some(q) = prefixes[i + 1..].iter().find(|q| overlap(p, q)) {
                return Err(prefix_error(p, q, false));
            }
        }
        // Prefixes add to those given before; none at all is the empty
        // prefix (every key).
        let mut all = existing.to_vec();
        if prefixes.is_empty() {
            prefixes.push(Vec::new());
        }
        all.extend(prefixes);
        all.sort();
        all.dedup();
        o.prefixes = all;
    }
    host.set_tracking(Some(&o));
    s.tracking = Some(o);
    Ok(Reply::ok())
}

/// `CLIENT CACHING YES|NO`: whether the next command's keys are tracked
/// (OPTIN / OPTOUT modes).
pub(crate) fn client_caching(s: &mut Session, a: &[Vec<u8>]) -> CmdResult {
    server(s)?;
    let Some(t) = &s.tracking else {
        return Err(Fail::new(
            "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode \
             enabled",
        ));
    };
    if args::is(&a[2], "yes") {
        if !t.optin {
            return Err(Fail::new("ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode."));
        }
        s.caching = Some(true);
    } else if args::is(&a[2], "no") {
        if !t.optout {
            return Err(Fail::new("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode."));
        }
        s.caching = Some(false);
    } else {
        return Err(Fail::new(args::ERR_SYNTAX));
    }
    Ok(Reply::ok())
}

/// `CLIENT GETREDIR`: -1 with tracking off, 0 without REDIRECT, else the
/// target's id.
pub(crate) fn client_getredir(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    server(s)?;
    Ok(Reply::Integer(match &s.tracking {
        None => -1,
        Some(t) => t.redirect.map_or(0, |id| i64::try_from(id).unwrap_or(i64::MAX)),
    }))
}

/// `CLIENT TRACKINGINFO`: flags, redirect and prefixes, as Redis lists
/// them.
pub(crate) fn client_trackinginfo(s: &mut Session, _a: &[Vec<u8>]) -> CmdResult {
    let host = server(s)?;
    let mut flags = Vec::new();
    let (redirect, prefixes) = match &s.tracking {
        None => {
            flags.push("off");
            (-1, Vec::new())
        }
        Some(t) => {
            flags.push("on");
            if t.bcast {
                flags.push("bcast");
            }
            if t.optin {
                flags.push("optin");
                if s.caching == Some(true) {
                    flags.push("caching-yes");
                }
            }
            if t.optout {
                flags.push("optout");
                if s.caching == Some(false) {
                    flags.push("caching-no");
                }
            }
            if t.noloop {
                flags.push("noloop");
            }
            if t.redirect.is_some() && host.tracking_redirect_broken() {
                flags.push("broken_redirect");
            }
            (t.redirect.map_or(0, |id| i64::try_from(id).unwrap_or(i64::MAX)), t.prefixes.clone())
        }
    };
    Ok(Reply::Map(vec![
        (Reply::bulk("flags"), Reply::Set(flags.into_iter().map(Reply::bulk).collect())),
        (Reply::bulk("redirect"), Reply::Integer(redirect)),
        (Reply::bulk("prefixes"), Reply::Array(prefixes.into_iter().map(|p| Reply::Bulk(Some(p))).collect())),
    ]))
}

/// The keys of a command that it reads (`read`) or writes, by its key
/// specs.
fn keys_of<'a>(spec: &Spec, args: &'a [Vec<u8>], read: bool) -> Vec<&'a [u8]> {
    super::introspect::key_positions(spec, args)
        .unwrap_or_default()
        .into_iter()
        .filter(|(_, flags)| read || !flags.contains(&"RO"))
        .filter_map(|(i, _)| args.get(i).map(Vec::as_slice))
        .collect()
}

/// Whether `spec` empties a database (FLUSHDB, FLUSHALL, SWAPDB's view of
/// both): every tracked key is invalidated.
pub(super) fn empties(spec: &Spec) -> bool {
    spec.flags.contains(Flags::EMPTIES_DB)
}

impl Session {
    /// Before a command runs: a read-only command of a client tracking in
    /// the default mode has its keys remembered first (so a write after
    /// the read always finds them), unless OPTIN / OPTOUT say otherwise.
    pub(super) fn track_before(&self, spec: &Spec, args: &[Vec<u8>]) {
        let (Some(host), Some(t)) = (&self.host, &self.tracking) else { return };
        if t.bcast || !spec.flags.contains(Flags::READONLY) {
            return;
        }
        if (t.optin && self.caching != Some(true)) || (t.optout && self.caching == Some(false)) {
            return;
        }
        let keys = keys_of(spec, args, true);
        if !keys.is_empty() {
            host.track_keys(&keys);
        }
    }

    /// After a command ran (with `reply`, having raised `events` if they
    /// were collected): the keys a write changed are invalidated. They are
    /// the keys of its keyspace events; a command that raises none (the
    /// Bloom filter commands, as RedisBloom raises none) invalidates every
    /// key it may write. FLUSHDB, FLUSHALL and SWAPDB invalidate
    /// everything. CLIENT CACHING's answer lasts one command.
    pub(super) fn track_after(
        &mut self,
        spec: &Spec,
        args: &[Vec<u8>],
        reply: &Reply,
        events: Option<&[super::notify::Event]>,
        in_exec: bool,
    ) {
        let written = spec.is_write() && !matches!(reply, Reply::Error(_));
        let flush = written && empties(spec);
        if let Some(host) = self.host.as_ref().filter(|h| written && (flush || h.tracking_active())) {
            if flush {
                host.invalidate_all();
            } else {
                let keys: Vec<&[u8]> = match events {
                    Some(events) if !spec.name.starts_with("bf.") => {
                        let mut keys: Vec<&[u8]> = events.iter().map(|e| e.key.as_slice()).collect();
                        keys.dedup();
                        keys
                    }
                    _ => keys_of(spec, args, false),
                };
                if !keys.is_empty() {
                    host.invalidate_keys(&keys);
                }
            }
        }
        if self.caching.is_some() && !in_exec && self.multi.is_none() && !spec.name.starts_with("client|") {
            self.caching = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::overlap;

    /// Invariant: prefixes overlap when one starts the other, equal ones
    /// included, as Redis checks them.
    #[test]
    fn prefix_overlap() {
        assert!(overlap(b"a", b"ab"));
        assert!(overlap(b"ab", b"a"));
        assert!(overlap(b"a", b"a"));
        assert!(overlap(b"", b"x"));
        assert!(!overlap(b"ab", b"ac"));
    }
}
