#![doc = include_str!("../README.md")]

mod html;
mod router;

pub use router::router;
