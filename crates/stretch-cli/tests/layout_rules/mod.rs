//! What `layout.rs`'s rules read from the source tree.

pub mod imports;
pub mod text;
