use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, DictionaryArray, Float64Array, Int32Array, Int64Array, RecordBatch,
    StringArray,
};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use bytes::Bytes;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;

use super::*;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::Utf8, true),
        Field::new("ts", DataType::Int64, true),
        Field::new("value", DataType::Float64, true),
    ]))
}

fn batch(keys: &[&str], ts: &[i64], values: &[f64]) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(StringArray::from(keys.to_vec())) as ArrayRef,
            Arc::new(Int64Array::from(ts.to_vec())),
            Arc::new(Float64Array::from(values.to_vec())),
        ],
    )
    .unwrap()
}

/// A file of two row groups written by the parquet crate's own writer.
fn old_file() -> Bytes {
    let mut out = Vec::new();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(3))
        .build();
    let mut w = ArrowWriter::try_new(&mut out, schema(), Some(props)).unwrap();
    w.write(&batch(
        &["a", "b", "c", "d", "e"],
        &[1, 2, 3, 4, 5],
        &[0.5, 1.5, 2.5, 3.5, 4.5],
    ))
    .unwrap();
    w.close().unwrap();
    Bytes::from(out)
}

fn opts() -> EncodeOptions {
    EncodeOptions {
        compression: "snappy".into(),
        dictionary_fields: vec!["key".into()],
        no_statistics_fields: vec!["ts".into()],
        dictionary_page_limit: 128 * 1024,
        data_page_size: 1 << 20,
        key_value: vec![("hoodie_min_record_key".into(), "a".into())],
    }
}

fn read(bytes: Vec<u8>) -> (Vec<RecordBatch>, ParquetMetaData) {
    let builder = ParquetRecordBatchReaderBuilder::try_new(Bytes::from(bytes)).unwrap();
    let metadata = builder.metadata().as_ref().clone();
    let batches = builder
        .build()
        .unwrap()
        .collect::<std::result::Result<_, _>>()
        .unwrap();
    (batches, metadata)
}

#[test]
fn copies_unchanged_fields_and_encodes_the_rest() {
    let old = ReplacedFile::parse(old_file()).unwrap();
    assert_eq!(old.row_group_rows(), vec![3, 2]);
    // Row group 0 keeps keys and values but gets new ts; row group 1 is copied whole; a third
    // row group holds an inserted record.
    let plan = vec![
        RowGroupPlan {
            batches: vec![batch(&["a", "b", "c"], &[10, 20, 30], &[0.5, 1.5, 2.5])],
            sources: vec![
                ChunkSource::Copy(0),
                ChunkSource::Encode,
                ChunkSource::Copy(0),
            ],
        },
        RowGroupPlan {
            // Copied fields are not read: these values must not reach the file.
            batches: vec![batch(&["x", "y"], &[0, 0], &[9.0, 9.0])],
            sources: vec![ChunkSource::Copy(1); 3],
        },
        RowGroupPlan {
            batches: vec![batch(&["f"], &[6], &[5.5])],
            sources: vec![ChunkSource::Encode; 3],
        },
    ];
    let bytes = write_spliced(&old, &schema(), &plan, &opts())
        .unwrap()
        .unwrap();
    let (batches, metadata) = read(bytes);
    let all = arrow_select::concat::concat_batches(&schema(), &batches).unwrap();
    assert_eq!(
        all,
        batch(
            &["a", "b", "c", "d", "e", "f"],
            &[10, 20, 30, 4, 5, 6],
            &[0.5, 1.5, 2.5, 3.5, 4.5, 5.5]
        )
    );
    assert_eq!(metadata.num_row_groups(), 3);
    let kv = metadata.file_metadata().key_value_metadata().unwrap();
    assert!(kv
        .iter()
        .any(|e| e.key == "hoodie_min_record_key" && e.value.as_deref() == Some("a")));
    // A copied chunk keeps its statistics; ts is written without any.
    let g0 = metadata.row_group(0);
    assert!(g0.column(0).statistics().is_some());
    assert!(g0.column(1).statistics().is_none());
    assert_eq!(
        g0.column(0).compressed_size(),
        old.metadata.row_group(0).column(0).compressed_size()
    );
}

