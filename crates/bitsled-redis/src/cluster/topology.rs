//! The cluster's topology as a controller pushes it (Apache Kvrocks's
//! `CLUSTERX` contract): the nodes, which master owns each slot, which node
//! this one is, and the version that orders pushes. Pure data: parsing,
//! the checks of each change, and what the CLUSTER subcommands show.

use super::slot::SLOTS;

/// The length of a node id (40 characters, as Redis's and Kvrocks's).
pub const NODE_ID_LEN: usize = 40;

/// No owner, in [`Topology`]'s slot table.
const NO_OWNER: u16 = u16::MAX;

/// One node of the topology.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// Its 40-character id.
    pub id: String,
    /// The address clients reach it at (as given: an IP address or a name).
    pub ip: String,
    /// The port clients reach it at.
    pub port: u16,
    /// The id of its master when it is a replica; `None` for a master.
    pub master: Option<String>,
}

/// Who serves a slot.
#[derive(Debug, PartialEq, Eq)]
pub enum Owner<'a> {
    /// This node.
    Myself,
    /// Another node, which clients are sent to (`MOVED`).
    Other(&'a Node),
    /// Nobody: no topology yet, or no master holds the slot.
    Unserved,
}

/// The topology. Version -1: none was pushed yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    version: i64,
    myid: Option<String>,
    nodes: Vec<Node>,
    /// The index in `nodes` of each slot's master, [`NO_OWNER`] if none.
    owners: Vec<u16>,
}

impl Default for Topology {
    fn default() -> Topology {
        Topology { version: -1, myid: None, nodes: Vec::new(), owners: vec![NO_OWNER; usize::from(SLOTS)] }
    }
}

/// A `start-end` run of slots, both ends included.
pub type SlotRange = (u16, u16);

impl Topology {
    /// The version of the last push; -1 before any.
    #[must_use]
    pub fn version(&self) -> i64 {
        self.version
    }

    /// This node's id, once `CLUSTERX SETNODEID` gave it.
    #[must_use]
    pub fn myid(&self) -> Option<&str> {
        self.myid.as_deref()
    }

    /// Whether a topology was pushed.
    #[must_use]
    pub fn initialized(&self) -> bool {
        self.version >= 0
    }

    /// The nodes, in the order the last push listed them.
    #[must_use]
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// This node's entry, if the topology lists its id.
    #[must_use]
    pub fn myself(&self) -> Option<&Node> {
        let id = self.myid.as_deref()?;
        self.nodes.iter().find(|n| n.id == id)
    }

