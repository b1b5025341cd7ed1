//! The stdin source (`path = "-"`): lines piped into `lockwatch serve`, classified and
//! counted like a file's. Read on a thread of its own, since reading stdin blocks; when
//! stdin ends the source is done and the exporter keeps serving.

use std::io::BufRead;
use std::sync::Arc;

use super::count::Counters;
use super::lines::{Line, Lines};
use super::{Classifier, MAX_LINE, Verdict};
use crate::config::LogFormat;

/// Start reading `input` (stdin in `serve`) on a thread; counts go to `counters`.
pub(crate) fn spawn(
    source: String,
    input: impl BufRead + Send + 'static,
    format: LogFormat,
    classifier: Arc<Classifier>,
    counters: Counters,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("logs-{source}"))
        .spawn(move || {
            let mut lines = Lines::new(input, MAX_LINE);
            let mut tally = counters.tally();
            let mut n = 0u64;
            loop {
                let verdict = match lines.next_line() {
                    Ok(Some(Line::Text(b))) => classifier.classify(b, format),
                    Ok(Some(Line::TooLong(_))) => Verdict::Malformed("line too long"),
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!(%source, error = %e, "cannot read stdin; the source is done");
                        break;
                    }
                };
                tally.line(&verdict);
                counters.flush(&mut tally);
                n += 1;
            }
            tracing::info!(%source, lines = n, "stdin ended; the exporter keeps serving");
        })
}
