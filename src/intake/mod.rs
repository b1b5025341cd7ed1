//! The event intake: lock events from application log lines (and, later, pushes).
//!
//! `fields` reads a line (JSON, logfmt or text); `classify` turns it into a lock event
//! `{namespace, op, outcome}` or says why not. Tailing files and the HTTP push build on these.

pub mod classify;
pub mod fields;
pub mod lines;
pub mod print;

pub use classify::{Classifier, ClassifierError, Verdict};

/// Lines longer than this are counted as malformed and skipped to the next newline.
pub const MAX_LINE: usize = 64 * 1024;
