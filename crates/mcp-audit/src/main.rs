//! TODO
fn main() {}
