//! Cluster mode: Redis Cluster's client protocol (key slots, `MOVED`,
//! `CROSSSLOT`, `CLUSTER SLOTS`/`SHARDS`/`NODES`), with the topology pushed
//! to every node from outside as Apache Kvrocks takes it (`CLUSTERX
//! SETNODEID`/`SETNODES`/`SETSLOT`/`VERSION`): nodes run no gossip of
//! their own. DESIGN.md, "Cluster", says what is built and what is not.

pub mod migration;
pub use bitsled::slot;
pub mod topology;

use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};

use parking_lot::{Mutex, RwLock, RwLockReadGuard};

pub use migration::{Imports, Migration, MigrationState, Outgoing};
pub use topology::{Node, Owner, Topology};

/// The file, in the database directory, that keeps the topology across
/// restarts.
pub const TOPOLOGY_FILE: &str = "cluster-nodes.conf";

/// The file, in the database directory, that lists the slots this node is
/// importing while keys arrive: a node that stops before the import ends
/// drops their keys when it starts again (they may be a partial copy).
pub const IMPORT_FILE: &str = "cluster-importing.conf";

/// The file, in the database directory, that keeps the ends of moves no
/// push has settled yet, so a restart keeps sending their commands where
/// the keys are: a line `migrated ID IP PORT SLOTS` for slots this node
/// copied to node ID, and `imported SLOTS` for slots it imported whole.
pub const MOVES_FILE: &str = "cluster-moves.conf";

/// A node's cluster state: its topology, kept in [`TOPOLOGY_FILE`].
#[derive(Debug)]
pub struct Cluster {
    topology: RwLock<Topology>,
    file: PathBuf,
    /// Where this server listens (how SETNODES finds this node when no id
    /// was given).
    addr: SocketAddr,
    /// Slot migrations this node runs or ran (as the source).
    pub migration: Mutex<Outgoing>,
    /// Slots this node imports or has imported (as the target).
    pub imports: Mutex<Imports>,
    /// [`IMPORT_FILE`].
    import_file: PathBuf,
    /// [`MOVES_FILE`]; its lock is held while a snapshot of the moves is
    /// taken and written, so writes never go back in time.
    moves_file: Mutex<PathBuf>,
}

/// This server's address, as SETNODES recognises this node's entry.
#[derive(Clone, Copy, Debug)]
pub struct Me(SocketAddr);

impl Me {
    /// Whether a node listed at `ip:port` is this server: the port is the
    /// one it listens on, and the address the one it is bound to (or, bound
    /// to all addresses, one of this machine's: a loopback address,
    /// `localhost`, or one a socket can be bound to).
    #[must_use]
    pub fn is(&self, ip: &str, port: u16) -> bool {
        if port != self.0.port() {
            return false;
        }
        let bound = self.0.ip();
        let Ok(listed) = ip.parse::<IpAddr>() else {
            return ip.eq_ignore_ascii_case("localhost") && (bound.is_loopback() || bound.is_unspecified());
        };
        if bound.is_unspecified() {
            listed.is_loopback() || std::net::UdpSocket::bind((listed, 0)).is_ok()
        } else {
            listed == bound
        }
    }
}

