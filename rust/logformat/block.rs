//! Block framing of Hudi log files (log format version 1): the enums persisted by ordinal and the
//! encoder that lays a block out byte for byte as Java's `HoodieLogFormatWriter` does.

use crate::error::{Error, Result};

/// The 6-byte marker that starts every block (`HoodieLogFormat.MAGIC`).
pub const MAGIC: &[u8; 6] = b"#HUDI#";

/// The only log format version Hudi 0.14 – 1.x writes (`HoodieLogFormat.CURRENT_VERSION`).
pub const LOG_FORMAT_VERSION: i32 = 1;

/// Version prefix of Avro-data and delete block contents written by Hudi 0.14 – 1.x
/// (`HoodieLogBlock.version`).
pub const CONTENT_VERSION: i32 = 3;

/// Kind of a log block; the discriminant is the ordinal Java persists (`HoodieLogBlockType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlockType {
    /// Command block; the only command is a rollback.
    Command = 0,
    /// Keys (with ordering values) deleted by one write.
    Delete = 1,
    /// Never written: readers synthesize it for bytes that do not frame as a block.
    Corrupt = 2,
    /// Records as length-prefixed Avro binary datums.
    AvroData = 3,
    /// Records in an HFile (metadata table).
    HFileData = 4,
    /// Records as a complete Parquet file.
    ParquetData = 5,
    /// Change-data-capture records.
    CdcData = 6,
}

impl BlockType {
    /// The block type persisted as `ordinal`, if Hudi defines one.
    pub fn from_ordinal(ordinal: i32) -> Option<Self> {
        Some(match ordinal {
            0 => Self::Command,
            1 => Self::Delete,
            2 => Self::Corrupt,
            3 => Self::AvroData,
            4 => Self::HFileData,
            5 => Self::ParquetData,
            6 => Self::CdcData,
            _ => return None,
        })
    }

    /// Java's enum constant name, e.g. `AVRO_DATA_BLOCK`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Command => "COMMAND_BLOCK",
            Self::Delete => "DELETE_BLOCK",
            Self::Corrupt => "CORRUPT_BLOCK",
            Self::AvroData => "AVRO_DATA_BLOCK",
            Self::HFileData => "HFILE_DATA_BLOCK",
            Self::ParquetData => "PARQUET_DATA_BLOCK",
            Self::CdcData => "CDC_DATA_BLOCK",
        }
    }

    /// True for the block types that carry records (`HoodieDataBlock` subclasses).
    pub fn is_data(self) -> bool {
        matches!(
            self,
            Self::AvroData | Self::HFileData | Self::ParquetData | Self::CdcData
        )
    }
}

/// Key of a header/footer entry (`HoodieLogBlock.HeaderMetadataType`, persisted by ordinal).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HeaderKey {
    /// Instant of the write that appended the block.
    InstantTime,
    /// Command blocks: the instant the command applies to.
    TargetInstantTime,
    /// Avro writer schema of the records, meta fields included.
    Schema,
    /// Command blocks: decimal ordinal of the command (`0` = rollback).
    CommandBlockType,
    /// Log-compaction blocks: comma-separated instants they replace.
    CompactedBlockTimes,
    /// Base64 of a serialized Roaring bitmap of base-file row positions.
    RecordPositions,
    /// De-duplicates retried appends.
    BlockIdentifier,
    /// `true` when `SCHEMA` is a partial-update schema.
    IsPartial,
    /// Instant of the base file `RECORD_POSITIONS` refer to.
    BaseFileInstantTimeOfRecordPositions,
    /// An ordinal this version does not know. Kept rather than rejected because Hudi only ever
    /// appends keys, so a newer writer's extra key must not make the block unreadable.
    Unknown(i32),
}

