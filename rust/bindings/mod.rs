//! The only code that names pyo3: thin handles over the core, GIL released around real work.

use pyo3::prelude::*;

mod logformat;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    logformat::register(m)?;
    Ok(())
}