#[test]
fn dictionary_rows_encode_into_string_columns() {
    let old = ReplacedFile::parse(old_file()).unwrap();
    let keys = DictionaryArray::new(
        Int32Array::from(vec![0, 0]),
        Arc::new(StringArray::from(vec!["k"])),
    );
    let dict_schema = Arc::new(Schema::new(vec![
        Field::new("key", keys.data_type().clone(), true),
        Field::new("ts", DataType::Int64, true),
        Field::new("value", DataType::Float64, true),
    ]));
    assert!(old.holds(&dict_schema));
    let rows = RecordBatch::try_new(
        dict_schema.clone(),
        vec![
            Arc::new(keys) as ArrayRef,
            Arc::new(Int64Array::from(vec![7, 8])),
            Arc::new(Float64Array::from(vec![1.0, 2.0])),
        ],
    )
    .unwrap();
    let plan = vec![RowGroupPlan {
        batches: vec![rows],
        sources: vec![ChunkSource::Encode; 3],
    }];
    let (batches, _) = read(
        write_spliced(&old, &dict_schema, &plan, &opts())
            .unwrap()
            .unwrap(),
    );
    let key = batches[0]
        .column(0)
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap();
    assert_eq!(key.iter().collect::<Vec<_>>(), vec![Some("k"), Some("k")]);
}

#[test]
fn refuses_a_schema_the_file_does_not_hold() {
    let old = ReplacedFile::parse(old_file()).unwrap();
    let other = Arc::new(Schema::new(vec![
        Field::new("key", DataType::Utf8, true),
        Field::new("ts", DataType::Int32, true),
        Field::new("value", DataType::Float64, true),
    ]));
    assert!(!old.holds(&other));
    let renamed = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, true),
        Field::new("ts", DataType::Int64, true),
        Field::new("value", DataType::Float64, true),
    ]));
    assert!(!old.holds(&renamed));
    assert!(write_spliced(&old, &other, &[], &opts()).unwrap().is_none());
}

#[test]
fn refuses_copies_from_a_row_group_of_another_length() {
    let old = ReplacedFile::parse(old_file()).unwrap();
    let plan = vec![RowGroupPlan {
        batches: vec![batch(&["a", "b"], &[1, 2], &[0.5, 1.5])],
        sources: vec![
            ChunkSource::Copy(0),
            ChunkSource::Encode,
            ChunkSource::Encode,
        ],
    }];
    assert!(matches!(
        write_spliced(&old, &schema(), &plan, &opts()),
        Err(Error::InvalidArgument(_))
    ));
    let missing = vec![RowGroupPlan {
        batches: vec![batch(&["a", "b", "c"], &[1, 2, 3], &[0.5, 1.5, 2.5])],
        sources: vec![
            ChunkSource::Copy(5),
            ChunkSource::Encode,
            ChunkSource::Encode,
        ],
    }];
    assert!(write_spliced(&old, &schema(), &missing, &opts()).is_err());
}

#[test]
fn corrupt_and_truncated_files_are_errors() {
    let bytes = old_file();
    for cut in [0, 4, 12, bytes.len() - 1] {
        let truncated = bytes.slice(..cut);
        assert!(matches!(
            ReplacedFile::parse(truncated),
            Err(Error::Corrupt(_))
        ));
    }
    let mut garbage = bytes.to_vec();
    let n = garbage.len();
    // Scramble the footer (keeping its length and the magic).
    for b in &mut garbage[n - 40..n - 8] {
        *b = 0xff;
    }
    assert!(ReplacedFile::parse(Bytes::from(garbage)).is_err());
}

#[test]
fn unsupported_codec_is_an_error() {
    let old = ReplacedFile::parse(old_file()).unwrap();
    let mut o = opts();
    o.compression = "brotli".into();
    assert!(matches!(
        write_spliced(&old, &schema(), &[], &o),
        Err(Error::Unsupported(_))
    ));
}
