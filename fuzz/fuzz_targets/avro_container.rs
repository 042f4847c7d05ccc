//! Any bytes as an Avro object container file (timeline and archive files): read or fail with an
//! error, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal::avro::container::container_to_json;

fuzz_target!(|bytes: &[u8]| {
    let _ = container_to_json(bytes);
});
