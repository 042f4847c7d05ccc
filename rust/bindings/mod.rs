//! The only code that names pyo3: thin handles over the core, GIL released around real work.

use pyo3::prelude::*;

mod avro;
mod base_file;
mod bloom;
mod errors;
mod file_bytes;
mod keysort;
mod logformat;
mod merge;
mod meta;
mod sizing;
mod splice;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    avro::register(m)?;
    base_file::register(m)?;
    bloom::register(m)?;
    keysort::register(m)?;
    logformat::register(m)?;
    merge::register(m)?;
    meta::register(m)?;
    sizing::register(m)?;
    splice::register(m)?;
    Ok(())
}
