//! Moving slots between nodes: the state each side keeps while keys move.
//!
//! The source (`CLUSTERX MIGRATE slots target-id`) refuses writes to the
//! slots while it copies their keys (`TRYAGAIN`), then redirects every
//! command for them to the target (`MOVED`) until a topology push gives
//! them to the target, when it deletes its copies. The target, told by the
//! source's connection (`CLUSTER IMPORT slots 0|1|2`), first drops any keys
//! it holds in the slots, takes the keys from that connection only, and
//! once told the copy is complete serves the slots itself until the push.

use bitsled::Db;

use super::slot::key_slot;
use super::topology::{Node, SlotRange};

/// How far a migration got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MigrationState {
    /// Copying keys: writes to the slots are refused.
    Running,
    /// Every key is on the target: commands for the slots go there.
    Done,
    /// It stopped (the reason): the slots are served here as before.
    Failed(String),
}

/// A slot migration this node runs as the source.
#[derive(Clone, Debug)]
pub struct Migration {
    /// The slots moving.
    pub slots: Vec<SlotRange>,
    /// Where they go.
    pub target: Node,
    /// How far it got.
    pub state: MigrationState,
    /// Keys copied so far.
    pub keys: u64,
}

impl Migration {
    /// Whether it moves `slot`.
    #[must_use]
    pub fn covers(&self, slot: u16) -> bool {
        covers(&self.slots, slot)
    }

    /// Kvrocks's name of the state, for CLUSTER INFO.
    #[must_use]
    pub fn state_name(&self) -> &'static str {
        match self.state {
            MigrationState::Running => "start",
            MigrationState::Done => "success",
            MigrationState::Failed(_) => "fail",
        }
    }
}

/// This node's migrations as the source: the last job started, and the
/// slots already copied elsewhere that no push has taken from this node
/// yet (commands for them go to their new node).
#[derive(Clone, Debug, Default)]
pub struct Outgoing {
    /// The last migration started here: running, done or failed.
    pub job: Option<Migration>,
    /// Copied slots, each with the node that holds them now.
    pub migrated: Vec<(Vec<SlotRange>, Node)>,
}

impl Outgoing {
    /// The node `slot` was copied to, if it was and no push followed.
    #[must_use]
    pub fn moved_to(&self, slot: u16) -> Option<&Node> {
        self.migrated.iter().find(|(slots, _)| covers(slots, slot)).map(|(_, n)| n)
    }

    /// The running job, if one is.
    #[must_use]
    pub fn running(&self) -> Option<&Migration> {
        self.job.as_ref().filter(|m| m.state == MigrationState::Running)
    }

    /// Whether writes to `slot` wait: a running job moves it.
    #[must_use]
    pub fn frozen(&self, slot: u16) -> bool {
        self.running().is_some_and(|m| m.covers(slot))
    }
}

/// Whether `slot` is in one of `ranges`.
#[must_use]
pub fn covers(ranges: &[SlotRange], slot: u16) -> bool {
    ranges.iter().any(|&(a, b)| (a..=b).contains(&slot))
}

/// Slots this node imports (keys arriving) or has imported (serving them
/// until a topology push gives them to it).
#[derive(Clone, Debug, Default)]
pub struct Imports {
    /// Slots whose keys are arriving.
    pub importing: Vec<SlotRange>,
    /// Slots whose keys have all arrived.
    pub imported: Vec<SlotRange>,
}

impl Imports {
    /// Drops `slots` from both lists (their import ended or failed, or a
    /// push settled who owns them).
    pub fn forget(&mut self, slots: &[SlotRange]) {
        let mut gone = vec![false; usize::from(super::slot::SLOTS)];
        for &(a, b) in slots {
            for s in a..=b {
                gone[usize::from(s)] = true;
            }
        }
        let keep = |list: &mut Vec<SlotRange>| {
            let mut out: Vec<SlotRange> = Vec::new();
            for &(a, b) in list.iter() {
                for s in (a..=b).filter(|&s| !gone[usize::from(s)]) {
                    match out.last_mut() {
                        Some((_, end)) if *end + 1 == s => *end = s,
                        _ => out.push((s, s)),
                    }
                }
            }
            *list = out;
        };
        keep(&mut self.importing);
        keep(&mut self.imported);
    }
}

/// Every key of `db` whose slot is in `slots`, read 1,024 at a time,
/// handed to `each` one batch at a time until it answers `false`.
///
/// Cost: O(keys in the slots) in a store that orders keys by slot
/// ([`Db::slots_indexed`]), each slot's range walked on its own; else one
/// scan of every key.
pub(crate) fn for_keys_in(
    db: &Db,
    slots: &[SlotRange],
    mut each: impl FnMut(Vec<Vec<u8>>) -> Result<bool, String>,
) -> Result<(), String> {
    if db.slots_indexed() {
        for &(first, last) in slots {
            for slot in first..=last {
                let mut cursor = 0;
                loop {
                    let (keys, next) = db.scan_slot(slot, cursor, 1024).map_err(|e| e.to_string())?;
                    if !keys.is_empty() && !each(keys)? {
                        return Ok(());
                    }
                    if next == 0 {
                        break;
                    }
                    cursor = next;
                }
            }
        }
        return Ok(());
    }
    let mut cursor = 0;
    loop {
        let (keys, next) = db.scan(cursor, 1024).map_err(|e| e.to_string())?;
        let mine: Vec<Vec<u8>> = keys.into_iter().filter(|k| covers(slots, key_slot(k))).collect();
        if !mine.is_empty() && !each(mine)? {
            return Ok(());
        }
        if next == 0 {
            return Ok(());
        }
        cursor = next;
    }
}

/// Deletes every key of `db` in `slots` (their copies moved elsewhere, or
/// an import that did not finish); how many.
///
/// # Errors
/// The store's, as text.
pub fn drop_keys(db: &Db, slots: &[SlotRange]) -> Result<u64, String> {
    let mut n = 0;
    for_keys_in(db, slots, |keys| {
        for k in keys {
            n += u64::from(db.delete(&k).map_err(|e| e.to_string())?);
        }
        Ok(true)
    })?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgetting_slots_splits_ranges() {
        let mut i = Imports { importing: vec![(0, 10)], imported: vec![(20, 20), (30, 40)] };
        i.forget(&[(3, 4), (20, 20), (40, 50)]);
        assert_eq!(i.importing, vec![(0, 2), (5, 10)]);
        assert_eq!(i.imported, vec![(30, 39)]);
        assert!(covers(&i.importing, 6) && !covers(&i.importing, 3));
    }
}