impl Cluster {
    /// The cluster state of a server listening on `addr` whose database
    /// lives in `dir`: the topology its file holds, or none.
    ///
    /// # Errors
    /// The file exists but cannot be read or parsed (the message names it).
    pub fn open(dir: &Path, addr: SocketAddr) -> Result<Cluster, String> {
        let file = dir.join(TOPOLOGY_FILE);
        let topology = match std::fs::read_to_string(&file) {
            Ok(text) => Topology::from_file_text(&text).map_err(|e| format!("{}: {e}", file.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Topology::default(),
            Err(e) => return Err(format!("{}: {e}", file.display())),
        };
        let import_file = dir.join(IMPORT_FILE);
        let moves_file = dir.join(MOVES_FILE);
        let (mut migration, mut imports) = (Outgoing::default(), Imports::default());
        match std::fs::read_to_string(&moves_file) {
            Ok(text) => {
                (migration.migrated, imports.imported) =
                    parse_moves(&text).map_err(|e| format!("{}: {e}", moves_file.display()))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("{}: {e}", moves_file.display())),
        }
        Ok(Cluster {
            topology: RwLock::new(topology),
            file,
            addr,
            migration: Mutex::new(migration),
            imports: Mutex::new(imports),
            import_file,
            moves_file: Mutex::new(moves_file),
        })
    }

    /// Writes the moves no push has settled (slots copied out, slots
    /// imported) to [`MOVES_FILE`], durably; removes it when there are
    /// none. The caller holds neither the migration's lock nor the
    /// imports'.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn save_moves(&self) -> Result<(), String> {
        let path = self.moves_file.lock();
        self.write_moves(&path, None)
    }

    /// Notes that `slots` were copied to `target`: durably first, then in
    /// memory, where it sends their commands to the target (`MOVED`). A
    /// note in memory before it is on disk could send writes to the
    /// target that a restart, forgetting the move, would hide.
    ///
    /// # Errors
    /// The file cannot be written (nothing is noted then).
    pub fn record_migrated(&self, slots: &[topology::SlotRange], target: &topology::Node) -> Result<(), String> {
        let path = self.moves_file.lock();
        let entry = (slots.to_vec(), target.clone());
        self.write_moves(&path, Some(&entry))?;
        self.migration.lock().migrated.push(entry);
        Ok(())
    }

    /// [`MOVES_FILE`] (at `path`, whose lock the caller holds) written
    /// from the moves in memory and `extra`. Renamed but not synced into
    /// its directory counts as written (a restart may read it), as for
    /// the topology.
    fn write_moves(
        &self,
        path: &Path,
        extra: Option<&(Vec<topology::SlotRange>, topology::Node)>,
    ) -> Result<(), String> {
        let mut migrated = self.migration.lock().migrated.clone();
        migrated.extend(extra.cloned());
        let imported = self.imports.lock().imported.clone();
        let failed = |e: std::io::Error| format!("{}: {e}", path.display());
        if migrated.is_empty() && imported.is_empty() {
            return match std::fs::remove_file(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(failed(e)),
                _ => Ok(()),
            };
        }
        let text = moves_text(&migrated, &imported);
        if let Err(e) = write_and_rename(path, text.as_bytes()).map_err(failed)? {
            eprintln!("bitsled serve: {} (the note stands)", failed(e));
        }
        Ok(())
    }

    /// The slots an import left unfinished when this node last stopped
    /// (see [`IMPORT_FILE`]), dropped from `db` now; how many keys.
    ///
    /// # Errors
    /// The file cannot be read or parsed, or the keys not deleted.
    pub fn finish_interrupted_import(&self, db: &bitsled::Db) -> Result<u64, String> {
        let text = match std::fs::read_to_string(&self.import_file) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(format!("{}: {e}", self.import_file.display())),
        };
        let slots =
            topology::parse_slot_list(text.trim()).map_err(|e| format!("{}: {e}", self.import_file.display()))?;
        // A stop after the import was noted complete and before this file
        // was removed: the keys go, so the note goes first.
        self.imports.lock().forget(&slots);
        self.save_moves()?;
        let n = migration::drop_keys(db, &slots)?;
        std::fs::remove_file(&self.import_file).map_err(|e| format!("{}: {e}", self.import_file.display()))?;
        Ok(n)
    }

    /// Starts importing `slots` (`CLUSTER IMPORT slots 0`): any keys of
    /// theirs here are dropped (older than the source's), and the slots
    /// are noted in [`IMPORT_FILE`] before any key arrives.
    ///
    /// # Errors
    /// The keys cannot be deleted or the file written.
    pub fn begin_import(&self, db: &bitsled::Db, slots: &[topology::SlotRange]) -> Result<(), String> {
        {
            // Noted first, so a crash while the old keys go drops the rest
            // at the next start. The lock is not held while keys are
            // deleted: every command's routing reads these lists.
            let mut i = self.imports.lock();
            i.forget(slots);
            i.importing.extend(slots);
            self.save_importing(&i)?;
        }
        self.save_moves()?;
        migration::drop_keys(db, slots).map(|_| ())
    }

    /// Ends the import of `slots`: complete (`ok`: the slots are served
    /// here until a push gives them to this node) or abandoned (the keys
    /// that arrived are dropped).
    ///
    /// # Errors
    /// The keys cannot be deleted or the file written.
    pub fn end_import(&self, db: &bitsled::Db, slots: &[topology::SlotRange], ok: bool) -> Result<(), String> {
        if ok {
            // The keys that arrived are made durable, then imported is
            // noted durably, both before the source is told: it will stop
            // serving the slots and, after the push, delete its copies. A
            // restart before the import file loses the slots drops the
            // keys and the note (the source has not been told).
            db.flush().map_err(|e| format!("making the imported keys durable: {e}"))?;
            self.imports.lock().imported.extend(slots);
            if let Err(e) = self.save_moves() {
                self.imports.lock().forget(slots);
                return Err(e);
            }
            let mut i = self.imports.lock();
            let imported = std::mem::take(&mut i.imported);
            i.forget(slots);
            i.imported = imported;
            return self.save_importing(&i);
        }
        // Abandoned: no longer taken from anyone (nor noted imported), then
        // the keys go, and only then the note (a crash in between drops
        // them at start).
        self.imports.lock().forget(slots);
        self.save_moves()?;
        migration::drop_keys(db, slots)?;
        let i = self.imports.lock();
        self.save_importing(&i)
    }

