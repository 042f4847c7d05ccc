use std::sync::Arc;

use arrow_array::{Array, Int64Array, StringArray};
use arrow_schema::{DataType, Field, Schema};
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::basic::{BrotliLevel, GzipLevel, ZstdLevel};
use parquet::file::properties::WriterProperties;

use super::*;

fn rows(n: usize) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("key", DataType::Utf8, false),
        Field::new("ts", DataType::Int64, true),
        Field::new("note", DataType::Utf8, true),
    ]));
    let keys: Vec<String> = (0..n).map(|i| format!("k{i:04}")).collect();
    let ts: Vec<Option<i64>> = (0..n)
        .map(|i| (i % 3 != 0).then_some(i as i64 * 10))
        .collect();
    let notes: Vec<Option<String>> = (0..n)
        .map(|i| (i % 2 == 0).then(|| format!("n{i}")))
        .collect();
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from(keys)),
            Arc::new(Int64Array::from(ts)),
            Arc::new(StringArray::from(notes)),
        ],
    )
    .unwrap()
}

fn file(batch: &RecordBatch, codec: Compression, row_group_rows: usize) -> Bytes {
    let props = WriterProperties::builder()
        .set_compression(codec)
        .set_max_row_group_row_count(Some(row_group_rows))
        .build();
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).unwrap();
    writer.write(batch).unwrap();
    writer.close().unwrap();
    Bytes::from(out)
}

fn read_all(file: Bytes, columns: Option<&[String]>, batch_size: usize) -> Vec<RecordBatch> {
    let mut batches = BaseFileBatches::open(file, columns, batch_size).unwrap();
    let mut out = Vec::new();
    while let Some(b) = batches.next_batch().unwrap() {
        out.push(b);
    }
    out
}

#[test]
fn batches_hold_every_row_in_file_order_across_row_groups() {
    let written = rows(10);
    for codec in [
        Compression::UNCOMPRESSED,
        Compression::SNAPPY,
        Compression::GZIP(GzipLevel::default()),
        Compression::ZSTD(ZstdLevel::default()),
    ] {
        // Row groups of 3 rows, batches of 4: batches do not follow row-group bounds.
        let batches = read_all(file(&written, codec, 3), None, 4);
        let sizes: Vec<usize> = batches.iter().map(|b| b.num_rows()).collect();
        assert_eq!(sizes, vec![4, 4, 2], "{codec}");
        let read = arrow_select::concat::concat_batches(&batches[0].schema(), &batches).unwrap();
        assert_eq!(read.columns(), written.columns(), "{codec}");
    }
}

#[test]
fn a_projection_decodes_only_the_named_columns_in_file_order() {
    let written = rows(5);
    let columns = ["note".to_string(), "key".to_string(), "absent".to_string()];
    let batches = read_all(
        file(&written, Compression::SNAPPY, 100),
        Some(&columns),
        100,
    );
    let schema = batches[0].schema();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["key", "note"]);
    assert_eq!(batches[0].column(0).as_ref(), written.column(0).as_ref());
    assert_eq!(batches[0].column(1).as_ref(), written.column(2).as_ref());
    assert_eq!(batches[0].column(1).null_count(), 2);
}

#[test]
fn a_codec_this_build_lacks_is_unsupported_before_any_decode() {
    assert!(decodable(Compression::SNAPPY));
    assert!(!decodable(Compression::BROTLI(BrotliLevel::default())));
    assert!(!decodable(Compression::LZ4));
    assert!(!decodable(Compression::LZ4_RAW));
    assert!(!decodable(Compression::LZO));
}

fn decode_all(file: Bytes) -> Result<usize> {
    let mut batches = BaseFileBatches::open(file, None, 10)?;
    let mut rows = 0;
    while let Some(b) = batches.next_batch()? {
        rows += b.num_rows();
    }
    Ok(rows)
}

#[test]
fn bad_bytes_are_errors_not_panics() {
    let good = file(&rows(50), Compression::SNAPPY, 100);
    assert_eq!(decode_all(good.clone()).unwrap(), 50);
    // Damaged page bytes under an intact footer: the open succeeds, the decode reports it.
    let mut damaged = good.to_vec();
    for b in &mut damaged[8..200] {
        *b = 0xA5;
    }
    for bad in [
        Bytes::from_static(b"not a parquet file at all"),
        Bytes::new(),
        good.slice(..good.len() / 2),
        good.slice(4..), // every offset the footer records now off by 4
        Bytes::from(damaged),
    ] {
        let outcome = decode_all(bad);
        assert!(matches!(outcome, Err(Error::Corrupt(_))), "{outcome:?}");
    }
}

#[test]
fn a_batch_size_of_zero_is_refused() {
    let good = file(&rows(3), Compression::SNAPPY, 100);
    assert!(matches!(
        BaseFileBatches::open(good, None, 0),
        Err(Error::InvalidArgument(_))
    ));
}