    /// Who serves `slot`.
    #[must_use]
    pub fn owner(&self, slot: u16) -> Owner<'_> {
        let Some(node) = self.owners.get(usize::from(slot)).and_then(|&i| self.nodes.get(usize::from(i))) else {
            return Owner::Unserved;
        };
        if self.myid.as_deref() == Some(node.id.as_str()) {
            Owner::Myself
        } else {
            Owner::Other(node)
        }
    }

    /// The id of `slot`'s master, if it has one.
    #[must_use]
    pub fn owner_id(&self, slot: u16) -> Option<&str> {
        let i = *self.owners.get(usize::from(slot))?;
        self.nodes.get(usize::from(i)).map(|n| n.id.as_str())
    }

    /// The slots of the node at `index` in [`Topology::nodes`], as runs.
    #[must_use]
    pub fn slots_of(&self, index: usize) -> Vec<SlotRange> {
        self.runs().into_iter().filter(|&(_, _, i)| i == index).map(|(s, e, _)| (s, e)).collect()
    }

    /// Runs of consecutive slots with one owner, in slot order, each with
    /// the index of its master in [`Topology::nodes`]; unowned slots are
    /// left out.
    #[must_use]
    pub fn runs(&self) -> Vec<(u16, u16, usize)> {
        let mut out: Vec<(u16, u16, usize)> = Vec::new();
        for (slot, &owner) in (0..SLOTS).zip(&self.owners) {
            if owner == NO_OWNER {
                continue;
            }
            match out.last_mut() {
                Some((_, end, o)) if *end + 1 == slot && *o == usize::from(owner) => *end = slot,
                _ => out.push((slot, slot, usize::from(owner))),
            }
        }
        out
    }

    /// Slots some master owns.
    #[must_use]
    pub fn slots_assigned(&self) -> usize {
        self.owners.iter().filter(|&&o| o != NO_OWNER).count()
    }

    /// Masters owning at least one slot (Redis's `cluster_size`).
    #[must_use]
    pub fn size(&self) -> usize {
        let mut owning = vec![false; self.nodes.len()];
        for &o in &self.owners {
            if let Some(b) = owning.get_mut(usize::from(o)) {
                *b = true;
            }
        }
        owning.into_iter().filter(|&b| b).count()
    }

    /// `CLUSTERX SETNODEID id`: which node this one is.
    ///
    /// # Errors
    /// The reason, when `id` is not 40 characters long.
    pub fn set_node_id(&mut self, id: &str) -> Result<(), String> {
        if !valid_id(id) {
            return Err("Invalid cluster node id".into());
        }
        self.myid = Some(id.to_owned());
        Ok(())
    }

    /// `CLUSTERX SETNODES text version [FORCE]`: replaces the whole
    /// topology with `text` (one node per line: `id ip port master -
    /// slots...` or `id ip port slave master-id`) at `version`. A version
    /// older than the current one is refused (unless forced); the current
    /// one changes nothing. Without a node id yet, this node is the one
    /// entry `is_me` accepts (given its address and port), if exactly one
    /// does; an id given by SETNODEID is kept, forced or not.
    ///
    /// Returns whether anything changed.
    ///
    /// # Errors
    /// The reason (Kvrocks's texts), with the topology unchanged.
    pub fn set_nodes(
        &mut self,
        text: &str,
        version: i64,
        force: bool,
        is_me: &dyn Fn(&str, u16) -> bool,
    ) -> Result<bool, String> {
        if version < 0 || (!force && self.version > version) {
            return Err("Invalid cluster version".into());
        }
        if !force && self.version == version {
            return Ok(false);
        }
        let (nodes, owners) = parse_nodes(text)?;
        if self.myid.is_none() {
            let mut mine = nodes.iter().filter(|n| is_me(&n.ip, n.port));
            if let (Some(n), None) = (mine.next(), mine.next()) {
                self.myid = Some(n.id.clone());
            }
        }
        self.nodes = nodes;
        self.owners = owners;
        self.version = version;
        Ok(true)
    }

    /// `CLUSTERX SETSLOT slots NODE id version`: gives `slots` to master
    /// `id`; `version` must be the current one plus one.
    ///
    /// # Errors
    /// The reason (Kvrocks's texts), with the topology unchanged.
    pub fn set_slots(&mut self, slots: &[SlotRange], id: &str, version: i64) -> Result<(), String> {
        if version <= 0 || Some(version) != self.version.checked_add(1) {
            return Err("Invalid cluster version".into());
        }
        let Some(index) = self.nodes.iter().position(|n| n.id == id) else {
            return Err("No this node in the cluster".into());
        };
        if self.nodes[index].master.is_some() {
            return Err("The node isn't a master".into());
        }
        let index = u16::try_from(index).map_err(|_| "too many nodes".to_string())?;
        for &(start, end) in slots {
            for slot in start..=end {
                self.owners[usize::from(slot)] = index;
            }
        }
        self.version = version;
        Ok(())
    }

    /// The topology as its file holds it (see [`Topology::from_file_text`]).
    #[must_use]
    pub fn to_file_text(&self) -> String {
        let mut out = String::from("# The cluster topology of this node, written by CLUSTERX. Do not edit.\n");
        out.push_str(&format!("version {}\n", self.version));
        if let Some(id) = &self.myid {
            out.push_str(&format!("id {id}\n"));
        }
        for (i, n) in self.nodes.iter().enumerate() {
            out.push_str(&format!("node {}\n", self.node_line(i, n)));
        }
        out
    }

    /// The topology from its file: a `version N` line, an `id ID` line if
    /// the node id is known, and one `node ...` line per node in the
    /// syntax of `CLUSTERX SETNODES`; `#` starts a comment line.
    ///
    /// # Errors
    /// The reason, naming the line.
    pub fn from_file_text(text: &str) -> Result<Topology, String> {
        let mut t = Topology::default();
        let mut version = None;
        let mut lines = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
            let bad = |why: &str| format!("line {}: {why}", n + 1);
            match word {
                "version" => version = Some(rest.trim().parse::<i64>().map_err(|_| bad("bad version"))?),
                "id" => t.set_node_id(rest.trim()).map_err(|e| bad(&e))?,
                "node" => lines.push(rest),
                _ => return Err(bad(&format!("unknown entry {word:?}"))),
            }
        }
        let version = version.ok_or("no version line")?;
        if version >= 0 {
            let (nodes, owners) = parse_nodes(&lines.join("\n"))?;
            t.nodes = nodes;
            t.owners = owners;
        } else if !lines.is_empty() {
            return Err("nodes listed without a version".into());
        }
        t.version = version;
        Ok(t)
    }

    /// Node `n` (at index `i`) as a SETNODES line.
    fn node_line(&self, i: usize, n: &Node) -> String {
        if let Some(m) = &n.master {
            return format!("{} {} {} slave {m}", n.id, n.ip, n.port);
        }
        let mut line = format!("{} {} {} master -", n.id, n.ip, n.port);
        for r in self.slots_of(i) {
            line.push(' ');
            line.push_str(&range_text(r));
        }
        line
    }

    /// CLUSTER NODES: one line per node, Redis's format (`id ip:port@cport
    /// flags master-id ping-sent pong-recv config-epoch link-state
    /// slots...`), every node connected, the version as every epoch.
    #[must_use]
    pub fn nodes_text(&self, now_ms: u64) -> String {
        let mut out = String::new();
        for (i, n) in self.nodes.iter().enumerate() {
            let me = self.myid.as_deref() == Some(n.id.as_str());
            let role = if n.master.is_some() { "slave" } else { "master" };
            let flags = if me { format!("myself,{role}") } else { role.to_string() };
            let ping = if me { 0 } else { now_ms.saturating_sub(1) };
            let cport = u32::from(n.port) + 10_000;
            out.push_str(&format!(
                "{} {}:{}@{cport} {flags} {} {ping} {now_ms} {} connected",
                n.id,
                n.ip,
                n.port,
                n.master.as_deref().unwrap_or("-"),
                self.version
            ));
            for r in self.slots_of(i) {
                out.push(' ');
                out.push_str(&range_text(r));
            }
            out.push('\n');
        }
        out
    }

    /// CLUSTER INFO's lines, as Redis 7 prints them (no gossip: no message
    /// counts).
    #[must_use]
    pub fn info_text(&self) -> String {
        let assigned = self.slots_assigned();
        let state = if assigned == usize::from(SLOTS) { "ok" } else { "fail" };
        let epoch = self.version.max(0);
        format!(
            "cluster_state:{state}\r\ncluster_slots_assigned:{assigned}\r\ncluster_slots_ok:{assigned}\r\n\
             cluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:{}\r\ncluster_size:{}\r\n\
             cluster_current_epoch:{epoch}\r\ncluster_my_epoch:{epoch}\r\ncluster_stats_messages_sent:0\r\n\
             cluster_stats_messages_received:0\r\ntotal_cluster_links_buffer_limit_exceeded:0\r\n",
            self.nodes.len(),
            self.size()
        )
    }

    /// The replicas of the master at `index` in [`Topology::nodes`].
    #[must_use]
    pub fn replicas_of(&self, index: usize) -> Vec<&Node> {
        let Some(master) = self.nodes.get(index) else { return Vec::new() };
        self.nodes.iter().filter(|n| n.master.as_deref() == Some(master.id.as_str())).collect()
    }
}

