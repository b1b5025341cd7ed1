//! Tailing the files of one `[[logs]]` source: the glob is rescanned on every poll, each
//! file is followed by identity (device + inode + fingerprint), and offsets are saved so a
//! restart neither loses nor repeats lines.
//!
//! Lines are joined into records (`multiline`); a record whose next line has not arrived is
//! held back (unconsumed) and ended once its file has been quiet for `QUIET`. Rotation
//! (`scan`, `rotated`): a file renamed away or deleted is followed while it grows and closed
//! once neither grown nor rotated for `rotated_grace`, while the new file at the path is read
//! from its start; a truncated or rewritten file starts again at 0, after the copy of what it held
//! (`copytruncate`) is read from the old offset, unless what it holds now is a copy of another
//! followed file's lines (`reuse`: `cp` over a rotated file); files rotated while lockwatch was stopped
//! are found again (`search`). Offsets — always at record boundaries — are saved every
//! `SAVE_EVERY` and at shutdown together with the counts they cover, and counts reach the
//! counters only once saved: a restart, SIGKILL included, continues the counters from the
//! saved counts and reads again only what they do not cover, so nothing is lost or counted
//! twice. File reads run on tokio's blocking pool.

mod counts;
mod file;
mod fingerprint;
mod offsets;
mod reuse;
mod rotated;
mod scan;
mod search;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use prometheus::IntGauge;
use tokio_util::sync::CancellationToken;

use self::counts::SavedCounts;
use self::file::{Held, Tracked};
pub(crate) use self::offsets::{SavedFile, Store};
use super::Classifier;
use super::count::{Counters, Tally};
use super::lines::Splitter;
use super::records::{End, RecordSplitter};
use crate::config::LogConfig;
use crate::intake::metrics::IntakeMetrics;
use crate::intake::origin::FileRef;
use crate::intake::reopen::ReopenNotes;

/// How often files are checked for new lines (and the glob for new files).
pub(crate) const POLL_EVERY: Duration = Duration::from_millis(200);
/// How often offsets and counts are saved while a backlog is read; a poll that reads every
/// file to its end saves at once, so the end of a burst is counted within one poll.
pub(crate) const SAVE_EVERY: Duration = Duration::from_secs(1);
/// How long a file must stay quiet before the record held back at its end is counted.
pub(crate) const QUIET: Duration = Duration::from_secs(1);
/// Files one source follows at most at the paths its glob matches; more are warned about and
/// left unread.
pub(crate) const MAX_FILES: usize = 1024;
/// Rotated files (copies being read included) one source follows at most besides; past it,
/// the one idle the longest is read to its end and closed.
pub(crate) const MAX_ROTATED: usize = 64;
/// How long after a rotation the application may still write into the rotated file before
/// it reopens its log (a `postrotate` signal is handled within it); written later, while the
/// file at its path stays empty, the application did not reopen it.
pub(crate) const REOPEN_WAIT: Duration = Duration::from_secs(5);
/// Bytes read per file per poll before the others get a turn.
const READ_BUDGET: u64 = 32 * 1024 * 1024;
const BUF_SIZE: usize = 1024 * 1024;

/// Lines and events one source took in since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SourceTotals {
    pub(crate) lines: u64,
    pub(crate) matched: u64,
    pub(crate) ignored: u64,
    pub(crate) malformed: u64,
}

/// Follows the files of one source.
pub(crate) struct Tailer {
    source: LogConfig,
    classifier: Arc<Classifier>,
    counters: Counters,
    files_gauge: IntGauge,
    not_reopened_gauge: IntGauge,
    /// The status page's list of rotated files not reopened.
    reopen: ReopenNotes,
    /// Namespaces in config order, to save counts by name.
    namespaces: Vec<String>,
    /// Counted in the poll under way.
    tally: Tally,
    /// Counted since the last save, waiting for it (with a store) before the counters.
    pending: Tally,
    /// Everything counted up to the saved offsets, restored saved counts included.
    saved_counts: Tally,
    totals: SourceTotals,
    files: Vec<Tracked>,
    store: Option<Store>,
    /// Saved entries not matched to a file yet (only during the first scan).
    saved: Vec<SavedFile>,
    /// What files found truncated or rewritten held: their copies are looked for.
    held: Vec<Held>,
    /// Whether saved state existed: then files without an offset are new since, read whole.
    resumed: bool,
    first_scan: bool,
    warned: std::collections::HashSet<PathBuf>,
    buf: Vec<u8>,
    dirty: bool,
    last_save: Instant,
}