    /// Writes the slots being imported to [`IMPORT_FILE`] (removed when
    /// there are none).
    fn save_importing(&self, i: &Imports) -> Result<(), String> {
        let failed = |e: std::io::Error| format!("{}: {e}", self.import_file.display());
        if i.importing.is_empty() {
            return match std::fs::remove_file(&self.import_file) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(failed(e)),
                _ => Ok(()),
            };
        }
        let list = topology::slot_list_text(&i.importing);
        write_and_rename(&self.import_file, list.as_bytes()).map_err(failed)?.map_err(failed)
    }

    /// The current topology.
    pub fn read(&self) -> RwLockReadGuard<'_, Topology> {
        self.topology.read()
    }

    /// This server's address.
    #[must_use]
    pub fn address(&self) -> Me {
        Me(self.addr)
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
        let text = next.to_file_text();
        let failed = |e: std::io::Error| format!("failed to save the cluster topology to {}: {e}", self.file.display());
        let renamed = write_and_rename(&self.file, text.as_bytes()).map_err(failed)?;
        // Renamed, the file holds the change: a restart would load it, so
        // it applies now even if the directory's sync fails (reported).
        *current = next;
        if let Err(e) = renamed {
            eprintln!("bitsled serve: {} (the change is applied)", failed(e));
        }
        Ok(())
    }
}

/// The text of [`MOVES_FILE`].
fn moves_text(migrated: &[(Vec<topology::SlotRange>, topology::Node)], imported: &[topology::SlotRange]) -> String {
    let mut text = String::new();
    for (slots, n) in migrated {
        text.push_str(&format!("migrated {} {} {} {}\n", n.id, n.ip, n.port, topology::slot_list_text(slots)));
    }
    if !imported.is_empty() {
        text.push_str(&format!("imported {}\n", topology::slot_list_text(imported)));
    }
    text
}

/// The moves [`moves_text`] wrote.
type Moves = (Vec<(Vec<topology::SlotRange>, topology::Node)>, Vec<topology::SlotRange>);

/// Parses the text of [`MOVES_FILE`].
fn parse_moves(text: &str) -> Result<Moves, String> {
    let (mut migrated, mut imported) = (Vec::new(), Vec::new());
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let bad = || format!("a line that does not parse: {line:?}");
        match line.split_once(' ') {
            Some(("migrated", rest)) => {
                let mut f = rest.splitn(4, ' ');
                let (Some(id), Some(ip), Some(port), Some(slots)) = (f.next(), f.next(), f.next(), f.next()) else {
                    return Err(bad());
                };
                let port = port.parse().map_err(|_| bad())?;
                let node = topology::Node { id: id.to_owned(), ip: ip.to_owned(), port, master: None };
                migrated.push((topology::parse_slot_list(slots)?, node));
            }
            Some(("imported", slots)) => imported.extend(topology::parse_slot_list(slots)?),
            _ => return Err(bad()),
        }
    }
    Ok((migrated, imported))
}