const KNOWN_KEYS: [(HeaderKey, &str); 9] = [
    (HeaderKey::InstantTime, "INSTANT_TIME"),
    (HeaderKey::TargetInstantTime, "TARGET_INSTANT_TIME"),
    (HeaderKey::Schema, "SCHEMA"),
    (HeaderKey::CommandBlockType, "COMMAND_BLOCK_TYPE"),
    (HeaderKey::CompactedBlockTimes, "COMPACTED_BLOCK_TIMES"),
    (HeaderKey::RecordPositions, "RECORD_POSITIONS"),
    (HeaderKey::BlockIdentifier, "BLOCK_IDENTIFIER"),
    (HeaderKey::IsPartial, "IS_PARTIAL"),
    (
        HeaderKey::BaseFileInstantTimeOfRecordPositions,
        "BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS",
    ),
];

impl HeaderKey {
    /// The key persisted as `ordinal`.
    pub fn from_ordinal(ordinal: i32) -> Self {
        usize::try_from(ordinal)
            .ok()
            .and_then(|i| KNOWN_KEYS.get(i))
            .map_or(Self::Unknown(ordinal), |(k, _)| *k)
    }

    /// The ordinal Java persists for this key.
    pub fn ordinal(self) -> i32 {
        match self {
            Self::Unknown(n) => n,
            known => KNOWN_KEYS
                .iter()
                .position(|(k, _)| *k == known)
                .expect("every known key is listed") as i32,
        }
    }

    /// Java's enum constant name, or the decimal ordinal for an unknown key.
    pub fn name(self) -> String {
        match self {
            Self::Unknown(n) => n.to_string(),
            known => KNOWN_KEYS[known.ordinal() as usize].1.to_string(),
        }
    }

    /// Parses a name produced by [`HeaderKey::name`].
    pub fn from_name(name: &str) -> Result<Self> {
        if let Some((k, _)) = KNOWN_KEYS.iter().find(|(_, n)| *n == name) {
            return Ok(*k);
        }
        match name.parse::<i32>() {
            Ok(n) if n >= 0 => Ok(Self::from_ordinal(n)),
            _ => Err(Error::InvalidArgument(format!(
                "unknown log block header key {name:?}"
            ))),
        }
    }
}

/// Header or footer entries in the order they are (or were) written. Order matters only for
/// byte-exact output: Java writes a `HashMap`, so real files show several orders.
pub type Header = Vec<(HeaderKey, String)>;

/// Looks a key up in a header.
pub fn header_get(header: &[(HeaderKey, String)], key: HeaderKey) -> Option<&str> {
    header
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.as_str())
}

fn put_metadata(out: &mut Vec<u8>, entries: &[(HeaderKey, String)]) -> Result<()> {
    out.extend_from_slice(&len_i32(entries.len(), "header entry count")?.to_be_bytes());
    for (key, value) in entries {
        out.extend_from_slice(&key.ordinal().to_be_bytes());
        out.extend_from_slice(&len_i32(value.len(), "header value")?.to_be_bytes());
        out.extend_from_slice(value.as_bytes());
    }
    Ok(())
}

/// Converts a length to the int32 Java writes, refusing what Java could not have written.
pub(crate) fn len_i32(len: usize, what: &str) -> Result<i32> {
    i32::try_from(len).map_err(|_| Error::InvalidArgument(format!("{what} too large: {len} bytes")))
}

/// Appends one complete block (magic through trailing total length) to `out`.
///
/// Layout (all integers big-endian): magic, int64 block size (bytes after this field), int32
/// format version 1, int32 block type, header, int64 content length, content, footer, int64
/// total length (magic through footer).
pub fn write_block(
    out: &mut Vec<u8>,
    block_type: BlockType,
    header: &[(HeaderKey, String)],
    content: &[u8],
    footer: &[(HeaderKey, String)],
) -> Result<()> {
    if block_type == BlockType::Corrupt {
        return Err(Error::InvalidArgument(
            "CORRUPT_BLOCK is synthesized by readers and never written".into(),
        ));
    }
    let start = out.len();
    out.extend_from_slice(MAGIC);
    let size_at = out.len();
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&LOG_FORMAT_VERSION.to_be_bytes());
    out.extend_from_slice(&(block_type as i32).to_be_bytes());
    put_metadata(out, header)?;
    out.extend_from_slice(&(content.len() as i64).to_be_bytes());
    out.extend_from_slice(content);
    put_metadata(out, footer)?;
    // Java counts the total from the magic through the footer and the block size from after the
    // size field through the total-length field, so block size = total + 8 - 14 = total - 6.
    let total = (out.len() - start) as i64;
    out.extend_from_slice(&total.to_be_bytes());
    let block_size = total - 6;
    out[size_at..size_at + 8].copy_from_slice(&block_size.to_be_bytes());
    Ok(())
}

