//! The server as one connection's session sees it: [`Link`], the
//! command layer's [`Host`] for that connection. Everything a server
//! command reads or changes in the server's state goes through here, so
//! the state's fields stay private to the server.

use std::net::Shutdown;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::RwLock;

use super::save::Saves;
use super::Fsync;
use super::{info, ClientInfo, Shared};
use crate::command::{used_memory, Bgsave, ClientAddr, Host, HostMemory, Proto, Reply, SaveFailed, Setting, SubKind};

/// The server's shared state and the connection's own entry in the
/// client list.
pub(super) struct Link {
    pub(super) shared: Arc<Shared>,
    pub(super) info: Arc<ClientInfo>,
}

impl Host for Link {
    fn cluster(&self) -> Option<&Arc<crate::cluster::Cluster>> {
        self.shared.cluster.as_ref()
    }

    fn replication(&self) -> &Arc<crate::replication::Replication> {
        &self.shared.replication
    }

    fn socket(&self) -> std::io::Result<(std::net::TcpStream, std::net::IpAddr)> {
        Ok((self.info.stream.try_clone()?, self.info.addr.ip()))
    }

    fn client_id(&self) -> u64 {
        self.info.id
    }

    fn requirepass(&self) -> Option<&[u8]> {
        self.shared.config.requirepass.as_deref()
    }

    fn set_client_name(&self, name: Option<&[u8]>) {
        *self.info.name.lock() = name.map(<[u8]>::to_vec);
    }

    fn set_client_proto(&self, proto: Proto) {
        self.info.resp.store(if proto == Proto::Resp3 { 3 } else { 2 }, Ordering::Relaxed);
    }

    fn set_client_db(&self, index: u32) {
        self.info.db.store(index, Ordering::Relaxed);
    }

    fn client_info(&self, multi: Option<usize>, cmd: &str) -> String {
        info::client_line(&self.info, multi, Some(cmd))
    }

    fn client_list(&self, multi: Option<usize>, cmd: &str) -> String {
        let mut clients: Vec<_> = self.shared.clients.lock().values().cloned().collect();
        clients.sort_by_key(|c| c.id);
        let mut text = String::new();
        for c in &clients {
            let own = c.id == self.info.id;
            text.push_str(&info::client_line(c, multi.filter(|_| own), Some(cmd).filter(|_| own)));
        }
        text
    }

    fn kill_clients(&self, matches: &dyn Fn(&ClientAddr) -> bool) -> Vec<u64> {
        // Matched and removed under one hold of the list's lock, so a
        // client counted is a client closed.
        let mut clients = self.shared.clients.lock();
        let matching: Vec<Arc<ClientInfo>> = clients
            .values()
            .filter(|c| matches(&ClientAddr { id: c.id, addr: c.addr, laddr: c.laddr, pubsub: c.subscribed() }))
            .cloned()
            .collect();
        for c in matching.iter().filter(|c| c.id != self.info.id) {
            // Gone from the client list at once, as in Redis; its thread
            // finds the socket shut and ends.
            clients.remove(&c.id);
            let _ = c.stream.shutdown(Shutdown::Both);
        }
        matching.iter().map(|c| c.id).collect()
    }

    fn subscribe(&self, kind: SubKind, name: &[u8]) {
        self.shared.pubsub.subscribe(kind, name, &self.info);
    }

    fn unsubscribe(&self, kind: SubKind, name: &[u8]) {
        self.shared.pubsub.unsubscribe(kind, name, &self.info);
    }

    fn publish(&self, shard: bool, channel: &[u8], message: &[u8]) -> usize {
        self.shared.pubsub.publish(shard, channel, message)
    }

    fn pubsub_channels(&self, shard: bool, pattern: Option<&[u8]>) -> Vec<Vec<u8>> {
        self.shared.pubsub.channels(shard, pattern)
    }

    fn pubsub_numsub(&self, shard: bool, channel: &[u8]) -> usize {
        self.shared.pubsub.numsub(shard, channel)
    }

    fn pubsub_numpat(&self) -> usize {
        self.shared.pubsub.numpat()
    }

    fn keyspace_events(&self) -> u32 {
        self.shared.settings.keyspace_events()
    }

    fn notify(&self, db: u32, event: &crate::command::KeyEvent) {
        super::pubsub::notify(&self.shared, db, event);
    }

    fn set_tracking(&self, options: Option<&crate::command::TrackingOptions>) {
        self.shared.tracking.set(self.info.id, options);
    }

    fn tracking_active(&self) -> bool {
        self.shared.tracking.active()
    }

