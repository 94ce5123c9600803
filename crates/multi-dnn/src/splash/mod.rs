//! Splash: thermal-aware scheduling. The device's heat, emulated or read
//! ([`thermal`]); the policies that weigh it ([`min_heat`],
//! [`max_weighted_ppt`]); and a real cloud worker behind a shaped link
//! ([`cloud`]).

pub mod cloud;
pub mod max_weighted_ppt;
pub mod min_heat;
pub mod thermal;
