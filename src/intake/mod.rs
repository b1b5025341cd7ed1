//! The event intake: lock events from application log lines (files and stdin), from
//! pushes to `POST /api/v1/events`, and from log shippers (OTLP, Loki, plain records).
//!
//! `lines` and `records` cut input into records (a line, or a line with its traceback);
//! `fields` reads a record's first line (JSON, logfmt or text); `classify` turns a record
//! into a lock event `{namespace, op, outcome}` with the words of `phrases`, or says why
//! not; `count` adds verdicts up into the intake's own metrics (`metrics`), the events that
//! named a key also into `keyed`, the ring the history API reads.
//! `tail` follows `[[logs]]` files, `stdin` reads a pipe, `push` reads pushed event objects.
//! Shippers' bodies: `decode` undoes their compression, `wire` declares their protobuf
//! messages, `otlp`, `loki` and `plain` read them into a `batch` of records.

pub(crate) mod batch;
pub mod classify;
pub(crate) mod count;
pub(crate) mod decode;
pub(crate) mod factors;
pub(crate) mod fields;
pub(crate) mod keyed;
pub mod lines;
pub(crate) mod literals;
pub(crate) mod loki;
pub(crate) mod metrics;
pub(crate) mod ops;
pub mod origin;
pub(crate) mod otlp;
pub(crate) mod phrases;
pub(crate) mod plain;
pub(crate) mod print;
pub(crate) mod push;
pub(crate) mod recent;
pub mod records;
pub(crate) mod reopen;
pub mod skim;
pub(crate) mod stdin;
pub(crate) mod table;
pub(crate) mod tail;
#[cfg(test)]
pub(crate) mod test_rng;
pub(crate) mod wire;
pub(crate) mod words;

pub use classify::{Classifier, ClassifierError, Given, Verdict};
pub use count::{Counters, Tally};
pub use metrics::IntakeMetrics;

/// Lines longer than this are counted as malformed and skipped to the next newline.
pub const MAX_LINE: usize = 64 * 1024;