/// Whether `id` can be a node id: 40 printable characters (Kvrocks checks
/// the length; no space or control byte, so the topology file keeps it).
fn valid_id(id: &str) -> bool {
    id.len() == NODE_ID_LEN && id.bytes().all(|b| b.is_ascii_graphic())
}

/// Slot ranges as SETSLOT and CLUSTER NODES write them: `0-100 200`.
#[must_use]
pub fn slot_list_text(slots: &[SlotRange]) -> String {
    slots.iter().map(|&r| range_text(r)).collect::<Vec<_>>().join(" ")
}

/// `a-b`, or `a` for one slot.
fn range_text((start, end): SlotRange) -> String {
    if start == end {
        start.to_string()
    } else {
        format!("{start}-{end}")
    }
}

/// Parses a SETNODES text into nodes and the slot table (Kvrocks's rules
/// and texts): one node per line, `id ip port master - slots...` or `id ip
/// port slave|replica master-id`; slots are `n` or `a-b` with a < b; no
/// slot is owned twice. Blank lines and repeated spaces are skipped.
fn parse_nodes(text: &str) -> Result<(Vec<Node>, Vec<u16>), String> {
    const BAD_INFO: &str = "Invalid cluster nodes info";
    let mut nodes: Vec<Node> = Vec::new();
    let mut claims: Vec<(u16, u16, String)> = Vec::new();
    for line in text.split('\n') {
        let fields: Vec<&str> = line.split(' ').filter(|f| !f.is_empty()).collect();
        if fields.is_empty() {
            continue;
        }
        if fields.len() < 5 {
            return Err(BAD_INFO.into());
        }
        let id = fields[0];
        if !valid_id(id) {
            return Err("Invalid cluster node id".into());
        }
        if !fields[1].bytes().all(|b| b.is_ascii_graphic()) {
            return Err(BAD_INFO.into());
        }
        let port: u16 = fields[2].parse().map_err(|_| "Invalid cluster node port".to_string())?;
        let role = fields[3].to_ascii_lowercase();
        let master = match role.as_str() {
            "master" => {
                if fields[4] != "-" {
                    return Err("Invalid cluster node id".into());
                }
                None
            }
            "slave" | "replica" => {
                if !valid_id(fields[4]) {
                    return Err("Invalid cluster node id".into());
                }
                if fields.len() != 5 {
                    return Err(BAD_INFO.into());
                }
                Some(fields[4].to_owned())
            }
            _ => return Err("Invalid cluster node role".into()),
        };
        // A node listed twice: the later line wins, its slots with it.
        claims.retain(|c| c.2 != id);
        for token in &fields[5..] {
            if token.len() == NODE_ID_LEN && token.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err("Invalid nodes definition: Missing newline between node entries.".into());
            }
            let (start, end) = parse_range(token).ok_or("Slot is out of range")?;
            claims.push((start, end, id.to_owned()));
        }
        nodes.retain(|n| n.id != id);
        nodes.push(Node { id: id.to_owned(), ip: fields[1].to_owned(), port, master });
    }
    if nodes.is_empty() {
        return Err(BAD_INFO.into());
    }
    let mut owners = vec![NO_OWNER; usize::from(SLOTS)];
    for (start, end, id) in claims {
        let Some(index) = nodes.iter().position(|n| n.id == id) else { continue };
        let index = u16::try_from(index).map_err(|_| BAD_INFO.to_string())?;
        for slot in start..=end {
            let o = &mut owners[usize::from(slot)];
            if *o != NO_OWNER {
                return Err("Slot distribution is overlapped".into());
            }
            *o = index;
        }
    }
    Ok((nodes, owners))
}

