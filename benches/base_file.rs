//! Base-file decoding throughput: the decode a Spark read through the Python data source waits
//! on (100k rows of a shoal base file's shape: five meta columns, a key, numbers and strings).

use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use shoal::base_file::BaseFileBatches;
use std::hint::black_box;

const ROWS: usize = 100_000;

fn strings(f: impl Fn(usize) -> String) -> ArrayRef {
    Arc::new(StringArray::from((0..ROWS).map(f).collect::<Vec<_>>()))
}

fn base_file() -> Bytes {
    let file_name = "2f3c-0_0-0-0_20261123181743233.parquet".to_string();
    let batch = RecordBatch::try_from_iter([
        (
            "_hoodie_commit_time",
            strings(|_| "20261123181743233".into()),
        ),
        (
            "_hoodie_commit_seqno",
            strings(|i| format!("20261123181743233_0_{i}")),
        ),
        (
            "_hoodie_record_key",
            strings(|i| format!("{i:08x}-c2b0-4636-99bd-5d7a5a1d2c04")),
        ),
        ("_hoodie_partition_path", strings(|_| "p3".into())),
        ("_hoodie_file_name", strings(|_| file_name.clone())),
        (
            "ts",
            Arc::new(Int64Array::from_iter_values(0..ROWS as i64)) as ArrayRef,
        ),
        (
            "fare",
            Arc::new(Float64Array::from_iter_values(
                (0..ROWS).map(|i| i as f64 * 0.25),
            )),
        ),
        ("note", strings(|i| format!("note {}", i * 7919 % 10007))),
    ])
    .unwrap();
    // Dictionary encoding and snappy, as shoal's base files are written.
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let mut out = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    Bytes::from(out)
}

fn decode(c: &mut Criterion) {
    let file = base_file();
    let mut group = c.benchmark_group("base_file");
    group.throughput(Throughput::Elements(ROWS as u64));
    group.bench_function("decode 100k rows, 8 columns", |b| {
        b.iter(|| {
            let mut batches = BaseFileBatches::open(file.clone(), None, 65_536).unwrap();
            let mut rows = 0;
            while let Some(batch) = batches.next_batch().unwrap() {
                rows += batch.num_rows();
            }
            black_box(rows)
        })
    });
    let key = ["_hoodie_record_key".to_string()];
    group.bench_function("decode 100k rows, the key column", |b| {
        b.iter(|| {
            let mut batches = BaseFileBatches::open(file.clone(), Some(&key), 65_536).unwrap();
            let mut rows = 0;
            while let Some(batch) = batches.next_batch().unwrap() {
                rows += batch.num_rows();
            }
            black_box(rows)
        })
    });
    group.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