impl Tailer {
    /// A tailer for `source`, resuming from `state_dir` when set. `restore` adds the saved
    /// counts to the counters: at start, not when a reload restarts the source (they hold them).
    pub(crate) fn new(
        source: &LogConfig,
        classifier: Arc<Classifier>,
        metrics: &IntakeMetrics,
        namespaces: &[String],
        state_dir: Option<&Path>,
        restore: bool,
    ) -> Self {
        let store = state_dir.map(|d| Store::new(d, &source.name));
        let counters = Counters::new(metrics, namespaces, &source.name);
        let mut saved_counts = counters.tally();
        let saved = match store.as_ref().map(Store::load) {
            Some(Ok(Some(s))) => {
                if let Some(c) = s.counts {
                    let (restored, dropped) = c.to_tally(namespaces);
                    tracing::info!(source = %source.name, lines = restored.total(), events_dropped = dropped,
                        "counters continue from the counts saved with the offsets");
                    if restore {
                        counters.restore(&mut restored.clone());
                    }
                    saved_counts = restored;
                }
                Some(s.files)
            }
            Some(Ok(None)) | None => None,
            Some(Err(e)) => {
                let aside = store.as_ref().map(Store::set_aside);
                tracing::error!(source = %source.name, error = %e, set_aside = ?aside,
                    "saved offsets cannot be used; files are read as on a first start (start_at)");
                None
            }
        };
        Tailer {
            tally: counters.tally(),
            pending: counters.tally(),
            saved_counts,
            namespaces: namespaces.to_vec(),
            counters,
            files_gauge: metrics.files_gauge(&source.name),
            not_reopened_gauge: metrics.not_reopened_gauge(&source.name),
            reopen: metrics.not_reopened().clone(),
            classifier,
            totals: SourceTotals::default(),
            files: Vec::new(),
            store,
            resumed: saved.is_some(),
            saved: saved.unwrap_or_default(),
            held: Vec::new(),
            first_scan: true,
            warned: Default::default(),
            buf: vec![0; BUF_SIZE],
            dirty: false,
            last_save: Instant::now(),
            source: source.clone(),
        }
    }

    /// Poll until `shutdown`, then save offsets.
    pub(crate) async fn run(mut self, shutdown: CancellationToken) -> SourceTotals {
        tracing::info!(source = %self.source.name, path = %self.source.path, resumed = self.resumed, "reading logs");
        loop {
            let polled = tokio::task::spawn_blocking(move || {
                let more = self.poll();
                (self, more)
            })
            .await;
            let more;
            (self, more) = match polled {
                Ok(v) => v,
                Err(e) => {
                    tracing::error!(error = %e, "a log reader failed; its source is no longer read");
                    return SourceTotals::default();
                }
            };
            if shutdown.is_cancelled() {
                break;
            }
            if !more {
                tokio::select! {
                    _ = tokio::time::sleep(POLL_EVERY) => {}
                    _ = shutdown.cancelled() => break,
                }
            }
        }
        match tokio::task::spawn_blocking(move || self.stop()).await {
            Ok(t) => t,
            Err(e) => {
                tracing::error!(error = %e, "saving log offsets failed");
                SourceTotals::default()
            }
        }
    }

    /// Save offsets and report the totals.
    pub(crate) fn stop(mut self) -> SourceTotals {
        self.save();
        self.reopen.set(&self.source.name, Vec::new());
        self.not_reopened_gauge.set(0);
        let t = self.totals;
        tracing::info!(source = %self.source.name, lines = t.lines, matched = t.matched, ignored = t.ignored,
            malformed = t.malformed, offsets_saved = self.store.is_some(), "stopped reading logs");
        t
    }

    /// One round: rescan the glob, read every file, read the copies of truncated ones, close
    /// finished rotated ones, judge them, save offsets when due. Returns whether some file has
    /// more to read right away.
    pub(crate) fn poll(&mut self) -> bool {
        self.rescan();
        let mut more = false;
        // Rotated files first: finish the old file, then read the new one.
        self.files.sort_by_key(|t| t.rotated.is_none());
        let mut failed = Vec::new();
        for i in 0..self.files.len() {
            let mut result = self.read(i, End::More);
            if result.is_ok() && self.files[i].quiet(QUIET) {
                result = self.read(i, End::Quiet);
            }
            match result {
                Ok(m) => more |= m,
                Err(()) => failed.push(i),
            }
        }
        more |= self.settle_all(&mut failed);
        failed.sort_unstable();
        failed.dedup();
        // Descending, so each removal leaves the indices still to remove in place.
        for i in failed.into_iter().rev() {
            let t = self.files.remove(i);
            self.closed(&t);
            self.dirty = true;
        }
        // A copy found now is read from the next poll on, before the file it was made of;
        // saved at once, so a crash before it is read does not leave the truncation to be
        // found again after a second one.
        let adopted = self.adopt_copies();
        more |= adopted;
        let grace = self.source.rotated_grace;
        let mut i = 0;
        while i < self.files.len() {
            if self.files[i].finished(grace) {
                self.close(i);
            } else {
                i += 1;
            }
        }
        self.bound_rotated();
        self.judge_reopen();
        let [matched, ignored, malformed] = self.tally.lines;
        self.totals.matched += matched;
        self.totals.ignored += ignored;
        self.totals.malformed += malformed;
        self.totals.lines += matched + ignored + malformed;
        let polled = std::mem::replace(&mut self.tally, self.counters.tally());
        self.pending.absorb(polled);
        self.files_gauge.set(self.files.len() as i64);
        if self.store.is_none() {
            self.counters.flush(&mut self.pending);
        } else if self.dirty && (!more || adopted || self.last_save.elapsed() >= SAVE_EVERY) {
            self.save();
        }
        more
    }

