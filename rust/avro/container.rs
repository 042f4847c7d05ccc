//! Avro object container files: what Hudi writes for Avro timeline instants (HUDI_FORMAT §2.5):
//! magic `Obj\x01`, a metadata map holding `avro.schema` and `avro.codec`, a 16-byte sync marker,
//! then blocks of (record count, byte size, records, sync marker).

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::str::FromStr;

use apache_avro::Codec;
use serde_json::Value;

use super::json::{decode_datum, encode_datum};
use crate::error::{Error, Result};
use crate::logformat::datum::binary::{write_bytes, write_long, Reader};
use crate::logformat::datum::schema::Schema;

/// The four bytes every container file starts with.
pub const MAGIC: &[u8; 4] = b"Obj\x01";

/// A decoded container file.
#[derive(Debug)]
pub struct Container {
    /// The writer schema JSON from `avro.schema`.
    pub schema: String,
    /// The block codec name from `avro.codec` (`null` when absent).
    pub codec: String,
    /// Every record of every block, in order, as JSON (conventions in [`super::json`]).
    pub records: Vec<Value>,
}

fn corrupt(e: Error) -> Error {
    match e {
        // The datum reader reports bad bytes as Corrupt already; anything else from parsing the
        // embedded schema is also damage to this file, not a caller mistake.
        Error::InvalidArgument(m) => Error::Corrupt(format!("container schema: {m}")),
        other => other,
    }
}

/// Decodes a whole container file.
pub fn read_container(bytes: &[u8]) -> Result<Container> {
    if bytes.len() < MAGIC.len() || &bytes[..4] != MAGIC {
        return Err(Error::Corrupt(
            "not an Avro container file (bad magic)".into(),
        ));
    }
    let mut r = Reader::new(&bytes[4..]);
    let mut schema_json = None;
    let mut codec_name = None;
    loop {
        let n = r.block_count()?;
        if n == 0 {
            break;
        }
        for _ in 0..n {
            let key = r.string()?.to_owned();
            let value = r.bytes()?;
            match key.as_str() {
                "avro.schema" => schema_json = Some(utf8(value, "avro.schema")?),
                "avro.codec" => codec_name = Some(utf8(value, "avro.codec")?),
                _ => {}
            }
        }
    }
    let sync: [u8; 16] = r.fixed(16)?.try_into().expect("16 bytes");
    let schema_json =
        schema_json.ok_or_else(|| Error::Corrupt("container file has no avro.schema".into()))?;
    let codec_name = codec_name.unwrap_or_else(|| "null".to_owned());
    let codec = Codec::from_str(&codec_name)
        .map_err(|_| Error::Unsupported(format!("Avro container codec {codec_name:?}")))?;
    let schema = Schema::parse(&schema_json).map_err(corrupt)?;

    let mut records = Vec::new();
    while r.remaining() > 0 {
        let count = r.long()?;
        let size = r.long()?;
        let (Ok(count), Ok(size)) = (usize::try_from(count), usize::try_from(size)) else {
            return Err(Error::Corrupt(format!(
                "container block of {count} records, {size} bytes"
            )));
        };
        let mut data = r.fixed(size)?.to_vec();
        codec
            .decompress(&mut data)
            .map_err(|e| Error::Corrupt(format!("container block does not decompress: {e}")))?;
        let mut block = Reader::new(&data);
        if count > data.len().max(1 << 20) {
            return Err(Error::Corrupt(format!(
                "container block claims {count} records"
            )));
        }
        for _ in 0..count {
            records.push(decode_datum(&schema, &mut block)?);
        }
        if block.remaining() != 0 {
            return Err(Error::Corrupt(format!(
                "{} bytes left in a container block after its {count} records",
                block.remaining()
            )));
        }
        if r.fixed(16)? != sync {
            return Err(Error::Corrupt(
                "container block sync marker mismatch".into(),
            ));
        }
    }
    Ok(Container {
        schema: schema_json,
        codec: codec_name,
        records,
    })
}

fn utf8(bytes: &[u8], what: &str) -> Result<String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| Error::Corrupt(format!("{what} is not UTF-8")))
}

/// Decodes a container file to JSON text: an array of its records.
pub fn container_to_json(bytes: &[u8]) -> Result<String> {
    let c = read_container(bytes)?;
    serde_json::to_string(&Value::Array(c.records))
        .map_err(|e| Error::Unsupported(format!("records do not serialize to JSON: {e}")))
}

/// Encodes `records` (JSON values) with the writer schema `schema_json` into a container file,
/// codec null, all records in one block (none when there are no records), as Hudi writes them.
pub fn write_container(schema_json: &str, records: &[Value]) -> Result<Vec<u8>> {
    let schema = Schema::parse(schema_json)?;
    // Store the schema compactly, as Java's `Schema.toString()` does.
    let schema_value: Value = serde_json::from_str(schema_json)
        .map_err(|e| Error::InvalidArgument(format!("Avro schema is not JSON: {e}")))?;
    let schema_text = schema_value.to_string();

    let mut out = Vec::with_capacity(64 + schema_text.len());
    out.extend_from_slice(MAGIC);
    write_long(&mut out, 2);
    write_bytes(&mut out, b"avro.schema");
    write_bytes(&mut out, schema_text.as_bytes());
    write_bytes(&mut out, b"avro.codec");
    write_bytes(&mut out, b"null");
    write_long(&mut out, 0);
    let sync = sync_marker();
    out.extend_from_slice(&sync);

    if !records.is_empty() {
        let mut block = Vec::new();
        for (i, record) in records.iter().enumerate() {
            encode_datum(&schema, record, &mut block).map_err(|e| match e {
                Error::InvalidArgument(m) => Error::InvalidArgument(format!("record {i}: {m}")),
                other => other,
            })?;
        }
        write_long(&mut out, records.len() as i64);
        write_long(&mut out, block.len() as i64);
        out.extend_from_slice(&block);
        out.extend_from_slice(&sync);
    }
    Ok(out)
}

/// Encodes records given as JSON text (an array) with the writer schema `schema_json`.
pub fn json_to_container(schema_json: &str, records_json: &str) -> Result<Vec<u8>> {
    let records: Value = serde_json::from_str(records_json)
        .map_err(|e| Error::InvalidArgument(format!("records are not JSON: {e}")))?;
    let Value::Array(records) = records else {
        return Err(Error::InvalidArgument(
            "records JSON must be an array".into(),
        ));
    };
    write_container(schema_json, &records)
}

/// 16 unpredictable bytes; Java draws the marker at random too, it only has to be unlikely to
/// occur inside block data.
fn sync_marker() -> [u8; 16] {
    let mut out = [0u8; 16];
    for half in out.chunks_mut(8) {
        let mut h = RandomState::new().build_hasher();
        h.write_u64(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64),
        );
        half.copy_from_slice(&h.finish().to_le_bytes());
    }
    out
}
