//! Cluster mode: Redis Cluster's client protocol (key slots, `MOVED`,
//! `CROSSSLOT`, `CLUSTER SLOTS`/`SHARDS`/`NODES`), with the topology pushed
//! to every node from outside as Apache Kvrocks takes it (`CLUSTERX
//! SETNODEID`/`SETNODES`/`SETSLOT`/`VERSION`): nodes run no gossip of
//! their own. DESIGN.md, "Cluster", says what is built and what is not.

pub mod slot;
pub mod topology;

use std::io::Write;
use std::path::{Path, PathBuf};

use parking_lot::{RwLock, RwLockReadGuard};

pub use topology::{Node, Owner, Topology};

/// The file, in the database directory, that keeps the topology across
/// restarts.
pub const TOPOLOGY_FILE: &str = "cluster-nodes.conf";

/// A node's cluster state: its topology, kept in [`TOPOLOGY_FILE`].
#[derive(Debug)]
pub struct Cluster {
    topology: RwLock<Topology>,
    file: PathBuf,
    /// The port this server listens on (how SETNODES finds this node when
    /// no id was given).
    port: u16,
}

impl Cluster {
    /// The cluster state of a server on `port` whose database lives in
    /// `dir`: the topology its file holds, or none.
    ///
    /// # Errors
    /// The file exists but cannot be read or parsed (the message names it).
    pub fn open(dir: &Path, port: u16) -> Result<Cluster, String> {
        let file = dir.join(TOPOLOGY_FILE);
        let topology = match std::fs::read_to_string(&file) {
            Ok(text) => Topology::from_file_text(&text).map_err(|e| format!("{}: {e}", file.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Topology::default(),
            Err(e) => return Err(format!("{}: {e}", file.display())),
        };
        Ok(Cluster { topology: RwLock::new(topology), file, port })
    }

    /// The current topology.
    pub fn read(&self) -> RwLockReadGuard<'_, Topology> {
        self.topology.read()
    }

    /// The port the server listens on.
    #[must_use]
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Applies `change` to a copy of the topology and, if it succeeds and
    /// says something changed, writes the copy to the file (durably) and
    /// makes it current. A failed change or write leaves both as they were.
    ///
    /// # Errors
    /// The change's reason, or the write's.
    pub fn update(&self, change: impl FnOnce(&mut Topology) -> Result<bool, String>) -> Result<(), String> {
        let mut current = self.topology.write();
        let mut next = current.clone();
        if !change(&mut next)? {
            return Ok(());
        }
        write_durably(&self.file, next.to_file_text().as_bytes())
            .map_err(|e| format!("failed to save the cluster topology to {}: {e}", self.file.display()))?;
        *current = next;
        Ok(())
    }
}

/// Replaces `path` with `bytes`: a temporary file beside it, synced, then
/// renamed over it, and the directory synced, so a crash leaves the old
/// file or the new one.
fn write_durably(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("conf.tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_topology_survives_a_restart_and_failed_changes_are_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let id = "a".repeat(40);
        let c = Cluster::open(dir.path(), 7001).unwrap();
        assert!(!c.read().initialized());
        c.update(|t| t.set_nodes(&format!("{id} 127.0.0.1 7001 master - 0-16383"), 1, false, 7001)).unwrap();
        assert!(c.update(|t| t.set_nodes("bad", 2, false, 7001)).is_err());
        let again = Cluster::open(dir.path(), 7001).unwrap();
        assert_eq!(*again.read(), *c.read());
        assert_eq!(again.read().version(), 1);
        assert_eq!(again.read().owner(42), Owner::Myself);

        std::fs::write(dir.path().join(TOPOLOGY_FILE), "version one\n").unwrap();
        let err = Cluster::open(dir.path(), 7001).unwrap_err();
        assert!(err.contains(TOPOLOGY_FILE) && err.contains("line 1"), "{err}");
    }
}
