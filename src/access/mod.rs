//! The one Redis access layer: everything lockwatch sends to Redis goes through here —
//! connecting (`connect`; `tls` for `rediss://` targets and for explaining TLS failures),
//! SCAN pages and reads of lock values, owners and fencing counters (`read`, `owner`),
//! `notify-keyspace-events` and the keyspace channels (`notify`), the canary that proves they
//! arrive (`canary`), the watcher's subscriptions read by lockwatch itself (`pubsub`), one-off probes of keys and permissions (`probe`), `discover`'s sample
//! of every key (`survey`), which server a node is (`server`: Redis or Valkey, its version), the lock scripts (`scripts`), and `MONITOR` for the freeze drill's witness (`monitor`); Redis Cluster slots, shards and routed reads
//! (`cluster`) and Sentinel questions (`sentinel`). `child` starts a private `redis-server` for the demo and the tests.
//!
//! It knows the config's target and namespace shapes, and nothing of metrics, state or HTTP.

pub mod canary;
pub mod child;
pub mod cluster;
pub mod connect;
pub mod monitor;
pub mod notify;
pub(crate) mod owner;
pub(crate) mod probe;
pub mod pubsub;
pub(crate) mod read;
pub(crate) mod reader;
pub mod scripts;
pub mod sentinel;
pub mod server;
pub(crate) mod survey;
pub mod tls;

pub use connect::{Link, LinkError, NodeAddr};
