//! The merge kernel of merge-on-read: decides, per record key, which version of a record
//! survives a base file and the log entries appended after it (HUDI_FORMAT §9.5).
//!
//! It follows Apache Hudi's two phases, which hudi-rs implements too, so all three readers
//! agree on any table: first the log entries of a key collapse oldest-first into one version
//! (a record or a tombstone), then that version is merged with the base record. A base file
//! can hold a key twice (inserts that allow duplicates): as in Hudi's file group reader, which
//! takes the log version out of its map at the first base record of the key, only that first
//! copy meets the log version, and the later copies read as stored.
//!
//! The kernel works on keys, ordering ranks and entry kinds only; callers build the merged
//! Arrow batches with `filter`/`take`, so every column type is supported without copying
//! records through Rust. Ordering values arrive as dense ranks (one integer scale for base and
//! log values) which keeps the kernel independent of the ordering field's type.

use ahash::AHashMap;

use crate::error::{Error, Result};

/// What a log entry does to its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    /// A new version of the record (a row of a data block).
    Record,
    /// A delete that competes on ordering (`_hoodie_is_deleted`, or a delete block entry whose
    /// ordering value matches the field's type): it loses to a strictly greater stored version.
    OrderedDelete,
    /// A delete that always applies (the delete operation; Hudi's default ordering value 0).
    Delete,
}

impl TryFrom<i8> for EntryKind {
    type Error = Error;

    fn try_from(v: i8) -> Result<Self> {
        match v {
            0 => Ok(EntryKind::Record),
            1 => Ok(EntryKind::OrderedDelete),
            2 => Ok(EntryKind::Delete),
            other => Err(Error::InvalidArgument(format!(
                "unknown merge entry kind {other}"
            ))),
        }
    }
}

/// How two versions of a record are ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MergeMode {
    /// The greatest ordering value wins; ties go to the later version.
    EventTime,
    /// The later version always wins.
    CommitTime,
}

/// The surviving versions: which base rows to keep and which log entries to take, in order.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct MergeOutcome {
    pub base_keep: Vec<bool>,
    pub log_take: Vec<u32>,
}

/// The collapsed log version of one key.
#[derive(Clone, Copy)]
struct LogVersion {
    /// The winning log entry, or None for a tombstone.
    entry: Option<u32>,
    /// None: an unconditional tombstone (Hudi's default ordering value), beaten by any record.
    rank: Option<u64>,
    /// Whether a base record of the key met this version already.
    met: bool,
}

