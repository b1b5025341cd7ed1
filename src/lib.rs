//! lockwatch: an exporter and runbook tool for distributed locks kept in Redis.
//!
//! The library holds every working part; the `lockwatch` binary only parses arguments,
//! sets up logging and dispatches. See ARCHITECTURE.md for how the parts fit.

pub mod access;
pub mod advise;
pub mod cli;
pub mod commands;
pub mod config;
pub(crate) mod demo;
pub mod dense;
pub mod discover;
pub mod document;
pub mod drill;
pub mod drills;
pub(crate) mod durable;
pub(crate) mod duration;
pub mod exposition;
pub mod glob;
pub(crate) mod http;
pub mod inspect;
pub mod intake;
pub mod lifecycle;
pub mod locks;
pub mod metrics;
pub mod rules;
pub mod sampler;
pub mod serve;
pub mod topology;
pub mod vocab;
