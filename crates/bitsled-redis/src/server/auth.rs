//! Limits on failed authentications (AUTH, HELLO ... AUTH: a `WRONGPASS`
//! reply), so that a password cannot be guessed at the speed of a
//! pipelined connection.
//!
//! Two limits apply to every failure, and the connection that made it
//! waits for the later of the two before it goes on (its reply is sent,
//! and its next request read, only then):
//!
//! - per connection ([`AuthLimits::client_free`] failures at full speed,
//!   then each one holds the connection [`AuthLimits::client_delay`]; the
//!   [`AuthLimits::client_max`]th closes it after its reply), so one
//!   client cannot guess quickly;
//! - across the server ([`FailureBudget`]: a burst, then one failure per
//!   interval, shared by every connection), so many connections, or a
//!   client that reconnects to start its free failures again, cannot
//!   either.
//!
//! A correct password takes nothing from either limit and is never held.
//! The comparison itself is constant-time (`command::connection`).

use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Failed authentications a connection makes at full speed by default:
/// enough for a client with a mistyped password.
pub const DEFAULT_AUTH_FREE_FAILURES: u32 = 10;

/// How long each failure past the free ones holds its connection by
/// default: 20 guesses a second on one connection instead of millions.
pub const DEFAULT_AUTH_FAILURE_DELAY: Duration = Duration::from_millis(50);

/// The failed authentication that closes a connection by default.
pub const DEFAULT_AUTH_MAX_FAILURES: u32 = 100;

/// Failures the whole server answers at full speed by default, before
/// [`DEFAULT_AUTH_SERVER_INTERVAL`] applies.
pub const DEFAULT_AUTH_SERVER_BURST: u32 = 100;

/// The default spacing of failures across the server once the burst is
/// spent: 100 a second.
pub const DEFAULT_AUTH_SERVER_INTERVAL: Duration = Duration::from_millis(10);

/// The limits on failed authentications of a server
/// ([`super::ServerConfig::auth_failures_per_client`],
/// [`super::ServerConfig::auth_failures_per_server`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct AuthLimits {
    /// Failures per connection answered without a hold.
    pub(super) client_free: u32,
    /// The hold of each further failure on a connection.
    pub(super) client_delay: Duration,
    /// The failure on a connection after which it is closed (0: never).
    pub(super) client_max: u32,
    /// Failures across the server answered without waiting for the budget.
    pub(super) server_burst: u32,
    /// Spacing of failures across the server past the burst (zero: no
    /// server-wide limit).
    pub(super) server_interval: Duration,
}

impl Default for AuthLimits {
    fn default() -> AuthLimits {
        AuthLimits {
            client_free: DEFAULT_AUTH_FREE_FAILURES,
            client_delay: DEFAULT_AUTH_FAILURE_DELAY,
            client_max: DEFAULT_AUTH_MAX_FAILURES,
            server_burst: DEFAULT_AUTH_SERVER_BURST,
            server_interval: DEFAULT_AUTH_SERVER_INTERVAL,
        }
    }
}

impl AuthLimits {
    /// How long a connection whose failure count went from `before` to
    /// `after` is held by its own limit (`None` if the hold cannot be
    /// expressed: the connection is then closed).
    pub(super) fn client_hold(&self, before: u32, after: u32) -> Option<Duration> {
        let held = after.saturating_sub(before.max(self.client_free));
        self.client_delay.checked_mul(held)
    }

    /// Whether a connection with `failures` failed authentications is
    /// closed after its reply.
    pub(super) fn client_closes(&self, failures: u32) -> bool {
        self.client_max > 0 && failures >= self.client_max
    }
}

/// The server-wide budget of failed authentications: `burst` at once, then
/// one per `interval`. Each failure reserves the next free slot, so
/// connections waiting for the budget are answered in the order they
/// failed, `interval` apart.
#[derive(Debug)]
pub(super) struct FailureBudget {
    burst: u32,
    interval: Duration,
    /// The instant at which the budget would be whole again if no failure
    /// came: each failure pushes it `interval` later (from now, if it is
    /// in the past). A failure may be answered once this, after its own
    /// push, is at most `burst` intervals away.
    whole_at: Mutex<Option<Instant>>,
}