/// Merges base rows with log entries applied oldest first.
///
/// `base_rank`/`log_rank` are the ordering ranks (only read in [`MergeMode::EventTime`]; when
/// absent every version ranks equal, so the later one wins).
pub fn merge_records<'a>(
    base_keys: impl ExactSizeIterator<Item = &'a str>,
    base_rank: Option<&[u64]>,
    log_keys: impl ExactSizeIterator<Item = &'a str>,
    log_rank: Option<&[u64]>,
    log_kinds: &[EntryKind],
    mode: MergeMode,
) -> Result<MergeOutcome> {
    let n_base = base_keys.len();
    let n_log = log_keys.len();
    if log_kinds.len() != n_log {
        return Err(Error::InvalidArgument(format!(
            "{} log keys but {} entry kinds",
            n_log,
            log_kinds.len()
        )));
    }
    if base_rank.is_some_and(|r| r.len() != n_base) || log_rank.is_some_and(|r| r.len() != n_log) {
        return Err(Error::InvalidArgument(
            "ordering ranks do not match the keys".into(),
        ));
    }
    let event_time = mode == MergeMode::EventTime;

    // Phase 1: collapse the log (Hudi's log scanner: preCombine for records, and deletes that
    // only lose to a strictly greater record when they carry an ordering value).
    let mut log: AHashMap<&'a str, LogVersion> = AHashMap::with_capacity(n_log);
    for (j, key) in log_keys.enumerate() {
        let kind = log_kinds[j];
        let rank = log_rank.map_or(0, |r| r[j]);
        let current = log.get(key).copied();
        let next = match (kind, current) {
            (EntryKind::Delete, _) => LogVersion {
                entry: None,
                rank: None,
                met: false,
            },
            (
                _,
                Some(LogVersion {
                    rank: Some(cur), ..
                }),
            ) if event_time && cur > rank => continue,
            (EntryKind::Record, _) => LogVersion {
                entry: Some(j as u32),
                rank: Some(rank),
                met: false,
            },
            (EntryKind::OrderedDelete, _) => LogVersion {
                entry: None,
                rank: Some(rank),
                met: false,
            },
        };
        log.insert(key, next);
    }

    // Phase 2: the first base record of each key against the key's collapsed log version.
    let mut base_keep = Vec::with_capacity(n_base);
    for (i, key) in base_keys.enumerate() {
        let keep = match log.get_mut(key) {
            None => true,
            Some(v) if v.met => true,
            Some(v) => {
                v.met = true;
                let keep = match (v.rank, event_time) {
                    (None, _) | (_, false) => false,
                    (Some(log_rank), true) => base_rank.map_or(0, |r| r[i]) > log_rank,
                };
                if keep {
                    // The base version wins: the log's version of the key is dropped.
                    v.entry = None;
                }
                keep
            }
        };
        base_keep.push(keep);
    }
    let mut log_take: Vec<u32> = log.values().filter_map(|v| v.entry).collect();
    log_take.sort_unstable();
    Ok(MergeOutcome {
        base_keep,
        log_take,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use EntryKind::*;

    fn run(
        base: &[(&'static str, u64)],
        log: &[(&'static str, u64, EntryKind)],
        mode: MergeMode,
    ) -> MergeOutcome {
        let base_rank: Vec<u64> = base.iter().map(|b| b.1).collect();
        let log_rank: Vec<u64> = log.iter().map(|l| l.1).collect();
        let kinds: Vec<EntryKind> = log.iter().map(|l| l.2).collect();
        merge_records(
            base.iter().map(|b| b.0),
            Some(&base_rank),
            log.iter().map(|l| l.0),
            Some(&log_rank),
            &kinds,
            mode,
        )
        .unwrap()
    }

    #[test]
    fn newer_event_wins_and_late_event_is_ignored() {
        let out = run(
            &[("a", 5), ("b", 5)],
            &[("a", 6, Record), ("b", 4, Record)],
            MergeMode::EventTime,
        );
        assert_eq!(out.base_keep, vec![false, true]);
        assert_eq!(out.log_take, vec![0]);
    }

    #[test]
    fn commit_time_takes_the_latest_whatever_the_ordering() {
        let out = run(
            &[("a", 5)],
            &[("a", 1, Record), ("a", 0, Record)],
            MergeMode::CommitTime,
        );
        assert_eq!(out.base_keep, vec![false]);
        assert_eq!(out.log_take, vec![1]);
    }

    #[test]
    fn ties_go_to_the_later_version() {
        let out = run(
            &[("a", 5)],
            &[("a", 5, Record), ("a", 5, Record)],
            MergeMode::EventTime,
        );
        assert_eq!(out.log_take, vec![1]);
    }

    #[test]
    fn hard_delete_always_applies_and_a_later_record_replaces_it_in_the_log() {
        let out = run(
            &[("a", 9), ("b", 9)],
            &[("a", 0, Delete), ("b", 0, Delete), ("b", 10, Record)],
            MergeMode::EventTime,
        );
        assert_eq!(out.base_keep, vec![false, false]);
        assert_eq!(out.log_take, vec![2]);
    }

    #[test]
    fn two_phase_merge_forgets_a_hard_delete_followed_by_an_older_record() {
        // As Hudi's log scanner and hudi-rs do: the log collapses to the record (rank 1), which
        // then loses to the base version (rank 9).
        let out = run(
            &[("b", 9)],
            &[("b", 0, Delete), ("b", 1, Record)],
            MergeMode::EventTime,
        );
        assert_eq!(out.base_keep, vec![true]);
        assert!(out.log_take.is_empty());
    }

    #[test]
    fn ordered_delete_loses_to_a_newer_version() {
        let out = run(
            &[("a", 9), ("b", 3)],
            &[
                ("a", 4, OrderedDelete),
                ("b", 4, OrderedDelete),
                ("b", 2, Record),
            ],
            MergeMode::EventTime,
        );
        // a survives (9 > 4); b is deleted and the late record (2 < 4) does not bring it back.
        assert_eq!(out.base_keep, vec![true, false]);
        assert!(out.log_take.is_empty());
    }

    #[test]
    fn only_the_first_base_copy_of_a_key_meets_the_log_version() {
        let out = run(
            &[("a", 1), ("b", 1), ("a", 2), ("a", 3)],
            &[("a", 9, Record), ("b", 9, Delete)],
            MergeMode::EventTime,
        );
        assert_eq!(out.base_keep, vec![false, false, true, true]);
        assert_eq!(out.log_take, vec![0]);
    }

    #[test]
    fn a_first_base_copy_that_wins_drops_the_log_version_and_keeps_the_others() {
        let out = run(
            &[("a", 9), ("a", 1)],
            &[("a", 5, Record)],
            MergeMode::EventTime,
        );
        assert_eq!(out.base_keep, vec![true, true]);
        assert!(out.log_take.is_empty());
    }

    #[test]
    fn log_only_keys_are_inserts() {
        let out = run(
            &[],
            &[("x", 1, Record), ("y", 1, Record), ("x", 2, Record)],
            MergeMode::EventTime,
        );
        assert_eq!(out.log_take, vec![1, 2]);
    }

    #[test]
    fn mismatched_lengths_are_errors_not_panics() {
        let err = merge_records(
            ["a"].into_iter(),
            None,
            ["a", "b"].into_iter(),
            None,
            &[Record],
            MergeMode::EventTime,
        );
        assert!(matches!(err, Err(Error::InvalidArgument(_))));
    }
}
