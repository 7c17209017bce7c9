//! SAVE, BGSAVE and LASTSAVE. There is no snapshot to write: every write
//! already goes to the store, so saving means making everything written so
//! far durable (a flush of the database), in the foreground or on a thread
//! of its own. LASTSAVE is the Unix time of the last save that succeeded
//! (the server's start before any).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

use super::Shared;
use crate::command::Bgsave;

/// The state of saves.
pub(super) struct Saves {
    last_save_secs: AtomicU64,
    background: Mutex<Running>,
    last_ok: AtomicBool,
    /// The database's change count when the last successful save began.
    saved_changes: AtomicU64,
}

/// Whether a background save runs, and whether another follows it.
#[derive(Default)]
struct Running {
    running: bool,
    /// A BGSAVE SCHEDULE arrived while one ran.
    scheduled: bool,
}

fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl Saves {
    pub(super) fn new() -> Saves {
        Saves {
            last_save_secs: AtomicU64::new(now_secs()),
            background: Mutex::new(Running::default()),
            last_ok: AtomicBool::new(true),
            saved_changes: AtomicU64::new(0),
        }
    }

    /// LASTSAVE.
    pub(super) fn last_save_secs(&self) -> u64 {
        self.last_save_secs.load(Ordering::Relaxed)
    }

    /// Whether a background save runs.
    pub(super) fn running(&self) -> bool {
        self.background.lock().running
    }

    /// Changes since the last successful save (INFO
    /// `rdb_changes_since_last_save`): a save makes every change before
    /// it durable.
    pub(super) fn changes_since(&self, now: u64) -> u64 {
        now.saturating_sub(self.saved_changes.load(Ordering::Relaxed))
    }

    /// Whether the last background save succeeded.
    pub(super) fn last_ok(&self) -> bool {
        self.last_ok.load(Ordering::Relaxed)
    }

    /// Makes everything written so far durable, counting the flush in the
    /// server's statistics.
    ///
    /// # Errors
    /// The flush's error, as text.
    pub(super) fn save(shared: &Shared) -> Result<(), String> {
        let before = shared.db.changes();
        let result = shared.db.flush();
        shared.stats.flushes.fetch_add(1, Ordering::Relaxed);
        match result {
            Ok(()) => {
                shared.saves.last_save_secs.store(now_secs(), Ordering::Relaxed);
                shared.saves.saved_changes.fetch_max(before, Ordering::Relaxed);
                Ok(())
            }
            Err(e) => {
                shared.stats.flush_failures.fetch_add(1, Ordering::Relaxed);
                Err(e.to_string())
            }
        }
    }

    /// BGSAVE: starts a save on a thread of its own, unless one runs (then
    /// another follows it if `schedule`).
    ///
    /// # Errors
    /// The thread could not be started.
    pub(super) fn background(shared: &Arc<Shared>, schedule: bool) -> std::io::Result<Bgsave> {
        let mut state = shared.saves.background.lock();
        if state.running {
            if schedule {
                state.scheduled = true;
                return Ok(Bgsave::Scheduled);
            }
            return Ok(Bgsave::Busy);
        }
        let mine = Arc::clone(shared);
        std::thread::Builder::new().name("bitsled-bgsave".into()).spawn(move || loop {
            let ok = Saves::save(&mine).map_err(|e| eprintln!("bitsled serve: BGSAVE: flush failed: {e}")).is_ok();
            mine.saves.last_ok.store(ok, Ordering::Relaxed);
            let mut state = mine.saves.background.lock();
            if state.scheduled {
                state.scheduled = false;
            } else {
                state.running = false;
                break;
            }
        })?;
        state.running = true;
        Ok(Bgsave::Started)
    }
}
