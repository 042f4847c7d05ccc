//! Which blocks of a file slice's log files count, with Java's rollback semantics
//! (`AbstractHoodieLogRecordReader.scanInternalV1` with lazy block reading, the 0.14+ default).
//!
//! Blocks are read file by file in the order given (the caller sorts log files with Hudi's
//! `LogFileComparator`). Data, delete and corrupt blocks are queued; a data or delete block is
//! queued only if its instant is completed (or predates the first completed instant, i.e. was
//! archived) and not inflight, and lies in the instant range. A ROLLBACK command block removes
//! from the queue every block whose `INSTANT_TIME` equals its `TARGET_INSTANT_TIME`, and every
//! queued corrupt block. The first non-corrupt block with an instant after the query's
//! `max_instant` ends the scan, as in Java. What remains queued (minus corrupt blocks) is the
//! result, oldest first — the order in which records are merged.

use std::collections::HashSet;

use super::block::{BlockType, HeaderKey, ROLLBACK_COMMAND};
use super::reader::{read_blocks, LogBlock};

/// Timeline facts the scan filters blocks with. Instants compare as strings, as Java does.
#[derive(Clone, Debug, Default)]
pub struct ScanOptions {
    /// Completed instants of the commits timeline (commit, deltacommit, replacecommit,
    /// compaction). Instants earlier than all of them count as completed (archived).
    pub completed_instants: HashSet<String>,
    /// Pending instants of the commits timeline; their blocks are skipped even when they
    /// predate the first completed instant.
    pub inflight_instants: HashSet<String>,
    /// The query's latest instant: the scan stops at the first block after it.
    pub max_instant: Option<String>,
    /// Incremental range `(start, end]`; `None` bounds are open.
    pub instant_range: Option<(Option<String>, Option<String>)>,
}

impl ScanOptions {
    fn is_committed(&self, instant: &str, first_completed: Option<&str>) -> bool {
        if self.inflight_instants.contains(instant) {
            return false;
        }
        self.completed_instants.contains(instant) || first_completed.is_some_and(|f| instant < f)
    }

    fn in_range(&self, instant: &str) -> bool {
        match &self.instant_range {
            None => true,
            Some((start, end)) => {
                start.as_deref().is_none_or(|s| instant > s)
                    && end.as_deref().is_none_or(|e| instant <= e)
            }
        }
    }
}

/// A block that counts, and the index of the file (in the scan's input) it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScannedBlock {
    /// Index of the source file in the scan's input.
    pub file_index: usize,
    /// The block.
    pub block: LogBlock,
}

/// What a scan found.
#[derive(Clone, Debug, Default)]
pub struct ScanResult {
    /// Data and delete blocks to merge, oldest first.
    pub blocks: Vec<ScannedBlock>,
    /// Blocks read (of every type) before the scan ended.
    pub total_blocks: usize,
    /// Corrupt blocks read.
    pub corrupt_blocks: usize,
    /// Queued blocks removed by rollback command blocks (corrupt ones included).
    pub rolled_back_blocks: usize,
}

