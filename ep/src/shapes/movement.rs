//! The data-movement shape rules live in `ops::shape_rules`.

pub use crate::ops::shape_rules::*;
