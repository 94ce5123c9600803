pub mod branch;
pub mod convert;
pub mod fit;
pub mod inspect;
mod link;
pub mod plan;
pub mod predict;
pub mod profile;
pub mod zoo;