/// Rows with `_hoodie_record_key` repeating `key`, as a table keyed by one string field has
/// them, beside `twin_like`: as long as `key`, but other values.
fn keyed_rows(n: usize) -> RecordBatch {
    let keys: Vec<String> = (0..n).map(|i| format!("k{:04}", i % (n / 2 + 1))).collect();
    let like: Vec<String> = (0..n).map(|i| format!("x{:04}", i % (n / 2 + 1))).collect();
    let ts: Vec<Option<i64>> = (0..n).map(|i| (i % 3 != 0).then_some(i as i64)).collect();
    let schema = Arc::new(Schema::new(vec![
        Field::new("_hoodie_record_key", DataType::Utf8, true),
        Field::new("ts", DataType::Int64, true),
        Field::new("key", DataType::Utf8, true),
        Field::new("twin_like", DataType::Utf8, true),
        Field::new("ts_again", DataType::Int64, true),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from(keys.clone())),
            Arc::new(Int64Array::from(ts.clone())),
            Arc::new(StringArray::from(keys)),
            Arc::new(StringArray::from(like)),
            Arc::new(Int64Array::from(ts)),
        ],
    )
    .unwrap()
}

/// What the parquet crate's own reader gives for `columns` (all: None).
fn plain_read(file: Bytes, columns: Option<&[&str]>, batch_size: usize) -> Vec<RecordBatch> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
    let builder = match columns {
        None => builder,
        Some(names) => {
            let roots: Vec<usize> = builder
                .parquet_schema()
                .root_schema()
                .get_fields()
                .iter()
                .enumerate()
                .filter(|(_, f)| names.contains(&f.name()))
                .map(|(i, _)| i)
                .collect();
            let mask = ProjectionMask::roots(builder.parquet_schema(), roots);
            builder.with_projection(mask)
        }
    };
    let reader = builder.with_batch_size(batch_size).build().unwrap();
    reader.map(|b| b.unwrap()).collect()
}

fn shares_values(a: &dyn Array, b: &dyn Array) -> bool {
    let (a, b) = (a.to_data(), b.to_data());
    a.buffers()
        .iter()
        .map(|x| x.as_ptr())
        .eq(b.buffers().iter().map(|x| x.as_ptr()))
}

#[test]
fn a_column_stored_twice_is_decoded_once_with_the_same_rows_and_schema() {
    let written = keyed_rows(40);
    for (codec, row_group_rows) in [
        (Compression::SNAPPY, 100),
        (Compression::SNAPPY, 7),
        (Compression::UNCOMPRESSED, 13),
        (Compression::ZSTD(ZstdLevel::default()), 100),
    ] {
        let bytes = file(&written, codec, row_group_rows);
        let batches = read_all(bytes.clone(), None, 9);
        assert_eq!(
            batches,
            plain_read(bytes, None, 9),
            "{codec} {row_group_rows}"
        );
        for batch in &batches {
            // key repeats _hoodie_record_key, ts_again repeats ts; twin_like is only as long.
            assert!(shares_values(
                batch.column(2).as_ref(),
                batch.column(0).as_ref()
            ));
            assert!(shares_values(
                batch.column(4).as_ref(),
                batch.column(1).as_ref()
            ));
            assert!(!shares_values(
                batch.column(3).as_ref(),
                batch.column(2).as_ref()
            ));
        }
    }
}

#[test]
fn a_twin_asked_for_without_its_source_is_decoded_itself() {
    let written = keyed_rows(20);
    let bytes = file(&written, Compression::SNAPPY, 100);
    for names in [
        vec!["key"],
        vec!["key", "ts_again"],
        vec!["_hoodie_record_key", "key"],
        vec!["twin_like", "key", "ts"],
    ] {
        let columns: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        let batches = read_all(bytes.clone(), Some(&columns), 8);
        assert_eq!(
            batches,
            plain_read(bytes.clone(), Some(&names), 8),
            "{names:?}"
        );
    }
}

#[test]
fn columns_that_differ_in_one_row_group_are_not_twins() {
    // The same values in the first row group (rows 0-9), different ones after.
    let n = 20;
    let first: Vec<String> = (0..n).map(|i| format!("k{i:04}")).collect();
    let second: Vec<String> = (0..n)
        .map(|i| {
            if i < 10 {
                format!("k{i:04}")
            } else {
                format!("j{i:04}")
            }
        })
        .collect();
    let schema = Arc::new(Schema::new(vec![
        Field::new("a", DataType::Utf8, true),
        Field::new("b", DataType::Utf8, true),
    ]));
    let written = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from(first)),
            Arc::new(StringArray::from(second)),
        ],
    )
    .unwrap();
    let bytes = file(&written, Compression::SNAPPY, 10);
    let batches = read_all(bytes.clone(), None, 20);
    assert_eq!(batches, plain_read(bytes, None, 20));
    let read = arrow_select::concat::concat_batches(&batches[0].schema(), &batches).unwrap();
    assert_eq!(read.columns(), written.columns());
}

#[test]
fn equal_values_of_other_types_are_not_twins() {
    // int32 and int64 columns of the same numbers; a string and a binary column of the same
    // bytes: equal pages perhaps, but other Arrow types.
    let schema = Arc::new(Schema::new(vec![
        Field::new("s", DataType::Utf8, true),
        Field::new("b", DataType::Binary, true),
    ]));
    let values: Vec<&str> = vec!["a", "bb", "ccc", "a"];
    let written = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from(values.clone())),
            Arc::new(arrow_array::BinaryArray::from(
                values.iter().map(|v| v.as_bytes()).collect::<Vec<_>>(),
            )),
        ],
    )
    .unwrap();
    let bytes = file(&written, Compression::SNAPPY, 100);
    let batches = read_all(bytes.clone(), None, 100);
    assert_eq!(batches, plain_read(bytes, None, 100));
    assert_eq!(batches[0].column(1).data_type(), &DataType::Binary);
}
