//! Copy-on-write merge writes: a 100k-row base file of 9 columns (two of them 36-byte keys)
//! written again, all columns encoded against only the two an update changed (the rest copied
//! from the replaced file). Reported as rows of the new file per second.

use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use shoal::splice::{write_spliced, ChunkSource, EncodeOptions, ReplacedFile, RowGroupPlan};

const ROWS: usize = 100_000;

fn schema() -> SchemaRef {
    let mut fields = vec![
        Field::new("_hoodie_record_key", DataType::Utf8, true),
        Field::new("key", DataType::Utf8, true),
        Field::new("ts", DataType::Int64, true),
    ];
    for name in ["f1", "f2"] {
        fields.push(Field::new(name, DataType::Float64, true));
    }
    for name in ["i1", "i2"] {
        fields.push(Field::new(name, DataType::Int64, true));
    }
    for name in ["s1", "s2"] {
        fields.push(Field::new(name, DataType::Utf8, true));
    }
    Arc::new(Schema::new(fields))
}

fn rows(version: i64) -> RecordBatch {
    let mix = |i: usize, salt: u64| (i as u64 ^ salt).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let keys: StringArray = (0..ROWS)
        .map(|i| Some(format!("{:016x}-{:019}", mix(i, 1), i)))
        .collect();
    let keys: ArrayRef = Arc::new(keys);
    let columns: Vec<ArrayRef> = vec![
        keys.clone(),
        keys,
        Arc::new(Int64Array::from_iter_values(
            (0..ROWS).map(|i| (mix(i, 2) % 1_000_000) as i64 + version),
        )),
        Arc::new(Float64Array::from_iter_values(
            (0..ROWS).map(|i| (mix(i, 3) % 1_000_000) as f64 / 7.0 + version as f64),
        )),
        Arc::new(Float64Array::from_iter_values(
            (0..ROWS).map(|i| (mix(i, 4) % 1_000_000) as f64 / 3.0),
        )),
        Arc::new(Int64Array::from_iter_values(
            (0..ROWS).map(|i| (mix(i, 5) >> 24) as i64),
        )),
        Arc::new(Int64Array::from_iter_values(
            (0..ROWS).map(|i| (mix(i, 6) % (1 << 20)) as i64),
        )),
        Arc::new(
            (0..ROWS)
                .map(|i| Some(format!("name-{}", mix(i, 7) % 100_000)))
                .collect::<StringArray>(),
        ),
        Arc::new(
            (0..ROWS)
                .map(|i| Some(format!("city-{}", mix(i, 8) % 1_000)))
                .collect::<StringArray>(),
        ),
    ];
    RecordBatch::try_new(schema(), columns).unwrap()
}

fn replaced_file() -> Bytes {
    let mut out = Vec::new();
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let mut w = ArrowWriter::try_new(&mut out, schema(), Some(props)).unwrap();
    w.write(&rows(0)).unwrap();
    w.close().unwrap();
    Bytes::from(out)
}

fn bench_splice(c: &mut Criterion) {
    let old = ReplacedFile::parse(replaced_file()).unwrap();
    let new_rows = rows(1);
    let opts = EncodeOptions {
        compression: "snappy".into(),
        dictionary_fields: vec!["s2".into()],
        no_statistics_fields: vec![],
        dictionary_page_limit: 128 * 1024,
        data_page_size: 1 << 20,
        key_value: vec![],
    };
    let fields = schema().fields().len();
    let changed = |i: usize| i == 2 || i == 3;
    let plans = [
        ("encode_all", vec![ChunkSource::Encode; fields]),
        (
            "copy_7_of_9",
            (0..fields)
                .map(|i| {
                    if changed(i) {
                        ChunkSource::Encode
                    } else {
                        ChunkSource::Copy(0)
                    }
                })
                .collect(),
        ),
    ];
    let mut group = c.benchmark_group("splice");
    group.throughput(Throughput::Elements(ROWS as u64));
    group.sample_size(20);
    for (name, sources) in plans {
        let plan = vec![RowGroupPlan {
            batches: vec![new_rows.clone()],
            sources,
        }];
        group.bench_with_input(BenchmarkId::from_parameter(name), &plan, |b, plan| {
            b.iter(|| {
                write_spliced(&old, &schema(), plan, &opts)
                    .unwrap()
                    .unwrap()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_splice);
criterion_main!(benches);