/// Scans the log files of one file slice, in order; see the module docs.
pub fn scan_log_files(files: &[&[u8]], options: &ScanOptions) -> ScanResult {
    let first_completed = options.completed_instants.iter().min().map(String::as_str);
    let mut result = ScanResult::default();
    let mut queue: Vec<ScannedBlock> = Vec::new();
    'files: for (file_index, file) in files.iter().enumerate() {
        for block in read_blocks(file) {
            result.total_blocks += 1;
            if block.is_corrupt() {
                result.corrupt_blocks += 1;
                // Java assumes a corrupt block was the next data block; a later rollback of
                // that write removes it.
                queue.push(ScannedBlock { file_index, block });
                continue;
            }
            let Some(instant) = block.instant_time().map(str::to_string) else {
                // Java cannot process a block without an instant (it fails on the missing
                // header); we drop it rather than guess when it was written.
                continue;
            };
            if options
                .max_instant
                .as_deref()
                .is_some_and(|max| instant.as_str() > max)
            {
                break 'files;
            }
            match block.block_type {
                BlockType::Command => {
                    if block.header_value(HeaderKey::CommandBlockType) != Some(ROLLBACK_COMMAND) {
                        // Java defines no other command; an unknown one cannot be applied.
                        continue;
                    }
                    let target = block
                        .header_value(HeaderKey::TargetInstantTime)
                        .unwrap_or("")
                        .to_string();
                    let before = queue.len();
                    queue.retain(|q| {
                        !q.block.is_corrupt() && q.block.instant_time() != Some(&target)
                    });
                    result.rolled_back_blocks += before - queue.len();
                }
                _ => {
                    if !options.is_committed(&instant, first_completed)
                        || !options.in_range(&instant)
                    {
                        continue;
                    }
                    queue.push(ScannedBlock { file_index, block });
                }
            }
        }
    }
    // Corrupt blocks that no rollback claimed are skipped at merge time (Java logs a warning).
    result.blocks = queue
        .into_iter()
        .filter(|q| !q.block.is_corrupt())
        .collect();
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logformat::block::{encode_block, encode_command_block, rollback_header};

    fn block(kind: BlockType, instant: &str) -> Vec<u8> {
        encode_block(
            kind,
            &[(HeaderKey::InstantTime, instant.to_string())],
            b"payload",
            &[],
        )
        .unwrap()
    }

    fn rollback(instant: &str, target: &str) -> Vec<u8> {
        encode_command_block(&rollback_header(instant, target)).unwrap()
    }

    fn instants(result: &ScanResult) -> Vec<(usize, String)> {
        result
            .blocks
            .iter()
            .map(|b| (b.file_index, b.block.instant_time().unwrap().to_string()))
            .collect()
    }

    fn completed(list: &[&str]) -> ScanOptions {
        ScanOptions {
            completed_instants: list.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn rollback_removes_every_block_of_its_target_and_queued_corrupt_blocks() {
        let mut f1 = block(BlockType::AvroData, "002");
        f1.extend(block(BlockType::AvroData, "003"));
        f1.extend(block(BlockType::Delete, "003"));
        f1.extend_from_slice(b"#HUDI#torn");
        let f2 = rollback("004", "003");
        let f3 = block(BlockType::Delete, "005");
        let opts = completed(&["001", "002", "003", "005"]);
        let r = scan_log_files(&[&f1, &f2, &f3], &opts);
        assert_eq!(instants(&r), vec![(0, "002".into()), (2, "005".into())]);
        assert_eq!(r.rolled_back_blocks, 3);
        assert_eq!(r.corrupt_blocks, 1);
        assert_eq!(r.total_blocks, 6);
    }

    #[test]
    fn blocks_of_uncompleted_instants_are_skipped() {
        let mut f = block(BlockType::AvroData, "001");
        f.extend(block(BlockType::AvroData, "003"));
        f.extend(block(BlockType::Delete, "004"));
        let mut opts = completed(&["002", "004"]);
        // 001 predates the first completed instant (archived), so it counts; 003 does not.
        assert_eq!(
            instants(&scan_log_files(&[&f], &opts)),
            vec![(0, "001".into()), (0, "004".into())]
        );
        // A known-inflight instant never counts, archived or not.
        opts.inflight_instants.insert("001".into());
        assert_eq!(
            instants(&scan_log_files(&[&f], &opts)),
            vec![(0, "004".into())]
        );
    }

    #[test]
    fn max_instant_stops_the_scan_and_range_filters() {
        let mut f = block(BlockType::AvroData, "002");
        f.extend(block(BlockType::AvroData, "004"));
        f.extend(block(BlockType::AvroData, "003"));
        let mut opts = completed(&["001", "002", "003", "004"]);
        opts.max_instant = Some("003".into());
        // Java stops at the first block after the max instant, even if later ones qualify.
        assert_eq!(
            instants(&scan_log_files(&[&f], &opts)),
            vec![(0, "002".into())]
        );
        opts.max_instant = None;
        opts.instant_range = Some((Some("002".into()), Some("003".into())));
        assert_eq!(
            instants(&scan_log_files(&[&f], &opts)),
            vec![(0, "003".into())]
        );
    }

    #[test]
    fn blocks_without_an_instant_are_dropped() {
        let mut f = encode_block(BlockType::AvroData, &[], b"x", &[]).unwrap();
        f.extend(block(BlockType::AvroData, "002"));
        let r = scan_log_files(&[&f], &completed(&["001", "002"]));
        assert_eq!(instants(&r), vec![(0, "002".into())]);
        assert_eq!(r.total_blocks, 2);
    }

    #[test]
    fn unmatched_rollback_is_ignored() {
        let mut f = block(BlockType::ParquetData, "002");
        f.extend(rollback("003", "009"));
        let r = scan_log_files(&[&f], &completed(&["001", "002"]));
        assert_eq!(instants(&r), vec![(0, "002".into())]);
        assert_eq!(r.rolled_back_blocks, 0);
    }
}
