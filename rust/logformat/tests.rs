//! Tests against real Hudi-written log files (`shared/fixtures/log-files`, beside the repo).
//! Expected values come from the fixture bytes as decoded by the independent debug tool
//! `shared/tools/parse_log.py` (fastavro) and from the spec's worked examples.

use std::path::PathBuf;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, Int64Type};
use arrow_array::{Array, StringArray, UnionArray};

use super::avro_data::{avro_data_record_count, decode_avro_data_content};
use super::block::{encode_command_block, BlockType, HeaderKey};
use super::delete::{decode_delete_content, encode_delete_block, OrderingValue};
use super::reader::read_blocks;

fn fixture(dir: &str) -> Vec<u8> {
    let base = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/log-files");
    let dir = base.join(dir);
    let entry = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("fixture dir {} missing: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap().to_string_lossy().contains(".log."))
        .expect("a log file in the fixture dir");
    std::fs::read(entry).unwrap()
}

#[test]
fn avro_data_fixture_decodes_with_its_header_schema() {
    let file = fixture("valid_log_avro_data");
    let blocks = read_blocks(&file);
    assert_eq!(blocks.len(), 1);
    let b = &blocks[0];
    assert_eq!(b.block_type, BlockType::AvroData);
    assert_eq!((b.offset, b.size), (0, 1172));
    assert_eq!(b.instant_time(), Some("20250316025828811"));
    let keys: Vec<HeaderKey> = b.header.iter().map(|(k, _)| *k).collect();
    assert_eq!(keys, [HeaderKey::InstantTime, HeaderKey::Schema]);
    let content = b.content(&file);
    assert_eq!(content.len(), 240);
    assert_eq!(avro_data_record_count(content).unwrap(), 1);
    let schema = b.header_value(HeaderKey::Schema).unwrap();
    let batch = decode_avro_data_content(content, schema, None).unwrap();
    assert_eq!(batch.num_rows(), 1);
    let s = |name: &str| -> String {
        batch
            .column_by_name(name)
            .unwrap()
            .as_string::<i32>()
            .value(0)
            .to_string()
    };
    assert_eq!(s("_hoodie_commit_time"), "20250316025828811");
    assert_eq!(s("_hoodie_commit_seqno"), "20250316025828811_0_2");
    assert_eq!(
        s("_hoodie_record_key"),
        "334e26e9-8355-45cc-97c6-c31daf0df330"
    );
    assert_eq!(s("_hoodie_partition_path"), "city=san_francisco");
    assert_eq!(
        s("_hoodie_file_name"),
        "ff32ab89-5ad0-4968-83b4-89a34c95d32f-0"
    );
    assert_eq!(s("rider"), "rider-A");
    assert_eq!(s("driver"), "driver-K");
    assert_eq!(s("city"), "san_francisco");
    let ts = batch
        .column_by_name("ts")
        .unwrap()
        .as_primitive::<Int64Type>();
    assert_eq!(ts.value(0), 1695159649088);
    let fare = batch
        .column_by_name("fare")
        .unwrap()
        .as_primitive::<Float64Type>();
    assert_eq!(fare.value(0), 29.1);
}

#[test]
fn avro_data_fixture_reencodes_byte_exactly() {
    let file = fixture("valid_log_avro_data");
    let b = &read_blocks(&file)[0];
    let schema = b.header_value(HeaderKey::Schema).unwrap();
    let batch = decode_avro_data_content(b.content(&file), schema, None).unwrap();
    let again = super::avro_data::encode_avro_data_block(&batch, schema, &b.header).unwrap();
    assert_eq!(again, file);
}

#[test]
fn delete_fixture_decodes_and_reencodes_byte_exactly() {
    let file = fixture("valid_log_delete");
    let blocks = read_blocks(&file);
    assert_eq!(blocks.len(), 1);
    let b = &blocks[0];
    assert_eq!(b.block_type, BlockType::Delete);
    assert_eq!(b.size, 1098);
    assert_eq!(b.instant_time(), Some("20250618054714114"));
    let keys: Vec<HeaderKey> = b.header.iter().map(|(k, _)| *k).collect();
    assert_eq!(keys, [HeaderKey::Schema, HeaderKey::InstantTime]);
    let records = decode_delete_content(b.content(&file)).unwrap();
    let expected_keys = [
        "e96c4396-3fad-413a-a942-4cb36106d721",
        "9909a8b1-2d15-4d3d-8ec9-efc48c536a00",
        "334e26e9-8355-45cc-97c6-c31daf0df330",
    ];
    assert_eq!(records.len(), 3);
    for (r, k) in records.iter().zip(expected_keys) {
        assert_eq!(r.record_key.as_deref(), Some(k));
        assert_eq!(r.partition_path.as_deref(), Some("city=san_francisco"));
        // Spec §11: branch byte 04 = IntWrapper, value 00.
        assert_eq!(r.ordering_value, OrderingValue::Int(0));
    }
    // Re-encode from the decoded Arrow columns (ordering values as the decoded union).
    let batch = super::delete::deletes_to_arrow(&records).unwrap();
    let again = encode_delete_block(
        batch.column(0).as_ref(),
        batch.column(1).as_ref(),
        Some(batch.column(2).as_ref()),
        &b.header,
    )
    .unwrap();
    assert_eq!(again, file);
    // Spark SQL's default ordering value is IntWrapper(0), so `None` gives the same bytes.
    let keys = StringArray::from(expected_keys.to_vec());
    let parts = StringArray::from(vec!["city=san_francisco"; 3]);
    assert_eq!(
        encode_delete_block(&keys, &parts, None, &b.header).unwrap(),
        file
    );
    let union = batch
        .column(2)
        .as_any()
        .downcast_ref::<UnionArray>()
        .unwrap();
    assert_eq!(union.type_id(0), 2);
    assert_eq!(union.child(2).as_primitive::<Int32Type>().value(0), 0);
}

#[test]
fn rollback_fixture_reencodes_byte_exactly() {
    let file = fixture("valid_log_rollback");
    let blocks = read_blocks(&file);
    assert_eq!(blocks.len(), 1);
    let b = &blocks[0];
    assert_eq!(b.block_type, BlockType::Command);
    assert_eq!(b.instant_time(), Some("20250126040936578"));
    assert_eq!(
        b.header_value(HeaderKey::TargetInstantTime),
        Some("20250126040826878")
    );
    assert_eq!(b.header_value(HeaderKey::CommandBlockType), Some("0"));
    assert!(b.content(&file).is_empty());
    assert_eq!(encode_command_block(&b.header).unwrap(), file);
    let rebuilt = encode_command_block(&super::block::rollback_header(
        "20250126040936578",
        "20250126040826878",
    ))
    .unwrap();
    assert_eq!(rebuilt, file);
}

#[test]
fn parquet_fixture_exposes_a_whole_parquet_file() {
    let file = fixture("valid_log_parquet_data");
    let blocks = read_blocks(&file);
    assert_eq!(blocks.len(), 1);
    let b = &blocks[0];
    assert_eq!(b.block_type, BlockType::ParquetData);
    assert_eq!(b.instant_time(), Some("20250113230424191"));
    let content = b.content(&file);
    assert_eq!(content.len(), 4373);
    assert_eq!(&content[..4], b"PAR1");
    assert_eq!(&content[content.len() - 4..], b"PAR1");
}

#[test]
fn torn_fixture_tails_keep_the_first_block() {
    let mut base = fixture("valid_log_avro_data");
    base.extend(fixture("valid_log_delete"));
    let tail = fixture("valid_log_rollback");
    for cut in 0..tail.len() {
        let mut file = base.clone();
        file.extend_from_slice(&tail[..cut]);
        file.extend_from_slice(b"\xde\xad\xbe\xef");
        let blocks = read_blocks(&file);
        assert_eq!(blocks[0].block_type, BlockType::AvroData, "cut {cut}");
        assert_eq!(blocks[1].block_type, BlockType::Delete, "cut {cut}");
        assert_eq!(
            decode_delete_content(blocks[1].content(&file))
                .unwrap()
                .len(),
            3
        );
        assert!(blocks[2..].iter().all(|b| b.is_corrupt()), "cut {cut}");
        assert!(blocks.len() > 2);
    }
}