    /// Read rotated file `i` to its end, its last unfinished line included, and close it.
    fn close(&mut self, i: usize) {
        let _ = self.read(i, End::Eof); // a failure is logged; the file is closed either way
        let t = self.files.remove(i);
        let what = match &t.rotated {
            Some(r) if r.copy => "copy read to its end and closed",
            _ => "rotated file finished and closed",
        };
        tracing::info!(source = %self.source.name, file = %t.current_path().display(), "{what}");
        self.closed(&t);
        self.dirty = true;
    }

    /// Read file `i`: whether its budget ran out, or `Err` (logged) when it cannot be read
    /// and should be dropped (it is picked up again if it is still there). A file found
    /// truncated or rewritten is not read before it is judged, at the end of the poll
    /// (`settle_all`), when every file's truncation this poll is known.
    fn read(&mut self, i: usize, end: End) -> Result<bool, ()> {
        if self.files[i].unsettled {
            return match self.files[i].mark_seen() {
                Ok(()) => Ok(false),
                Err(e) => self.unreadable(i, &e),
            };
        }
        let (classifier, format) = (&self.classifier, self.source.format);
        let tally = &mut self.tally;
        let t = &mut self.files[i];
        let (dev, ino) = (t.id.dev, t.id.ino);
        let path = t.path.clone();
        let file = FileRef { dev, ino, path: &path };
        let skim = classifier.skim(format);
        let result = t.read(&mut self.buf, READ_BUDGET, end, skim, |piece| {
            tally.piece_from(classifier, &piece, format, &file)
        });
        match result {
            Ok(r) => {
                self.dirty |= r.consumed > 0 || r.restarted.is_some();
                if let Some(why) = r.restarted {
                    tracing::info!(source = %self.source.name, file = %self.files[i].current_path().display(), why,
                        "the file starts again at 0, once what it holds now is judged");
                    self.held.extend(r.held);
                }
                Ok(r.more)
            }
            Err(e) => self.unreadable(i, &e),
        }
    }

    /// Say file `i` cannot be read; `Err`: it is dropped.
    fn unreadable(&self, i: usize, e: &std::io::Error) -> Result<bool, ()> {
        tracing::warn!(source = %self.source.name, file = %self.files[i].path.display(), error = %e,
            "cannot read; the file is dropped and picked up again if it is still there");
        Err(())
    }

    /// How this source reads records, inside an over-long line or not.
    fn records(&self, skipping: bool) -> RecordSplitter {
        RecordSplitter {
            splitter: Splitter { skipping },
            multiline: self.source.multiline,
        }
    }

    fn warn_once(&mut self, path: &Path, what: std::fmt::Arguments<'_>) {
        if self.warned.insert(path.to_path_buf()) {
            tracing::warn!(source = %self.source.name, file = %path.display(), "{what}");
        }
    }

    /// Save the offsets of every followed file now, with the counts they cover; then the
    /// counts read since the last save reach the counters. Should the save fail, they reach
    /// them anyway (a count must not wait on a disk) and the save is retried: only a crash
    /// before a later save succeeds could then count them again.
    fn save(&mut self) {
        let Some(store) = &self.store else {
            self.counters.flush(&mut self.pending);
            return;
        };
        let files = self
            .files
            .iter()
            .map(|t| {
                let before = t.check_before();
                SavedFile {
                    // A rotated file by the path it was rotated from: it is looked for around it.
                    path: t.rotated.as_ref().map_or(&t.path, |r| &r.from).clone(),
                    dev: t.id.dev,
                    ino: t.id.ino,
                    fingerprint_len: t.fingerprint.len,
                    fingerprint_crc32: t.fingerprint.crc,
                    offset: t.offset,
                    before_len: before.len,
                    before_crc32: before.crc,
                    skipping: t.records.splitter.skipping,
                    copy: t.rotated.as_ref().is_some_and(|r| r.copy),
                    // Undecided too: after a restart it is judged again when it grows.
                    copied: t.copied() || t.unsettled,
                }
            })
            .collect();
        self.saved_counts.add(&self.pending);
        let counts = SavedCounts::of(&self.saved_counts, &self.namespaces);
        match store.save(&self.source.name, files, counts) {
            Ok(()) => self.dirty = false,
            Err(e) => tracing::warn!(error = %e, "offsets and counts not saved; counted anyway, saving is retried"),
        }
        self.counters.flush(&mut self.pending);
        self.last_save = Instant::now();
    }
}
