//! Hudi log files (`.log.N_token`): block framing, block contents and the scan that decides
//! which blocks of a file slice count (spec §7).
//!
//! * [`block`] – enums and the byte-exact block encoder.
//! * [`reader`] – forward scan with resync on `#HUDI#` after damage.
//! * [`avro_data`] – AVRO_DATA_BLOCK contents <-> Arrow record batches.
//! * [`delete`] – DELETE_BLOCK contents (Java's `HoodieDeleteRecordList`).
//! * [`scanner`] – which blocks of a file slice count (completed instants, rollbacks).
//! * [`datum`] – Avro binary datums <-> Arrow for AVRO_DATA blocks.

pub mod avro_data;
pub mod block;
pub mod datum;
pub mod delete;
pub mod reader;
pub mod scanner;

#[cfg(test)]
mod tests;

pub use block::{BlockType, Header, HeaderKey};
pub use delete::{DeleteRecord, OrderingValue};
pub use reader::{read_blocks, LogBlock, LogReader};
pub use scanner::{scan_log_files, ScanOptions, ScanResult, ScannedBlock};
