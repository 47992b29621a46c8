#![doc = include_str!("../README.md")]

mod annotations;
mod classify;
mod contract;
mod error;
mod gate;
mod surface;

pub use annotations::{Annotations, EffectiveAnnotations, effective_annotations};
pub use classify::{
    CONFIRMATION_TOKEN_ARG, Classification, MAX_SCHEMA_COMPOSITION, ToolClass, ToolFacts,
    advertised_annotations, classify, declares_confirmation_token,
};
pub use contract::{Drift, SurfaceContract};
pub use error::Error;
pub use gate::{DEFAULT_WRITES_ENV, writes_enabled};
pub use surface::{SurfaceReport, ToolReport};
