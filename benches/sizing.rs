//! Record-size sampling cost per input row (the sampler runs on every incoming batch).

use std::sync::Arc;

use arrow_array::builder::{Int64Builder, ListBuilder};
use arrow_array::{ArrayRef, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray};
use arrow_array::{StructArray, TimestampMicrosecondArray};
use arrow_schema::{DataType, Field, Fields};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use shoal::sizing::{estimate_record_size, DEFAULT_SAMPLE_EVERY};
use std::hint::black_box;

const ROWS: usize = 100_000;

/// A trips-like batch: meta-style string keys, numbers, a timestamp, a list and a struct.
fn trips_batch() -> RecordBatch {
    let keys: Vec<String> = (0..ROWS)
        .map(|i| format!("{i:08x}-c2b0-4636-99bd-5d7a5a1d2c04"))
        .collect();
    let cities: Vec<&str> = (0..ROWS)
        .map(|i| ["chennai", "sao_paulo", "san_francisco"][i % 3])
        .collect();
    let mut tags = ListBuilder::new(Int64Builder::new());
    for i in 0..ROWS {
        tags.append_value((0..(i % 5) as i64).map(Some));
    }
    let location = StructArray::new(
        Fields::from(vec![
            Field::new("lat", DataType::Float64, true),
            Field::new("lon", DataType::Float64, true),
        ]),
        vec![
            Arc::new(Float64Array::from_iter_values((0..ROWS).map(|i| i as f64))) as ArrayRef,
            Arc::new(Float64Array::from_iter_values(
                (0..ROWS).map(|i| -(i as f64)),
            )),
        ],
        None,
    );
    RecordBatch::try_from_iter([
        (
            "_hoodie_record_key",
            Arc::new(StringArray::from(keys)) as ArrayRef,
        ),
        ("city", Arc::new(StringArray::from(cities))),
        (
            "ts",
            Arc::new(TimestampMicrosecondArray::from_iter_values(
                (0..ROWS as i64).map(|i| i * 1000),
            )),
        ),
        (
            "fare",
            Arc::new(Float64Array::from_iter_values(
                (0..ROWS).map(|i| i as f64 * 0.5),
            )),
        ),
        (
            "seats",
            Arc::new(Int32Array::from_iter_values(
                (0..ROWS as i32).map(|i| i % 7),
            )),
        ),
        (
            "driver_id",
            Arc::new(Int64Array::from_iter_values(0..ROWS as i64)),
        ),
        ("tags", Arc::new(tags.finish())),
        ("location", Arc::new(location)),
    ])
    .unwrap()
}

fn bench(c: &mut Criterion) {
    let batch = trips_batch();
    let mut g = c.benchmark_group("sizing");
    // Throughput in input rows, so criterion's time per element is the amortised ns/row.
    g.throughput(Throughput::Elements(ROWS as u64));
    for every in [DEFAULT_SAMPLE_EVERY, 1] {
        g.bench_function(
            format!("estimate_record_size_every_{every}_100k_rows"),
            |b| b.iter(|| estimate_record_size(black_box(&batch), every).unwrap()),
        );
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
