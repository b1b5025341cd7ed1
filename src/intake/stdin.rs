//! The stdin source (`path = "-"`): lines piped into `lockwatch serve`, joined into records
//! and classified like a file's. Read on a thread of its own, since reading stdin blocks;
//! another thread assembles records, and ends the last one when stdin has been quiet for
//! `QUIET`. When stdin ends the source is done and the exporter keeps serving.

use std::io::Read;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender};

use super::count::Counters;
use super::records::{End, RecordSplitter};
use super::tail::QUIET;
use super::{Classifier, MAX_LINE};
use crate::config::LogConfig;

/// Bytes read from stdin at a time.
const CHUNK: usize = 64 * 1024;

/// Start reading `input` (stdin in `serve`) on a thread; counts go to `counters`.
pub(crate) fn spawn(
    source: &LogConfig,
    input: impl Read + Send + 'static,
    classifier: Arc<Classifier>,
    counters: Counters,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    let (tx, rx) = std::sync::mpsc::sync_channel(16);
    let name = source.name.clone();
    std::thread::Builder::new()
        .name(format!("logs-{name}-read"))
        .spawn(move || read(&name, input, tx))?;
    let source = source.clone();
    std::thread::Builder::new()
        .name(format!("logs-{}", source.name))
        .spawn(move || assemble(&source, &rx, &classifier, &counters))
}

fn read(source: &str, mut input: impl Read, tx: SyncSender<Vec<u8>>) {
    loop {
        let mut chunk = vec![0u8; CHUNK];
        match input.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => {
                chunk.truncate(n);
                if tx.send(chunk).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                tracing::warn!(%source, error = %e, "cannot read stdin; the source is done");
                return;
            }
        }
    }
}

fn assemble(source: &LogConfig, rx: &Receiver<Vec<u8>>, classifier: &Classifier, counters: &Counters) {
    let mut splitter = RecordSplitter::new(source.multiline);
    let mut buf: Vec<u8> = Vec::new();
    let mut tally = counters.tally();
    let mut lines = 0u64;
    loop {
        let end = match rx.recv_timeout(QUIET) {
            Ok(chunk) => {
                buf.extend_from_slice(&chunk);
                End::More
            }
            Err(RecvTimeoutError::Timeout) if buf.is_empty() => continue,
            Err(RecvTimeoutError::Timeout) => End::Quiet,
            Err(RecvTimeoutError::Disconnected) => End::Eof,
        };
        let used = splitter.feed_skimming(&buf, MAX_LINE, end, classifier.skim(source.format), |piece| {
            lines += u64::from(piece.lines());
            tally.piece(classifier, &piece, source.format);
        });
        buf.drain(..used);
        counters.flush(&mut tally);
        if end == End::Eof {
            break;
        }
    }
    tracing::info!(source = %source.name, lines, "stdin ended; the exporter keeps serving");
}
