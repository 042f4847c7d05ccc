//! AVRO_DATA_BLOCKs whose records are JSON values rather than Arrow rows.
//!
//! Hudi's archived timeline (`.hoodie/archived/.commits_.archive.N_*`, HUDI_FORMAT §2.7) stores
//! `HoodieArchivedMetaEntry` records: deeply nested unions of records and maps that Arrow cannot
//! hold. These records take the JSON conventions of [`super::json`] and the block content layout
//! of `logformat::avro_data` (version 3: record count, then length-prefixed datums).

use serde_json::Value;

use super::json::{decode_datum, encode_datum};
use crate::error::{Error, Result};
use crate::logformat::avro_data::content_datums;
use crate::logformat::block::{encode_block, len_i32, BlockType, HeaderKey, CONTENT_VERSION};
use crate::logformat::datum::binary::Reader;
use crate::logformat::datum::schema::Schema;

/// Serializes `records` as version-3 Avro data block content, each one datum of `schema`.
pub fn encode_json_content(schema: &Schema, records: &[Value]) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(8 + 256 * records.len());
    out.extend_from_slice(&CONTENT_VERSION.to_be_bytes());
    out.extend_from_slice(&len_i32(records.len(), "record count")?.to_be_bytes());
    for (i, record) in records.iter().enumerate() {
        let at = out.len();
        out.extend_from_slice(&[0; 4]);
        encode_datum(schema, record, &mut out).map_err(|e| match e {
            Error::InvalidArgument(m) => Error::InvalidArgument(format!("record {i}: {m}")),
            other => other,
        })?;
        let len = len_i32(out.len() - at - 4, "record")?;
        out[at..at + 4].copy_from_slice(&len.to_be_bytes());
    }
    Ok(out)
}

/// Encodes a complete AVRO_DATA_BLOCK of `records` with the writer schema `schema_json`.
/// `header` is written as given; readers decode with its `SCHEMA` entry, which should hold
/// the same schema.
pub fn encode_json_block(
    schema_json: &str,
    records: &[Value],
    header: &[(HeaderKey, String)],
) -> Result<Vec<u8>> {
    let schema = Schema::parse(schema_json)?;
    let content = encode_json_content(&schema, records)?;
    encode_block(BlockType::AvroData, header, &content, &[])
}

/// Decodes version-3 Avro data block content written with `writer_schema_json` (the block's
/// `SCHEMA` header) into one JSON value per record. Every record must decode to exactly its
/// declared length.
pub fn decode_json_content(content: &[u8], writer_schema_json: &str) -> Result<Vec<Value>> {
    // The schema comes from the file's header: if it does not parse, the file is damaged.
    let schema = Schema::parse(writer_schema_json).map_err(|e| match e {
        Error::InvalidArgument(m) => Error::Corrupt(format!("SCHEMA header: {m}")),
        other => other,
    })?;
    let datums = content_datums(content)?;
    let mut records = Vec::with_capacity(datums.len());
    for (i, datum) in datums.into_iter().enumerate() {
        let mut r = Reader::new(datum);
        records.push(decode_datum(&schema, &mut r)?);
        if r.remaining() != 0 {
            return Err(Error::Corrupt(format!(
                "record {i} leaves {} of its {} bytes undecoded",
                r.remaining(),
                datum.len()
            )));
        }
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::logformat::reader::read_blocks;

    const ENTRY: &str = r#"{"type":"record","name":"Entry","namespace":"org.example","fields":[
        {"name":"commitTime","type":["null","string"],"default":null},
        {"name":"version","type":["int","null"],"default":1},
        {"name":"meta","type":["null",{"type":"record","name":"Meta","fields":[
            {"name":"stats","type":["null",{"type":"map","values":{"type":"array","items":
                {"type":"record","name":"Stat","fields":[
                    {"name":"fileId","type":["null","string"],"default":null},
                    {"name":"numWrites","type":["null","long"],"default":null}]}}}],"default":null},
            {"name":"extra","type":["null",{"type":"map","values":"string"}],"default":null}]}],
         "default":null},
        {"name":"again","type":["null","Meta"],"default":null}]}"#;

    fn entries() -> Vec<Value> {
        vec![
            json!({"commitTime": "20250101000000000", "version": 1, "meta": {
                "stats": {"p1": [{"fileId": "f-0", "numWrites": 1_i64 << 40}], "": []},
                "extra": {"schema": "{}"}}, "again": null}),
            json!({"commitTime": null, "version": null, "meta": null,
                   "again": {"stats": null, "extra": {}}}),
        ]
    }

    #[test]
    fn nested_unions_round_trip_through_a_framed_block() {
        let header = vec![(HeaderKey::Schema, ENTRY.to_string())];
        let block = encode_json_block(ENTRY, &entries(), &header).unwrap();
        let blocks = read_blocks(&block);
        assert_eq!(blocks.len(), 1);
        let b = &blocks[0];
        assert_eq!(b.block_type, BlockType::AvroData);
        assert_eq!(b.header, header);
        let back = decode_json_content(b.content(&block), ENTRY).unwrap();
        assert_eq!(back, entries());
    }

    #[test]
    fn missing_fields_take_their_defaults() {
        let schema = Schema::parse(ENTRY).unwrap();
        let content = encode_json_content(&schema, &[json!({})]).unwrap();
        let back = decode_json_content(&content, ENTRY).unwrap();
        assert_eq!(
            back,
            vec![json!({"commitTime": null, "version": 1, "meta": null, "again": null})]
        );
    }

    #[test]
    fn content_layout_is_version_count_and_length_prefixed_datums() {
        let schema = Schema::parse(
            r#"{"type":"record","name":"R","fields":[{"name":"s","type":"string"}]}"#,
        )
        .unwrap();
        let content =
            encode_json_content(&schema, &[json!({"s": "ab"}), json!({"s": ""})]).unwrap();
        // version 3, count 2, then (len 3: zig-zag 4 = "ab".len, 'a', 'b'), (len 1: zig-zag 0)
        assert_eq!(
            content,
            vec![0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 3, 4, b'a', b'b', 0, 0, 0, 1, 0]
        );
    }

    #[test]
    fn values_that_do_not_fit_the_schema_are_invalid_arguments() {
        let schema = Schema::parse(ENTRY).unwrap();
        let err = encode_json_content(&schema, &[json!({"commitTime": 5})]).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(m) if m.starts_with("record 0:")));
        let err = encode_json_content(&schema, &[json!({"nope": 1})]).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)));
    }

    #[test]
    fn bad_bytes_are_errors_not_panics() {
        let schema = Schema::parse(ENTRY).unwrap();
        let good = encode_json_content(&schema, &entries()).unwrap();
        // Every truncation and every single-byte corruption either decodes or errors.
        for cut in 0..good.len() {
            assert!(decode_json_content(&good[..cut], ENTRY).is_err());
        }
        for i in 0..good.len() {
            for v in [0u8, 0x7f, 0x80, 0xff] {
                let mut bad = good.clone();
                bad[i] = v;
                let _ = decode_json_content(&bad, ENTRY);
            }
        }
        assert!(matches!(
            decode_json_content(&good, "{not json"),
            Err(Error::Corrupt(_))
        ));
        let mut other_version = good.clone();
        other_version[3] = 2;
        assert!(matches!(
            decode_json_content(&other_version, ENTRY),
            Err(Error::Unsupported(_))
        ));
    }
}
