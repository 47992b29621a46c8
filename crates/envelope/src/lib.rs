#![doc = include_str!("../README.md")]

mod policy;
mod schema;
mod wrap;

pub use policy::EnvelopePolicy;
pub use schema::wrap_output_schema;
pub use wrap::{
    CLASSIFICATION, DATA_KEY, ENVELOPE_KEY, NOTICE_PREFIX, WARNING, parse_text, render_text,
    source, unwrap, wrap, wrap_text,
};
