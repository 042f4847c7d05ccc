//! Avro binary datums <-> Arrow: the record payloads of AVRO_DATA blocks.
//!
//! Hand-rolled rather than built on `apache_avro::Value` because a log block is a hot path: the
//! encoder walks Arrow buffers and writes bytes directly, and the decoder appends straight into
//! Arrow buffers, with no per-value allocation in between.

pub mod arrow;
pub mod binary;
pub mod decode;
pub mod encode;
pub mod schema;

#[cfg(test)]
mod tests;