/// Replaces `path` with `bytes`: a temporary file beside it, synced, then
/// renamed over it; then the directory is synced, so a crash leaves the
/// old file or the new one. The outer error: nothing was replaced; the
/// inner one: the rename happened but the directory's sync failed.
fn write_and_rename(path: &Path, bytes: &[u8]) -> std::io::Result<std::io::Result<()>> {
    let tmp = path.with_extension("conf.tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    Ok(std::fs::File::open(dir).and_then(|d| d.sync_all()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_node_is_recognised_by_port_and_address() {
        let lo = Me("127.0.0.1:7001".parse().unwrap());
        assert!(lo.is("127.0.0.1", 7001));
        assert!(lo.is("localhost", 7001));
        assert!(!lo.is("127.0.0.1", 7002), "another port");
        assert!(!lo.is("10.0.0.5", 7001), "another machine on the same port");
        let any = Me("0.0.0.0:7001".parse().unwrap());
        assert!(any.is("127.0.0.1", 7001));
        assert!(!any.is("192.0.2.1", 7001), "a documentation address is no address of this machine");
    }

    #[test]
    fn the_topology_survives_a_restart_and_failed_changes_are_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let id = "a".repeat(40);
        let addr: SocketAddr = "127.0.0.1:7001".parse().unwrap();
        let me = |ip: &str, port: u16| Me(addr).is(ip, port);
        let c = Cluster::open(dir.path(), addr).unwrap();
        assert!(!c.read().initialized());
        c.update(|t| t.set_nodes(&format!("{id} 127.0.0.1 7001 master - 0-16383"), 1, false, &me)).unwrap();
        assert!(c.update(|t| t.set_nodes("bad", 2, false, &me)).is_err());
        let again = Cluster::open(dir.path(), addr).unwrap();
        assert_eq!(*again.read(), *c.read());
        assert_eq!(again.read().version(), 1);
        assert_eq!(again.read().owner(42), Owner::Myself);

        std::fs::write(dir.path().join(TOPOLOGY_FILE), "version one\n").unwrap();
        let err = Cluster::open(dir.path(), addr).unwrap_err();
        assert!(err.contains(TOPOLOGY_FILE) && err.contains("line 1"), "{err}");
    }
    /// Invariant: the ends of moves no push has settled survive a
    /// restart: slots copied out (with their node) and slots imported are
    /// what the reopened state holds; none left removes the file; a file
    /// that does not parse is refused, naming it.
    #[test]
    fn unsettled_moves_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let addr: SocketAddr = "127.0.0.1:7001".parse().unwrap();
        let c = Cluster::open(dir.path(), addr).unwrap();
        let node = topology::Node { id: "b".repeat(40), ip: "10.0.0.2".into(), port: 7002, master: None };
        c.migration.lock().migrated.push((vec![(0, 99), (500, 500)], node.clone()));
        c.imports.lock().imported.extend([(7000, 7100)]);
        c.save_moves().unwrap();
        let again = Cluster::open(dir.path(), addr).unwrap();
        assert_eq!(again.migration.lock().migrated, vec![(vec![(0, 99), (500, 500)], node)]);
        assert_eq!(again.migration.lock().moved_to(500).map(|n| n.port), Some(7002));
        assert_eq!(again.imports.lock().imported, vec![(7000, 7100)]);
        again.migration.lock().migrated.clear();
        again.imports.lock().imported.clear();
        again.save_moves().unwrap();
        assert!(!dir.path().join(MOVES_FILE).exists());
        std::fs::write(dir.path().join(MOVES_FILE), "moved 1 2\n").unwrap();
        let err = Cluster::open(dir.path(), addr).unwrap_err();
        assert!(err.contains(MOVES_FILE) && err.contains("does not parse"), "{err}");
    }

    /// Invariant: a note that slots were imported never outlives their
    /// keys: a stop between noting the import complete and removing the
    /// import file drops the keys and the note at the next start; an
    /// import abandoned after its completion failed half way leaves no
    /// note, in memory or across a restart.
    #[test]
    fn an_imported_note_goes_with_the_keys() {
        let dir = tempfile::tempdir().unwrap();
        let addr: SocketAddr = "127.0.0.1:7001".parse().unwrap();
        let db = bitsled::Config::new(dir.path().join("db")).flush_interval(None).open().unwrap();
        db.setbit(b"{a}x", 1, true).unwrap();
        let s = slot::key_slot(b"a");
        std::fs::write(dir.path().join(IMPORT_FILE), format!("{s}")).unwrap();
        std::fs::write(dir.path().join(MOVES_FILE), format!("imported {s}\n")).unwrap();
        let c = Cluster::open(dir.path(), addr).unwrap();
        assert_eq!(c.finish_interrupted_import(&db).unwrap(), 1, "the partial copy is dropped");
        assert!(c.imports.lock().imported.is_empty());
        assert!(Cluster::open(dir.path(), addr).unwrap().imports.lock().imported.is_empty());

        let c = Cluster::open(dir.path(), addr).unwrap();
        c.begin_import(&db, &[(5, 5)]).unwrap();
        // The import file cannot be rewritten: completing fails half way.
        std::fs::remove_file(dir.path().join(IMPORT_FILE)).unwrap();
        std::fs::create_dir_all(dir.path().join(IMPORT_FILE).join("x")).unwrap();
        assert!(c.end_import(&db, &[(5, 5)], true).is_err());
        std::fs::remove_dir_all(dir.path().join(IMPORT_FILE)).unwrap();
        c.end_import(&db, &[(5, 5)], false).unwrap();
        assert!(c.imports.lock().imported.is_empty());
        assert!(Cluster::open(dir.path(), addr).unwrap().imports.lock().imported.is_empty());
    }
}
