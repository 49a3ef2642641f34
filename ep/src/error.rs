//! Rivet's error type. Messages are built only on the error path.

use std::fmt;

/// What kind of failure, mapped to an `OrtErrorCode` at the ABI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The caller gave something wrong (shape, dtype, attribute).
    InvalidArgument,
    /// Rivet failed (a bug, or a panic caught at the boundary).
    EpFail,
    /// An ORT call failed; the message is ORT's.
    Ort,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

impl Error {
    #[cold]
    pub fn invalid(message: impl fmt::Display) -> Self {
        Self { kind: ErrorKind::InvalidArgument, message: message.to_string() }
    }
    #[cold]
    pub fn ep(message: impl fmt::Display) -> Self {
        Self { kind: ErrorKind::EpFail, message: message.to_string() }
    }
    #[cold]
    pub fn ort(message: impl fmt::Display) -> Self {
        Self { kind: ErrorKind::Ort, message: message.to_string() }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T, E = Error> = std::result::Result<T, E>;
