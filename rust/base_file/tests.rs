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
