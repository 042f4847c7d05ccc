//! Any text as a parquet footer's bloom filter entry, under each type code: parse or fail with
//! an error, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal::bloom::BloomFilter;

fuzz_target!(|text: &str| {
    for code in [None, Some("SIMPLE"), Some("DYNAMIC_V0")] {
        if let Ok(filter) = BloomFilter::from_footer(text, code) {
            let _ = filter.might_contain(b"key");
        }
    }
});
