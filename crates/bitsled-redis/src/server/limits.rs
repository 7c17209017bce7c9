//! The process's open-file limit against `maxclients`, as Redis fits them
//! at start (`adjustOpenFilesLimit`): each client holds one descriptor,
//! and the server keeps [`RESERVED_FDS`] for itself (the store's files,
//! the listener, the epoll set).

/// Descriptors kept for the server's own use (Redis's
/// `CONFIG_MIN_RESERVED_FDS`).
pub const RESERVED_FDS: u64 = 32;

/// How `maxclients` fits the open-file limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenFiles {
    /// The clients the server may accept: `maxclients`, or fewer if the
    /// limit could not be raised far enough.
    pub max_clients: usize,
    /// The soft limit now.
    pub limit: u64,
    /// What to tell the operator when `max_clients` was lowered.
    pub warning: Option<String>,
}

/// The open-file limit `maxclients` clients need.
#[must_use]
pub fn files_needed(max_clients: usize) -> u64 {
    u64::try_from(max_clients).unwrap_or(u64::MAX).saturating_add(RESERVED_FDS)
}

/// The clients (at most `max_clients`) an open-file limit of `limit`
/// leaves room for.
fn clients_within(limit: u64, max_clients: usize) -> usize {
    usize::try_from(limit.saturating_sub(RESERVED_FDS)).unwrap_or(usize::MAX).min(max_clients)
}

/// What a soft limit `soft` and a hard limit `hard` leave for
/// `max_clients`: the soft limit to ask for (the need, capped by the
/// hard limit; never lowered), and the clients it allows.
#[must_use]
pub fn fit(max_clients: usize, soft: u64, hard: u64) -> (u64, usize) {
    let need = files_needed(max_clients);
    let want = need.min(hard).max(soft);
    (want, clients_within(want, max_clients))
}

/// Raises this process's soft open-file limit (up to the hard limit) so
/// that `max_clients` clients fit; if they cannot, the clients that do.
///
/// # Errors
/// A text naming the cause when not even one client fits.
#[cfg(unix)]
pub fn fit_open_files(max_clients: usize) -> Result<OpenFiles, String> {
    use rlimit::Resource;
    let Ok((soft, hard)) = Resource::NOFILE.get() else {
        return Ok(OpenFiles { max_clients, limit: u64::MAX, warning: None });
    };
    let (want, mut allowed) = fit(max_clients, soft, hard);
    let mut limit = soft;
    if want > soft {
        if Resource::NOFILE.set(want, hard).is_ok() {
            limit = want;
        } else {
            allowed = clients_within(soft, max_clients);
        }
    }
    if allowed == 0 {
        return Err(format!(
            "the open-file limit is {limit}: at least {} are needed for one client (raise it with `ulimit -n`)",
            RESERVED_FDS + 1
        ));
    }
    let warning = (allowed < max_clients).then(|| {
        format!(
            "maxclients {max_clients} needs {} open files, but the limit is {limit} (hard limit {hard}): \
             maxclients reduced to {allowed}; raise it with `ulimit -n` to serve more",
            files_needed(max_clients)
        )
    });
    Ok(OpenFiles { max_clients: allowed, limit, warning })
}

/// Elsewhere the limit is left as it is.
///
/// # Errors
/// Never.
#[cfg(not(unix))]
pub fn fit_open_files(max_clients: usize) -> Result<OpenFiles, String> {
    Ok(OpenFiles { max_clients, limit: u64::MAX, warning: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Invariant: the soft limit asked for covers the clients plus the
    /// reserve when the hard limit allows, is capped by the hard limit,
    /// and is never lowered; the clients allowed are what it leaves.
    #[test]
    fn limits_fit_as_redis_fits_them() {
        assert_eq!(fit(10_000, 1024, 1 << 20), (10_032, 10_000));
        assert_eq!(fit(10_000, 1024, 4096), (4096, 4064));
        assert_eq!(fit(100, 65_536, 65_536), (65_536, 100));
        assert_eq!(fit(10_000, 20_000, 20_000), (20_000, 10_000));
        assert_eq!(fit(10, 16, 16), (16, 0));
        assert_eq!(files_needed(usize::MAX), u64::MAX);
    }
}
