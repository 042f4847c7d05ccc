//! The crate's single error type.

use thiserror::Error as ThisError;

/// Every fallible operation of the core returns this error; bad bytes never panic.
#[derive(Debug, ThisError)]
pub enum Error {
    /// Bytes that do not follow the format (truncated, wrong magic, bad length, ...).
    #[error("corrupt data: {0}")]
    Corrupt(String),
    /// A caller-supplied argument is out of range or inconsistent.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Data of a type the operation does not support.
    #[error("unsupported: {0}")]
    Unsupported(String),
}

/// Shorthand for results of the core.
pub type Result<T> = std::result::Result<T, Error>;