/// Encodes one complete block into a fresh buffer; see [`write_block`].
pub fn encode_block(
    block_type: BlockType,
    header: &[(HeaderKey, String)],
    content: &[u8],
    footer: &[(HeaderKey, String)],
) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(64 + content.len());
    write_block(&mut out, block_type, header, content, footer)?;
    Ok(out)
}

/// The header of a ROLLBACK command block, in the order observed in Hudi-written files
/// (`INSTANT_TIME`, `COMMAND_BLOCK_TYPE`, `TARGET_INSTANT_TIME`).
pub fn rollback_header(instant_time: &str, target_instant_time: &str) -> Header {
    vec![
        (HeaderKey::InstantTime, instant_time.to_string()),
        (HeaderKey::CommandBlockType, ROLLBACK_COMMAND.to_string()),
        (
            HeaderKey::TargetInstantTime,
            target_instant_time.to_string(),
        ),
    ]
}

/// `COMMAND_BLOCK_TYPE` value of a rollback (`HoodieCommandBlockTypeEnum.ROLLBACK_BLOCK`).
pub const ROLLBACK_COMMAND: &str = "0";

/// Encodes a ROLLBACK command block: empty content, semantics in `header` (see
/// [`rollback_header`] for the usual one).
pub fn encode_command_block(header: &[(HeaderKey, String)]) -> Result<Vec<u8>> {
    encode_block(BlockType::Command, header, &[], &[])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_keys_round_trip_by_ordinal_and_name() {
        for i in 0..9 {
            let k = HeaderKey::from_ordinal(i);
            assert!(!matches!(k, HeaderKey::Unknown(_)));
            assert_eq!(k.ordinal(), i);
            assert_eq!(HeaderKey::from_name(&k.name()).unwrap(), k);
        }
        assert_eq!(HeaderKey::from_ordinal(42), HeaderKey::Unknown(42));
        assert_eq!(HeaderKey::from_name("42").unwrap(), HeaderKey::Unknown(42));
        assert!(HeaderKey::from_name("NOPE").is_err());
        assert_eq!(HeaderKey::Schema.ordinal(), 2);
        assert_eq!(HeaderKey::CommandBlockType.ordinal(), 3);
    }

    #[test]
    fn rollback_block_matches_spec_worked_example() {
        // Spec §11: the 105-byte rollback block, written out by hand from the hex dump.
        let mut expected = Vec::new();
        expected.extend_from_slice(b"#HUDI#");
        expected.extend_from_slice(&91i64.to_be_bytes());
        expected.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 3]);
        expected.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0x11]);
        expected.extend_from_slice(b"20250126040936578");
        expected.extend_from_slice(&[0, 0, 0, 3, 0, 0, 0, 1, b'0']);
        expected.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0x11]);
        expected.extend_from_slice(b"20250126040826878");
        expected.extend_from_slice(&[0; 8]);
        expected.extend_from_slice(&[0; 4]);
        expected.extend_from_slice(&97i64.to_be_bytes());
        assert_eq!(expected.len(), 105);
        let got = encode_command_block(&rollback_header("20250126040936578", "20250126040826878"))
            .unwrap();
        assert_eq!(got, expected);
    }

    #[test]
    fn corrupt_blocks_cannot_be_written() {
        assert!(encode_block(BlockType::Corrupt, &[], &[], &[]).is_err());
    }
}
