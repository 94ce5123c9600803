pub mod bench;
pub mod convert;
pub mod inspect;
pub mod predict;
pub mod profile;
pub mod run;
