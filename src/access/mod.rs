//! The one Redis access layer: everything lockwatch sends to Redis goes through here —
//! connecting (`connect`; `tls` for `rediss://` targets and for explaining TLS failures),
//! SCAN pages and reads of lock values, owners and fencing counters (`read`, `owner`),
//! `notify-keyspace-events` and the keyspace channels (`notify`), one-off probes of keys
//! and permissions (`probe`), and the lock scripts (`scripts`). `child` starts a private `redis-server` for the demo and the tests.
//!
//! It knows the config's target and namespace shapes, and nothing of metrics, state or HTTP.

pub mod child;
pub mod connect;
pub mod notify;
pub(crate) mod owner;
pub(crate) mod probe;
pub(crate) mod read;
pub mod scripts;
pub mod tls;

pub use connect::{Link, LinkError};
