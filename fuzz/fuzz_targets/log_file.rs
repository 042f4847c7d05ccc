//! Any bytes as a Hudi log file: framing, headers, and the content of every block that frames
//! (Avro data under its own SCHEMA header or a fixed one, delete records) must decode or fail
//! with an error, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal::logformat::avro_data::decode_avro_data_content;
use shoal::logformat::block::{BlockType, HeaderKey};
use shoal::logformat::delete::decode_delete_content;
use shoal::logformat::reader::read_blocks;

const SCHEMA: &str = r#"{"type":"record","name":"r","fields":[
  {"name":"_hoodie_record_key","type":["null","string"],"default":null},
  {"name":"id","type":"long"},
  {"name":"v","type":["null","double","string"],"default":null},
  {"name":"tags","type":{"type":"array","items":"string"}},
  {"name":"m","type":["null",{"type":"map","values":"int"}],"default":null},
  {"name":"d","type":["null",{"type":"fixed","name":"dec","size":5,"logicalType":"decimal","precision":10,"scale":2}],"default":null},
  {"name":"t","type":["null",{"type":"long","logicalType":"timestamp-micros"}],"default":null}
]}"#;

fuzz_target!(|file: &[u8]| {
    for block in read_blocks(file) {
        let content = block.content(file);
        match block.block_type {
            BlockType::AvroData => {
                if let Some(schema) = block.header_value(HeaderKey::Schema) {
                    let _ = decode_avro_data_content(content, schema, None);
                }
                let _ = decode_avro_data_content(content, SCHEMA, None);
            }
            BlockType::Delete => {
                let _ = decode_delete_content(content);
            }
            _ => {}
        }
    }
});
