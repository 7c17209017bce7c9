//! `bitsled serve`: the Redis-protocol server, with signal handling.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use bitsled::Config;

/// Options of `bitsled serve`.
#[derive(clap::Args, Debug)]
pub(crate) struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    bind: std::net::IpAddr,
    /// TCP port (0: any free port, printed at start).
    #[arg(long, default_value_t = 6380)]
    port: u16,
    /// Password clients must give with AUTH (or HELLO ... AUTH).
    #[arg(long)]
    requirepass: Option<OsString>,
    /// Most simultaneous clients.
    #[arg(long, default_value_t = bitsled_redis::server::DEFAULT_MAX_CLIENTS)]
    maxclients: usize,
    /// When writes become durable: `always` (before the reply; group
    /// commit), `everysec` (within about a second), `no` (within 30 s).
    #[arg(long, default_value = "everysec")]
    fsync: bitsled_redis::server::Fsync,
    /// Disconnect clients idle for this many seconds (0: never).
    #[arg(long, default_value_t = 0)]
    timeout: u64,
    /// `no` allows listening on a non-loopback address without a password.
    #[arg(long, default_value = "yes", value_parser = ["yes", "no"])]
    protected_mode: String,
}

/// `bitsled serve`: runs the server until a signal or SHUTDOWN.
pub(crate) fn serve(dir: &PathBuf, args: ServeArgs) -> Result<()> {
    use bitsled_redis::server::{Server, ServerConfig};
    use signal_hook::consts::{SIGINT, SIGTERM};
    let config = ServerConfig::new()
        .bind(args.bind)
        .port(args.port)
        .requirepass(args.requirepass.map(OsString::into_encoded_bytes))
        .max_clients(args.maxclients)
        .fsync(args.fsync)
        .timeout(Some(Duration::from_secs(args.timeout)))
        .protected_mode(args.protected_mode == "yes");
    let db = config
        .db_config(Config::new(dir))
        .open()
        .with_context(|| format!("opening the database in {}", dir.display()))?;
    let server = Server::bind(db, config).context("starting the server")?;
    let stop = server.shutdown_handle();
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT]).context("installing signal handlers")?;
    std::thread::Builder::new().name("signals".into()).spawn(move || {
        let mut seen = 0;
        for sig in signals.forever() {
            seen += 1;
            if seen > 1 {
                eprintln!("bitsled serve: second signal {sig}, exiting without waiting");
                std::process::exit(1);
            }
            eprintln!("bitsled serve: signal {sig}, shutting down");
            stop.shutdown();
        }
    })?;
    eprintln!(
        "bitsled serve: listening on {} (fsync {}), database {}",
        server.local_addr(),
        args.fsync.name(),
        dir.display()
    );
    server.run().context("serving")?;
    eprintln!("bitsled serve: stopped, database flushed");
    Ok(())
}
