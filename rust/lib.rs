//! shoal's Rust core: the hot paths of a Hudi-format table engine.
//!
//! Each module maps to one Hudi concept; the PyO3 bindings live in `bindings` and are only
//! compiled with the `python` feature so that `cargo test` and `cargo bench` need no Python.

pub mod avro;
pub mod base_file;
pub mod bloom;
pub mod error;
pub mod keyhash;
pub mod keysort;
pub mod logformat;
pub mod merge;
pub mod meta;
pub mod sizing;
pub mod splice;

#[cfg(feature = "python")]
mod bindings;

pub use error::{Error, Result};
