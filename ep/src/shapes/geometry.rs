//! The window and product geometry (in `ops::geometry`).

pub use crate::ops::geometry::*;