impl FailureBudget {
    /// A budget with the server-wide limit of `limits`.
    pub(super) fn new(limits: &AuthLimits) -> FailureBudget {
        FailureBudget { burst: limits.server_burst, interval: limits.server_interval, whole_at: Mutex::new(None) }
    }

    /// Takes `n` failures made at `now`: returns the instant from which
    /// they may be answered (`now` while the burst lasts), or `None` if
    /// that instant is too far to express (nothing is taken; the
    /// connection is to be closed).
    pub(super) fn take(&self, n: u32, now: Instant) -> Option<Instant> {
        if self.interval.is_zero() || n == 0 {
            return Some(now);
        }
        let mut whole_at = self.whole_at.lock();
        let start = whole_at.map_or(now, |t| t.max(now));
        let pushed = start.checked_add(self.interval.checked_mul(n)?)?;
        *whole_at = Some(pushed);
        let burst = self.interval.saturating_mul(self.burst);
        Some(pushed.checked_sub(burst).map_or(now, |t| t.max(now)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(burst: u32, interval_ms: u64) -> FailureBudget {
        let limits = AuthLimits {
            server_burst: burst,
            server_interval: Duration::from_millis(interval_ms),
            ..AuthLimits::default()
        };
        FailureBudget::new(&limits)
    }

    /// The server budget answers `burst` failures at once, then one per
    /// interval in the order they came, and is whole again once idle for
    /// `burst` intervals.
    #[test]
    fn server_budget_is_a_burst_then_one_per_interval() {
        let b = budget(3, 10);
        let t0 = Instant::now();
        let ms = |n: u64| t0 + Duration::from_millis(n);
        for _ in 0..3 {
            assert_eq!(b.take(1, t0), Some(t0));
        }
        assert_eq!(b.take(1, t0), Some(ms(10)));
        // Two at once (an EXEC of two AUTHs): answered with the later slot.
        assert_eq!(b.take(2, t0), Some(ms(30)));
        // Time passing does not jump the queue.
        assert_eq!(b.take(1, ms(5)), Some(ms(40)));
        // Idle long enough: the whole burst again.
        let later = ms(10_000);
        for _ in 0..3 {
            assert_eq!(b.take(1, later), Some(later));
        }
        assert_eq!(b.take(1, later), Some(later + Duration::from_millis(10)));
    }

    /// A zero interval disables the server-wide limit; a hold too far to
    /// express takes nothing and reports `None` (never a panic).
    #[test]
    fn server_budget_edges() {
        let t0 = Instant::now();
        let off = budget(0, 0);
        for _ in 0..1000 {
            assert_eq!(off.take(1, t0), Some(t0));
        }
        let huge = FailureBudget { burst: 1, interval: Duration::MAX, whole_at: Mutex::new(None) };
        assert_eq!(huge.take(2, t0), None);
        assert_eq!(*huge.whole_at.lock(), None, "a refused take must not move the budget");
        let none_free = budget(0, 10);
        assert_eq!(none_free.take(1, t0), Some(t0 + Duration::from_millis(10)));
    }

    /// The per-connection hold counts only failures past the free ones,
    /// and the connection closes at the maximum (never with 0).
    #[test]
    fn client_limits() {
        let l = AuthLimits {
            client_free: 10,
            client_delay: Duration::from_millis(50),
            client_max: 100,
            ..Default::default()
        };
        assert_eq!(l.client_hold(0, 10), Some(Duration::ZERO));
        assert_eq!(l.client_hold(10, 11), Some(Duration::from_millis(50)));
        // An EXEC with three failures crossing the free count: two held.
        assert_eq!(l.client_hold(9, 12), Some(Duration::from_millis(100)));
        assert!(!l.client_closes(99));
        assert!(l.client_closes(100));
        let never = AuthLimits { client_max: 0, ..l };
        assert!(!never.client_closes(u32::MAX));
        let huge = AuthLimits { client_delay: Duration::MAX, ..l };
        assert_eq!(huge.client_hold(10, 12), None);
    }
}
