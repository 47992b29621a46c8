#![doc = include_str!("../README.md")]

mod ends;
mod json_lines;

pub use ends::{Input, Output, stdio};
pub use json_lines::{
    DEFAULT_MAX_IN_FLIGHT, DEFAULT_MAX_LINE_BYTES, DEFAULT_MAX_UNWRITTEN,
    DEFAULT_MAX_UNWRITTEN_BYTES, JsonLines,
};
