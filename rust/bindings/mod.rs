//! The only code that names pyo3: thin handles over the core, GIL released around real work.

use pyo3::prelude::*;

mod errors;
mod logformat;
mod merge;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    logformat::register(m)?;
    merge::register(m)?;
    Ok(())
}
