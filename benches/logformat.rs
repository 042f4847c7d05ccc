//! Avro data block encode/decode throughput (MB/s of block content) on a 100k-row batch shaped
//! like a Hudi upsert: record key, partition path, a long ordering field and six payload
//! columns, every field a nullable union as Spark writes them.

use std::hint::black_box;
use std::sync::Arc;

use arrow_array::{
    ArrayRef, BooleanArray, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
};
use arrow_schema::{DataType, Field, Schema};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use shoal::logformat::avro_data::{decode_avro_data_content, encode_avro_data_content};
use shoal::logformat::datum::schema::Schema as AvroSchema;

const ROWS: usize = 100_000;

const SCHEMA: &str = r#"{"type":"record","name":"bench_record","namespace":"hoodie.bench","fields":[
 {"name":"_hoodie_record_key","type":["null","string"],"default":null},
 {"name":"_hoodie_partition_path","type":["null","string"],"default":null},
 {"name":"ts","type":["null","long"],"default":null},
 {"name":"rider","type":["null","string"],"default":null},
 {"name":"driver","type":["null","string"],"default":null},
 {"name":"fare","type":["null","double"],"default":null},
 {"name":"tip","type":["null","double"],"default":null},
 {"name":"seats","type":["null","int"],"default":null},
 {"name":"paid","type":["null","boolean"],"default":null}]}"#;

/// Deterministic pseudo-random stream (splitmix64), so every run benches the same data.
fn mix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn batch() -> RecordBatch {
    let r = |i: usize, salt: u64| mix(i as u64 ^ (salt << 40));
    let keys: StringArray = (0..ROWS)
        .map(|i| {
            let (a, b) = (r(i, 1), r(i, 2));
            Some(format!(
                "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
                a >> 32,
                (a >> 16) & 0xffff,
                a & 0xfff,
                0x8000 | ((b >> 48) & 0x3fff),
                b & 0xffff_ffff_ffff
            ))
        })
        .collect();
    let cities = ["city=san_francisco", "city=sao_paulo", "city=chennai"];
    let partitions: StringArray = (0..ROWS)
        .map(|i| Some(cities[(r(i, 3) % 3) as usize]))
        .collect();
    let ts: Int64Array = (0..ROWS)
        .map(|i| Some(1_695_000_000_000 + (r(i, 4) % 1_000_000_000) as i64))
        .collect();
    let riders: StringArray = (0..ROWS)
        .map(|i| Some(format!("rider-{}", r(i, 5) % 1000)))
        .collect();
    let drivers: StringArray = (0..ROWS)
        .map(|i| (r(i, 6) % 10 != 0).then(|| format!("driver-{}", r(i, 6) % 5000)))
        .collect();
    let fare: Float64Array = (0..ROWS)
        .map(|i| Some((r(i, 7) % 10_000) as f64 / 100.0))
        .collect();
    let tip: Float64Array = (0..ROWS)
        .map(|i| (r(i, 8) % 4 != 0).then(|| (r(i, 8) % 500) as f64 / 100.0))
        .collect();
    let seats: Int32Array = (0..ROWS).map(|i| Some((r(i, 9) % 7) as i32)).collect();
    let paid: BooleanArray = (0..ROWS).map(|i| Some(r(i, 10) % 2 == 0)).collect();
    let fields = vec![
        Field::new("_hoodie_record_key", DataType::Utf8, true),
        Field::new("_hoodie_partition_path", DataType::Utf8, true),
        Field::new("ts", DataType::Int64, true),
        Field::new("rider", DataType::Utf8, true),
        Field::new("driver", DataType::Utf8, true),
        Field::new("fare", DataType::Float64, true),
        Field::new("tip", DataType::Float64, true),
        Field::new("seats", DataType::Int32, true),
        Field::new("paid", DataType::Boolean, true),
    ];
    let columns: Vec<ArrayRef> = vec![
        Arc::new(keys),
        Arc::new(partitions),
        Arc::new(ts),
        Arc::new(riders),
        Arc::new(drivers),
        Arc::new(fare),
        Arc::new(tip),
        Arc::new(seats),
        Arc::new(paid),
    ];
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap()
}

fn bench(c: &mut Criterion) {
    let batch = batch();
    let schema = AvroSchema::parse(SCHEMA).unwrap();
    let content = encode_avro_data_content(&batch, &schema).unwrap();
    let mut g = c.benchmark_group("avro_data_block");
    g.throughput(Throughput::Bytes(content.len() as u64));
    g.sample_size(20);
    g.bench_function("encode_100k_rows", |b| {
        b.iter(|| encode_avro_data_content(black_box(&batch), &schema).unwrap())
    });
    g.bench_function("decode_100k_rows", |b| {
        b.iter(|| decode_avro_data_content(black_box(&content), SCHEMA, None).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
