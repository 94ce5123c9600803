pub mod convert;
pub mod fit;
pub mod inspect;
mod link;
pub mod predict;
pub mod profile;
