//! AVRO_DATA_BLOCK content (version 3): int32 version, int32 record count, then per record an
//! int32 byte length and the Avro binary datum encoded with the block's `SCHEMA` header.

use std::sync::Arc;

use arrow_array::RecordBatch;

use super::block::{encode_block, len_i32, BlockType, HeaderKey, CONTENT_VERSION};
use super::datum::arrow::record_to_arrow_schema;
use super::datum::decode::RecordDecoder;
use super::datum::encode::RecordEncoder;
use super::datum::schema::Schema;
use crate::error::{Error, Result};

/// Serializes a batch into version-3 Avro data block content, each row as one datum of
/// `schema` (an Avro record whose fields are matched to the batch columns by name).
pub fn encode_avro_data_content(batch: &RecordBatch, schema: &Schema) -> Result<Vec<u8>> {
    let encoder = RecordEncoder::new(schema, batch)?;
    let mut out = Vec::with_capacity(8 + batch.get_array_memory_size() + 8 * batch.num_rows());
    out.extend_from_slice(&CONTENT_VERSION.to_be_bytes());
    out.extend_from_slice(&len_i32(batch.num_rows(), "record count")?.to_be_bytes());
    for row in 0..batch.num_rows() {
        let at = out.len();
        out.extend_from_slice(&[0; 4]);
        encoder.write_row(row, &mut out)?;
        let len = len_i32(out.len() - at - 4, "record")?;
        out[at..at + 4].copy_from_slice(&len.to_be_bytes());
    }
    Ok(out)
}

/// Encodes a complete AVRO_DATA_BLOCK. `schema_json` is the writer schema used for the
/// records; `header` is written as given (it normally holds `INSTANT_TIME` and this same
/// schema as `SCHEMA`, which readers decode with).
pub fn encode_avro_data_block(
    batch: &RecordBatch,
    schema_json: &str,
    header: &[(HeaderKey, String)],
) -> Result<Vec<u8>> {
    let schema = Schema::parse(schema_json)?;
    let content = encode_avro_data_content(batch, &schema)?;
    encode_block(BlockType::AvroData, header, &content, &[])
}

/// Checks the version prefix and returns (record count, offset of the first record).
fn content_prefix(content: &[u8]) -> Result<usize> {
    if content.len() < 8 {
        return Err(Error::Corrupt(
            "Avro data block content shorter than 8 bytes".into(),
        ));
    }
    let version = i32::from_be_bytes([content[0], content[1], content[2], content[3]]);
    match version {
        CONTENT_VERSION => {}
        // Real but ancient layouts (pre-0.6 writers).
        1 | 2 => {
            return Err(Error::Unsupported(format!(
                "Avro data block content version {version} (only 3 is supported)"
            )))
        }
        _ => {
            return Err(Error::Corrupt(format!(
                "Avro data block content version {version} is not a Hudi version"
            )))
        }
    }
    let count = i32::from_be_bytes([content[4], content[5], content[6], content[7]]);
    let count = usize::try_from(count)
        .map_err(|_| Error::Corrupt(format!("negative record count {count}")))?;
    // Each record takes at least its 4-byte length.
    if count > (content.len() - 8) / 4 {
        return Err(Error::Corrupt(format!(
            "record count {count} exceeds the block content"
        )));
    }
    Ok(count)
}

/// The record datums of version-3 Avro data block content (a record count, then each record
/// as a 4-byte big-endian length and its Avro binary datum), checked against the content's size.
pub(crate) fn content_datums(content: &[u8]) -> Result<Vec<&[u8]>> {
    let count = content_prefix(content)?;
    let mut datums = Vec::with_capacity(count);
    let mut pos = 8;
    for i in 0..count {
        let len_bytes = content
            .get(pos..pos + 4)
            .ok_or_else(|| Error::Corrupt(format!("record {i} length truncated")))?;
        let len = i32::from_be_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]);
        let len = usize::try_from(len)
            .map_err(|_| Error::Corrupt(format!("record {i} has negative length {len}")))?;
        pos += 4;
        let datum = content
            .get(pos..pos + len)
            .ok_or_else(|| Error::Corrupt(format!("record {i} runs past the block content")))?;
        datums.push(datum);
        pos += len;
    }
    Ok(datums)
}

/// The record count an Avro data block's content declares.
pub fn avro_data_record_count(content: &[u8]) -> Result<usize> {
    content_prefix(content)
}

/// Decodes Avro data block content written with `writer_schema_json` (the block's `SCHEMA`
/// header). With a `reader_schema_json` the records are resolved to it (schema evolution:
/// fields the writer lacks come back null or with their default). The batch schema is the
/// Arrow form of the reader (or writer) record.
pub fn decode_avro_data_content(
    content: &[u8],
    writer_schema_json: &str,
    reader_schema_json: Option<&str>,
) -> Result<RecordBatch> {
    // The writer schema comes from the file: if it does not parse, the file is damaged.
    let writer = Schema::parse(writer_schema_json).map_err(|e| match e {
        Error::InvalidArgument(m) => Error::Corrupt(format!("SCHEMA header: {m}")),
        other => other,
    })?;
    let reader = reader_schema_json.map(Schema::parse).transpose()?;
    let arrow_schema = Arc::new(record_to_arrow_schema(reader.as_ref().unwrap_or(&writer))?);
    let datums = content_datums(content)?;
    let mut decoder = RecordDecoder::new(&writer, reader.as_ref(), arrow_schema)?;
    for datum in datums {
        decoder.decode(datum)?;
    }
    decoder.finish()
}
