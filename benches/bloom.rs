//! Bloom filter build and probe throughput on Hudi's default DYNAMIC_V0 filter
//! (60,000 entries per row, fpp 1e-9, max 100,000 entries: 2,587,966 bits, 30 hashes).

use arrow_array::StringArray;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use shoal::bloom::{BloomFilter, BloomFilterType};
use std::hint::black_box;

/// A random-looking version-4 UUID string from a counter (splitmix64 of `i` and a stream salt).
fn uuid(i: u64, salt: u64) -> String {
    let mix = |mut z: u64| {
        z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let a = mix(i ^ (salt << 40));
    let b = mix(a);
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        0x8000 | (b >> 48) & 0x3fff,
        b & 0xffff_ffff_ffff
    )
}

const BUILD_KEYS: u64 = 100_000;
const PROBES: u64 = 100_000;

fn bench(c: &mut Criterion) {
    let present: Vec<String> = (0..BUILD_KEYS).map(|i| uuid(i, 1)).collect();
    let present_arr = StringArray::from(present.clone());

    let mut g = c.benchmark_group("bloom_build");
    g.throughput(Throughput::Elements(BUILD_KEYS));
    g.sample_size(10);
    g.bench_function("dynamic_v0_default_100k_keys", |b| {
        b.iter_batched(
            || BloomFilter::with_defaults(BloomFilterType::DynamicV0),
            |mut f| {
                f.add_array(&present_arr).unwrap();
                f
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();

    let mut filter = BloomFilter::with_defaults(BloomFilterType::DynamicV0);
    filter.add_array(&present_arr).unwrap();

    let mut g = c.benchmark_group("bloom_probe");
    g.throughput(Throughput::Elements(PROBES));
    // Percent of probed keys that are in the filter. The bloom index mostly probes absent keys
    // (a key is in at most one of the files it is probed against); present keys cost 30 hashes.
    for pct_present in [0u64, 10, 50, 100] {
        let keys: Vec<String> = (0..PROBES)
            .map(|i| {
                if (i * 7919) % 100 < pct_present {
                    present[((i * 7919) % BUILD_KEYS) as usize].clone()
                } else {
                    uuid(i, 2)
                }
            })
            .collect();
        let arr = StringArray::from(keys.clone());
        g.bench_function(format!("batch_{pct_present}pct_present"), |b| {
            b.iter(|| filter.might_contain_array(black_box(&arr)).unwrap())
        });
        if pct_present == 50 {
            g.bench_function("single_key_loop_50pct_present", |b| {
                b.iter(|| {
                    keys.iter()
                        .filter(|k| filter.might_contain(k.as_bytes()))
                        .count()
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
