//! Merge-on-read kernel throughput: a 1M-row base with 10% of its keys updated in the log
//! (plus some log-only inserts), event-time ordering. Reported as merged rows per second.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use shoal::merge::{merge_records, EntryKind, MergeMode};

fn keys(n: usize, prefix: &str) -> Vec<String> {
    (0..n)
        .map(|i| {
            format!(
                "{prefix}-{i:08}-{:016x}",
                (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            )
        })
        .collect()
}

fn bench_merge(c: &mut Criterion) {
    let mut group = c.benchmark_group("merge_records");
    for &base_rows in &[100_000usize, 1_000_000] {
        let base = keys(base_rows, "k");
        let updates = base_rows / 10;
        let mut log: Vec<String> = base.iter().step_by(10).cloned().collect();
        log.extend(keys(updates / 2, "new"));
        let base_rank: Vec<u64> = (0..base_rows as u64).map(|i| i % 1000).collect();
        let log_rank: Vec<u64> = (0..log.len() as u64).map(|i| 500 + i % 1000).collect();
        let kinds = vec![EntryKind::Record; log.len()];
        group.throughput(Throughput::Elements((base_rows + log.len()) as u64));
        group.bench_with_input(
            BenchmarkId::from_parameter(base_rows),
            &base_rows,
            |b, _| {
                b.iter(|| {
                    merge_records(
                        base.iter().map(String::as_str),
                        Some(&base_rank),
                        log.iter().map(String::as_str),
                        Some(&log_rank),
                        &kinds,
                        MergeMode::EventTime,
                    )
                    .unwrap()
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, bench_merge);
criterion_main!(benches);
