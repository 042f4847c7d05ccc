//! Avro for the timeline: object container files <-> JSON, AVRO_DATA_BLOCKs of JSON records (the
//! archived timeline), and the Arrow <-> Avro schema mapping Spark/Hudi writers use
//! (HUDI_FORMAT §2.5, §2.7, §5).
//!
//! The Avro schema model and binary primitives are the log-block codec's
//! (`logformat::datum`), so both readers accept exactly the same schemas.

pub mod container;
pub mod json;
pub mod log_block;
pub mod schema_convert;

pub use container::{
    container_to_json, json_to_container, read_container, write_container, Container,
};
pub use schema_convert::{arrow_to_avro_schema, avro_to_arrow_schema};

#[cfg(test)]
mod tests;