    fn events_wanted(&self) -> bool {
        self.shared.settings.keyspace_events() != 0 || self.shared.tracking.active()
    }

    fn client_exists(&self, id: u64) -> bool {
        self.shared.clients.lock().contains_key(&id)
    }

    fn tracking_redirect_broken(&self) -> bool {
        self.shared.tracking.broken(self.info.id)
    }

    fn track_keys(&self, keys: &[&[u8]]) {
        self.shared.tracking.remember(&self.shared, self.info.id, keys);
    }

    fn invalidate_keys(&self, keys: &[&[u8]]) {
        self.shared.tracking.invalidate(&self.shared, Some(self.info.id), keys);
    }

    fn invalidate_all(&self) {
        self.shared.tracking.invalidate_all(&self.shared, Some(self.info.id));
    }

    fn transaction_lock(&self) -> &RwLock<()> {
        &self.shared.exec_lock
    }

    fn log_command(&self, args: &[Vec<u8>], usec: u64, client_name: &[u8]) {
        self.shared.slowlog.record(args, usec, self.info.addr, client_name);
    }

    fn slowlog_get(&self, count: Option<usize>) -> Reply {
        self.shared.slowlog.get(count)
    }

    fn slowlog_len(&self) -> usize {
        self.shared.slowlog.len()
    }

    fn slowlog_reset(&self) {
        self.shared.slowlog.reset();
    }

    fn set_config(&self, name: &str, value: Setting) -> Result<(), String> {
        let sh = &self.shared;
        match (name, value) {
            ("appendfsync", Setting::Name(n)) => sh.db.set_durability(n.parse::<Fsync>()?.into()),
            ("maxclients", Setting::Int(n)) => {
                // As Redis: the open-file limit is raised to fit them, or
                // the value is refused.
                let n = usize::try_from(n).unwrap_or(usize::MAX);
                let files = super::limits::fit_open_files(n)?;
                if files.max_clients < n {
                    return Err(format!(
                        "The operating system is not able to handle the specified number of clients, try with {}",
                        files.max_clients
                    ));
                }
                sh.settings.set_max_clients(n);
            }
            ("maxmemory", Setting::Bytes(n)) => sh.settings.set_maxmemory(n, &sh.db).map_err(|e| e.to_string())?,
            ("maxmemory-policy", Setting::Name(n)) => sh.settings.set_policy(n),
            ("notify-keyspace-events", Setting::Events(classes)) => sh.settings.set_keyspace_events(classes),
            ("slowlog-log-slower-than", Setting::Int(n)) => sh.slowlog.set_slower_than_usec(n),
            ("slowlog-max-len", Setting::Int(n)) => sh.slowlog.set_max_len(n.unsigned_abs()),
            ("timeout", Setting::Int(n)) => sh.settings.set_timeout_secs(n.unsigned_abs()),
            ("tracking-table-max-keys", Setting::Int(n)) => {
                sh.tracking.set_max_keys(usize::try_from(n).unwrap_or(usize::MAX));
                sh.tracking.enforce_limit(sh, &[]);
            }
            _ => return Err(format!("{value:?} is not a value bitsled takes here")),
        }
        Ok(())
    }

    fn out_of_memory(&self) -> bool {
        let sh = &self.shared;
        sh.settings.out_of_memory(&sh.db, || used_memory(&sh.db.memory_stats(), sh.clients_bytes()))
    }

    fn memory(&self) -> HostMemory {
        let sh = &self.shared;
        HostMemory {
            clients_bytes: sh.clients_bytes(),
            maxmemory: sh.settings.maxmemory(),
            policy: sh.settings.policy(),
        }
    }

    fn info_section(&self, name: &str) -> Option<String> {
        info::section(&self.shared, name)
    }

    fn config(&self) -> Vec<(&'static str, String)> {
        info::config(&self.shared)
    }

    fn reset_stats(&self) {
        self.shared.stats.reset();
    }

    fn save(&self) -> Result<(), SaveFailed> {
        if self.shared.saves.running() {
            return Err(SaveFailed::Busy);
        }
        Saves::save(&self.shared).map_err(SaveFailed::Flush)
    }

    fn bgsave(&self, schedule: bool) -> std::io::Result<Bgsave> {
        Saves::background(&self.shared, schedule)
    }

    fn last_save_secs(&self) -> u64 {
        self.shared.saves.last_save_secs()
    }

    fn shutdown(&self) -> bitsled::Result<()> {
        if let Err(e) = self.shared.db.flush() {
            eprintln!("bitsled serve: SHUTDOWN: flush failed: {e}");
            return Err(e);
        }
        self.shared.begin_shutdown();
        Ok(())
    }
}