/// A SETNODES slot token: `n`, or `a-b` with a < b, all below 16384.
fn parse_range(token: &str) -> Option<SlotRange> {
    let slot = |s: &str| s.parse::<u16>().ok().filter(|&n| n < SLOTS);
    match token.split_once('-') {
        None => slot(token).map(|n| (n, n)),
        Some((a, b)) => {
            let (a, b) = (slot(a)?, slot(b)?);
            (a < b).then_some((a, b))
        }
    }
}

/// A SETSLOT slot list: items `n` or `a-b` (a <= b) separated by spaces.
///
/// # Errors
/// Kvrocks's texts for a bad item.
pub fn parse_slot_list(list: &str) -> Result<Vec<SlotRange>, String> {
    let slot = |s: &str| -> Result<u16, String> {
        let n: i64 = s.parse().map_err(|_| {
            if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
                "Invalid slot id: out of numeric range".to_string()
            } else {
                "Invalid slot id: encounter non-integer characters".to_string()
            }
        })?;
        u16::try_from(n).ok().filter(|&n| n < SLOTS).ok_or_else(|| "Invalid slot id: out of numeric range".to_string())
    };
    let mut out = Vec::new();
    for token in list.split(' ').filter(|t| !t.is_empty()) {
        match token.split_once('-') {
            None => {
                let n = slot(token)?;
                out.push((n, n));
            }
            Some(("", _)) | Some((_, "")) => {
                return Err(format!(
                    "Invalid slot range: `{token}`. The character '-' can't appear in the first or last position."
                ))
            }
            Some((_, b)) if b.contains('-') => {
                return Err(format!(
                    "Invalid slot range: `{token}`. The slot range should be of the form `int1-int2`."
                ));
            }
            Some((a, b)) => {
                let (a, b) = (slot(a)?, slot(b)?);
                if a > b {
                    return Err(format!(
                        "Invalid slot range: `{token}`. The slot range `int1-int2` needs to satisfy the condition \
                         (int1 <= int2)."
                    ));
                }
                out.push((a, b));
            }
        }
    }
    if out.is_empty() {
        return Err("Invalid slot id: not started as an integer".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nobody(_: &str, _: u16) -> bool {
        false
    }

    fn id(c: char) -> String {
        std::iter::repeat_n(c, NODE_ID_LEN).collect()
    }

    fn three() -> String {
        format!(
            "{} 127.0.0.1 7001 master - 0-5460\n{} 127.0.0.1 7002 master - 5461-10922\n\
             {} 127.0.0.1 7003 master - 10923-16383\n{} 127.0.0.1 7004 slave {}",
            id('a'),
            id('b'),
            id('c'),
            id('d'),
            id('a')
        )
    }

    #[test]
    fn owners_follow_the_pushed_slots() {
        let mut t = Topology::default();
        assert_eq!(t.owner(0), Owner::Unserved, "no topology: nothing served");
        t.set_node_id(&id('b')).unwrap();
        assert!(t.set_nodes(&three(), 1, false, &nobody).unwrap());
        assert_eq!(t.owner(5461), Owner::Myself);
        assert_eq!(t.owner(10922), Owner::Myself);
        match t.owner(5460) {
            Owner::Other(n) => assert_eq!((n.id.as_str(), n.port), (id('a').as_str(), 7001)),
            o => panic!("{o:?}"),
        }
        assert_eq!(t.slots_assigned(), 16384);
        assert_eq!(t.size(), 3);
        assert_eq!(t.runs(), vec![(0, 5460, 0), (5461, 10922, 1), (10923, 16383, 2)]);
        assert_eq!(t.replicas_of(0).len(), 1);
    }

    #[test]
    fn versions_order_pushes() {
        let at_7001 = |_: &str, port: u16| port == 7001;
        let mut t = Topology::default();
        t.set_nodes(&three(), 5, false, &at_7001).unwrap();
        assert_eq!(t.myid(), Some(id('a').as_str()), "found by its address");
        assert_eq!(t.set_nodes(&three(), 4, false, &at_7001), Err("Invalid cluster version".into()), "stale");
        assert_eq!(t.set_nodes("garbage", 5, false, &at_7001), Ok(false), "the same version changes nothing");
        assert_eq!(t.set_nodes(&three(), -1, true, &at_7001), Err("Invalid cluster version".into()));
        let two = format!("{} 127.0.0.1 7001 master - 0-10922\n{} 127.0.0.1 7002 master - 10923", id('a'), id('b'));
        assert_eq!(t.set_nodes(&two, 2, true, &at_7001), Ok(true), "force takes an older version");
        assert_eq!(t.version(), 2);
        assert_eq!(t.owner(10922), Owner::Myself);
        assert!(matches!(t.owner(10923), Owner::Other(n) if n.id == id('b')));
        assert_eq!(t.owner(10924), Owner::Unserved, "slots left out of a push have no owner");
        assert_eq!(t.owner(16383), Owner::Unserved);
        assert_eq!(t.set_slots(&[(0, 10)], &id('a'), 4), Err("Invalid cluster version".into()), "not current + 1");
        assert_eq!(t.set_slots(&[(0, 10)], &id('e'), 3), Err("No this node in the cluster".into()));
        assert_eq!(t.version(), 2, "refused changes leave the version");
        t.set_nodes(&two, i64::MAX, false, &at_7001).unwrap();
        assert_eq!(t.set_slots(&[(0, 0)], &id('a'), i64::MIN), Err("Invalid cluster version".into()));
        assert_eq!(
            t.set_slots(&[(0, 0)], &id('a'), i64::MAX),
            Err("Invalid cluster version".into()),
            "no version after the last"
        );
    }

    #[test]
    fn an_id_is_guessed_only_from_one_matching_entry_and_never_replaced() {
        let me = |ip: &str, port: u16| ip == "127.0.0.1" && port == 7001;
        let text = format!("{} 10.0.0.5 7001 master - 0-100\n{} 127.0.0.1 7001 master - 101-200", id('a'), id('b'));
        let mut t = Topology::default();
        t.set_nodes(&text, 1, false, &me).unwrap();
        assert_eq!(t.myid(), Some(id('b').as_str()), "the same port on another address is another node");
        let mut both = Topology::default();
        both.set_nodes(&text, 1, false, &|_: &str, p: u16| p == 7001).unwrap();
        assert_eq!(both.myid(), None, "two candidates: no guess");
        t.set_node_id(&id('a')).unwrap();
        t.set_nodes(&text, 2, true, &me).unwrap();
        assert_eq!(t.myid(), Some(id('a').as_str()), "a forced push keeps the id SETNODEID gave");
    }

    #[test]
    fn a_node_listed_twice_keeps_only_its_last_line() {
        let text = format!(
            "{} 127.0.0.1 7001 master - 0-16383\n{} 127.0.0.1 7002 master -\n{} 127.0.0.1 7001 slave {}",
            id('a'),
            id('c'),
            id('a'),
            id('c')
        );
        let mut t = Topology::default();
        t.set_node_id(&id('a')).unwrap();
        t.set_nodes(&text, 1, false, &nobody).unwrap();
        assert_eq!(t.slots_assigned(), 0, "a replica owns no slots");
        assert_eq!(t.owner(0), Owner::Unserved);
        assert_eq!(Topology::from_file_text(&t.to_file_text()).unwrap(), t, "the file says what memory holds");
    }

    #[test]
    fn ids_with_spaces_or_control_bytes_are_refused() {
        let mut t = Topology::default();
        let spaced = format!("{} ", "a".repeat(39));
        assert_eq!(t.set_node_id(&spaced), Err("Invalid cluster node id".into()));
        let crlf = format!("{} 127.0.0.1 7001 slave {}\r", id('a'), "b".repeat(39));
        assert_eq!(t.set_nodes(&crlf, 1, false, &nobody), Err("Invalid cluster node id".into()));
        assert_eq!(t, Topology::default());
    }

    #[test]
    fn set_slots_moves_slots_to_a_master() {
        let mut t = Topology::default();
        t.set_node_id(&id('a')).unwrap();
        t.set_nodes(&three(), 1, false, &nobody).unwrap();
        assert_eq!(t.set_slots(&[(0, 0)], &id('d'), 2), Err("The node isn't a master".into()));
        t.set_slots(&[(0, 1), (7000, 7000)], &id('c'), 2).unwrap();
        assert!(matches!(t.owner(1), Owner::Other(n) if n.id == id('c')));
        assert!(matches!(t.owner(7000), Owner::Other(n) if n.id == id('c')));
        assert_eq!(t.owner(2), Owner::Myself);
        assert_eq!(t.version(), 2);
    }

    #[test]
    fn bad_node_texts_are_refused_with_kvrocks_s_reasons() {
        let a = id('a');
        let cases = [
            (String::new(), "Invalid cluster nodes info"),
            (format!("{a} 127.0.0.1 7001 master"), "Invalid cluster nodes info"),
            ("abc 127.0.0.1 7001 master -".to_string(), "Invalid cluster node id"),
            (format!("{a} 127.0.0.1 70000 master -"), "Invalid cluster node port"),
            (format!("{a} 127.0.0.1 7001 boss -"), "Invalid cluster node role"),
            (format!("{a} 127.0.0.1 7001 master - 5-5"), "Slot is out of range"),
            (format!("{a} 127.0.0.1 7001 master - 16384"), "Slot is out of range"),
            (format!("{a} 127.0.0.1 7001 master - 0-10 5"), "Slot distribution is overlapped"),
            (format!("{a} 127.0.0.1 7001 slave {a} 1"), "Invalid cluster nodes info"),
            (
                format!("{a} 127.0.0.1 7001 master - 1 {}", id('b')),
                "Invalid nodes definition: Missing newline between node entries.",
            ),
        ];
        for (text, why) in cases {
            let mut t = Topology::default();
            assert_eq!(t.set_nodes(&text, 1, false, &nobody), Err(why.to_string()), "{text:?}");
            assert_eq!(t, Topology::default(), "a refused push changes nothing");
        }
    }

    #[test]
    fn slot_lists_parse_as_kvrocks_s_setslot() {
        assert_eq!(parse_slot_list("1-3 4"), Ok(vec![(1, 3), (4, 4)]));
        assert_eq!(parse_slot_list("5-5"), Ok(vec![(5, 5)]));
        assert!(parse_slot_list("-3").unwrap_err().contains("first or last position"));
        assert!(parse_slot_list("1-2-3").unwrap_err().contains("form `int1-int2`"));
        assert!(parse_slot_list("4-3").unwrap_err().contains("int1 <= int2"));
        assert!(parse_slot_list("16384").unwrap_err().contains("out of numeric range"));
        assert!(parse_slot_list("99999999999999999999").unwrap_err().contains("out of numeric range"));
        assert!(parse_slot_list("x").unwrap_err().contains("non-integer"));
    }

    #[test]
    fn the_file_text_round_trips() {
        let mut t = Topology::default();
        t.set_node_id(&id('c')).unwrap();
        t.set_nodes(&three(), 7, false, &nobody).unwrap();
        t.set_slots(&[(100, 200), (16000, 16000)], &id('c'), 8).unwrap();
        let back = Topology::from_file_text(&t.to_file_text()).unwrap();
        assert_eq!(back, t);
        assert_eq!(Topology::from_file_text(&Topology::default().to_file_text()).unwrap(), Topology::default());
        assert!(Topology::from_file_text("version x\n").unwrap_err().contains("line 1"));
        assert!(Topology::from_file_text("bogus 1\n").is_err());
    }

    proptest::proptest! {
        /// Invariant: any text, as a push or as the topology file, gives a
        /// topology or a reason, never a panic; an accepted push survives
        /// the file's round trip.
        #[test]
        fn any_text_parses_or_is_refused(
            lines in proptest::collection::vec(
                (
                    proptest::sample::select(vec![id('a'), id('b'), "x".repeat(39), id('c') + "\r"]),
                    proptest::sample::select(vec!["127.0.0.1", "", "::1", "h\tx"]),
                    0u32..70_000,
                    proptest::sample::select(vec!["master", "slave", "replica", "MASTER", "boss"]),
                    proptest::sample::select(vec!["-".to_string(), id('a'), id('b')]),
                    proptest::collection::vec((0u32..17_000, 0u32..17_000, proptest::bool::ANY), 0..4),
                ),
                0..5,
            ),
            version in -2i64..3,
            junk in ".{0,40}",
        ) {
            let text: Vec<String> = lines
                .iter()
                .map(|(id, ip, port, role, master, slots)| {
                    let slots: Vec<String> =
                        slots.iter().map(|&(a, b, range)| if range { format!("{a}-{b}") } else { a.to_string() }).collect();
                    format!("{id} {ip} {port} {role} {master} {}", slots.join(" "))
                })
                .collect();
            let text = text.join("\n");
            let mut t = Topology::default();
            if t.set_nodes(&text, version, false, &nobody) == Ok(true) {
                proptest::prop_assert_eq!(Topology::from_file_text(&t.to_file_text()).unwrap(), t.clone());
            }
            let _ = t.set_nodes(&junk, version, true, &nobody);
            let _ = Topology::from_file_text(&junk);
            let _ = Topology::from_file_text(&format!("version {version}\nnode {text}"));
            let _ = parse_slot_list(&junk);
        }
    }

    #[test]
    fn nodes_text_has_redis_s_fields() {
        let mut t = Topology::default();
        t.set_node_id(&id('a')).unwrap();
        t.set_nodes(&three(), 3, false, &nobody).unwrap();
        let text = t.nodes_text(1000);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], format!("{} 127.0.0.1:7001@17001 myself,master - 0 1000 3 connected 0-5460", id('a')));
        assert_eq!(lines[3], format!("{} 127.0.0.1:7004@17004 slave {} 999 1000 3 connected", id('d'), id('a')));
        assert!(t.info_text().starts_with("cluster_state:ok\r\ncluster_slots_assigned:16384\r\n"));
    }
}
