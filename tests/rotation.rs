//! Log rotation as logrotate and applications really do it, `lockwatch serve` as a process
//! reading a file a separate writer process keeps open (`tests/clients/log_writer.py`):
//! late writes into a renamed file (the application not told to reopen: said, then cleared
//! when it reopens or the rotated file stops), `copytruncate` at 2,000 lines/s (the copy read
//! from the offset), `olddir` rotations while lockwatch was stopped or killed, found one
//! level below or where `rotated` points. Counts are exact — every record written counted
//! once, across restarts and SIGKILLs — where the writer pauses for logrotate's run (its
//! window between copy and truncation then holds nothing). The first test measures the
//! issue's table at the default settings, the writer never pausing (written / counted / held
//! by the files per case: only logrotate's window lost) and prints it;
//! `LOCKWATCH_ROTATION_BIN=/path/lockwatch` measures another build (`scripts/rotation.sh`
//! does, for the build before this work), then nothing is asserted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::rotation::{
    AppWriter, Logrotate, Setup, counted, not_reopened, records_held, settle_counted, status, wait_until,
};

/// One row of the table: what the writer wrote, what lockwatch counted, what it should have.
struct Row {
    case: &'static str,
    written: u64,
    counted: u64,
    /// The records the files still hold (logrotate's own window aside, all of them).
    held: u64,
}

/// A case of the table under way: its directory and config, logrotate with its directives,
/// the writer, and the exporter (`bin`'s).
struct Case<'a> {
    s: Setup,
    rotate: Logrotate,
    w: AppWriter,
    p: common::logs::Proc,
    bin: Option<&'a Path>,
}

impl<'a> Case<'a> {
    async fn start(redis: &str, bin: Option<&'a Path>, directives: &str, written: u64) -> Case<'a> {
        let mut s = Setup::new(redis, "");
        std::fs::create_dir(s.dir.path().join("old")).unwrap();
        let rotate = Logrotate::new(s.dir.path(), "case", &s.log, directives);
        let mut w = AppWriter::start(&s.log);
        let p = s.serve(bin);
        w.write(written);
        settle_counted(&p, written).await;
        Case { s, rotate, w, p, bin }
    }

    /// Stop the exporter (SIGTERM), do `meanwhile`, start it again.
    fn restart(&mut self, meanwhile: impl FnOnce(&mut AppWriter, &Logrotate)) {
        self.p.signal("-TERM");
        meanwhile(&mut self.w, &self.rotate);
        self.p = self.s.serve(self.bin);
    }

    /// What was written, held and counted in the end.
    async fn row(mut self, case: &'static str) -> Row {
        let written = self.w.pause();
        let held = records_held(self.s.dir.path()).len() as u64;
        let counted = settle_counted(&self.p, held).await;
        Row {
            case,
            written,
            counted,
            held,
        }
    }
}

/// The application keeps its handle after a rename (no `postrotate`) and writes again 6.5 s
/// later.
async fn late_writes(redis: &str, bin: Option<&Path>) -> Row {
    let mut c = Case::start(redis, bin, "    create", 10).await;
    c.rotate.run();
    tokio::time::sleep(Duration::from_millis(6500)).await;
    c.w.write(10);
    c.row("the application keeps its handle after a rename (no `postrotate` reopen) and writes again 6.5 s later")
        .await
}

/// `copytruncate` by logrotate every 0.5 s under a 2,000 lines/s writer, 20 times.
async fn copytruncate(redis: &str, bin: Option<&Path>) -> Row {
    let mut c = Case::start(redis, bin, "    copytruncate", 0).await;
    c.w.rate(2000);
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        c.rotate.run();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    c.row("`copytruncate` at ~2,000 lines/s, 20 truncations").await
}

/// 5 records read; stopped; 7 more; rotated into `old/` (logrotate's `olddir`).
async fn olddir_while_stopped(redis: &str, bin: Option<&Path>) -> Row {
    let mut c = Case::start(redis, bin, "    olddir old\n    create", 5).await;
    c.restart(|w, rotate| {
        w.write(7);
        rotate.run();
    });
    c.row("rotated into a subdirectory (logrotate `olddir`) while lockwatch was stopped")
        .await
}

/// Rotated while lockwatch runs (the application keeps writing into the rotated file), then
/// renamed again while it was stopped.
async fn renamed_again_while_stopped(redis: &str, bin: Option<&Path>) -> Row {
    let mut c = Case::start(redis, bin, "    create", 5).await;
    c.rotate.run();
    c.w.write(2);
    settle_counted(&c.p, 7).await;
    c.restart(|w, rotate| {
        w.write(4);
        rotate.run(); // app.log.1 (still written) becomes app.log.2
    });
    c.row("rotated and renamed again while stopped").await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_issue_table_at_the_default_settings() {
    let measured = common::require_override("LOCKWATCH_ROTATION_BIN");
    let bin = measured.as_deref();
    let r = common::redis(&[]);
    let url = r.url();
    let rows = vec![
        late_writes(&url, bin).await,
        copytruncate(&url, bin).await,
        olddir_while_stopped(&url, bin).await,
        renamed_again_while_stopped(&url, bin).await,
    ];
    let build = bin.map_or_else(|| "this build".to_string(), |b| b.display().to_string());
    println!(
        "\nrotation table ({build}, default settings)\n\n| case | written | counted | held by the files |\n|---|---:|---:|---:|"
    );
    for row in &rows {
        println!("| {} | {} | {} | {} |", row.case, row.written, row.counted, row.held);
    }
    let ct = &rows[1];
    println!(
        "\ncopytruncate: {} of {} records lost in logrotate's own window (between its copy and its truncation), {:.3} %\n",
        ct.written - ct.held,
        ct.written,
        100.0 * (ct.written - ct.held) as f64 / ct.written as f64
    );
    if measured.is_some() {
        return; // another build, measured only
    }
    for row in [&rows[0], &rows[2], &rows[3]] {
        assert_eq!((row.counted, row.held), (row.written, row.written), "{}", row.case);
    }
    // copytruncate under a writer that never pauses: every record the files hold is
    // counted; of those logrotate's window lost (in no file), the ones lockwatch read before
    // the truncation are counted too (it may read between logrotate's copy and truncation);
    // never more than were written. (The exact copytruncate test pauses the writer around
    // logrotate's run, so the window is empty and the count exact.)
    assert!(
        ct.held <= ct.counted && ct.counted <= ct.written,
        "copytruncate: counted {} with {} held and {} written",
        ct.counted,
        ct.held,
        ct.written
    );
    // logrotate's window is a copy of half a second of lines and a truncation: a few lines
    // a truncation, many more on a loaded machine (logrotate descheduled between the two;
    // a CI run under every other test lost 10.2 %). The loss is logrotate's, not lockwatch's
    // (the assertion above holds that); this bound only keeps the row about records the
    // files hold, most of them.
    assert!(
        ct.written - ct.held < ct.written / 4,
        "copytruncate lost {} of {}",
        ct.written - ct.held,
        ct.written
    );
}

/// `lockwatch_log_files_not_reopened` of `app` becomes `value` within `secs`.
async fn said_within(p: &common::logs::Proc, value: f64, secs: u64, what: &str) {
    wait_until(p, Duration::from_secs(secs), what, |m| {
        m.val("lockwatch_log_files_not_reopened", &[("source", "app")]) == value
    })
    .await;
}

/// Rotated (the application not told), `n` records written into the rotated file `ms`
/// later: all `total` counted, and the missing reopen said.
async fn written_late(p: &common::logs::Proc, w: &mut AppWriter, rotate: &Logrotate, ms: u64, n: u64, total: u64) {
    rotate.run();
    tokio::time::sleep(Duration::from_millis(ms)).await;
    w.write(n);
    assert_eq!(settle_counted(p, total).await, total);
    said_within(p, 1.0, 3, "said not reopened").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn late_writes_say_the_application_did_not_reopen_until_it_does_or_the_file_stops() {
    let r = common::redis(&[]);
    let mut s = Setup::new(&r.url(), "rotated_grace = \"8s\"");
    let rotate = Logrotate::new(s.dir.path(), "create", &s.log, "    create");
    let mut w = AppWriter::start(&s.log);
    let p = s.serve(None);
    w.write(10);
    assert_eq!(settle_counted(&p, 10).await, 10);

    // Renamed, the new file created empty, the application not told: it writes into
    // app.log.1 6.5 s later. Counted, and said.
    written_late(&p, &mut w, &rotate, 6500, 10, 20).await;
    let st = status(&p).await;
    let note = &st["not_reopened"][0];
    assert_eq!(note["source"], "app");
    assert_eq!(note["path"].as_str(), s.log.to_str());
    assert_eq!(
        note["rotated"].as_str(),
        s.dir.path().join("app.log.1").to_str(),
        "{st}"
    );
    let line = st["summary"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["source"] == "app")
        .expect("a line for the source");
    assert_eq!(line["state"], "warn");
    let words = line["parts"][0].as_str().unwrap();
    assert!(
        words.contains("did not reopen its log") && words.contains("copytruncate") && words.contains("postrotate"),
        "{words}"
    );
    assert!(st["summary_html"].as_str().unwrap().contains(r#"data-source="app""#));
    assert!(
        s.said()
            .contains("the application did not reopen its log after rotation")
    );

    // Told at last (SIGHUP, as a `postrotate` script sends): it writes at app.log again.
    w.hup();
    w.write(5);
    assert_eq!(settle_counted(&p, 25).await, 25);
    said_within(&p, 0.0, 3, "cleared by the reopen").await;
    assert_eq!(status(&p).await["not_reopened"], serde_json::json!([]));
    assert!(s.said().contains("the application reopened its log"));

    // Rotated again, not told again: said again; then it stops writing and the rotated
    // file is closed after the grace: cleared, nothing lost.
    written_late(&p, &mut w, &rotate, 6000, 5, 30).await;
    said_within(&p, 0.0, 15, "cleared when the rotated file is closed").await;
    assert!(s.said().contains("no longer said not reopened"));
    assert_eq!(not_reopened(&p).await, 0.0);
    assert_eq!(counted(&p).await, 30);
    assert_eq!(records_held(s.dir.path()).len(), 30);
}

/// One logrotate run with the writer paused around it (at `rate` before and after), so its
/// window between copy and truncation holds no record: every record written is in a file.
/// With `sig`, the exporter is stopped by it first (`-TERM`, `-KILL`) and started again after.
async fn rotate_paused(
    s: &mut Setup,
    w: &mut AppWriter,
    rate: u64,
    mut p: common::logs::Proc,
    sig: Option<&str>,
    rotate: &Logrotate,
) -> common::logs::Proc {
    w.pause();
    if let Some(sig) = sig {
        p.signal(sig);
    }
    rotate.run();
    if sig.is_some() {
        p = s.serve(None);
    }
    w.rate(rate);
    p
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copytruncate_counts_every_record_once_across_a_restart_and_a_sigkill() {
    let r = common::redis(&[]);
    let mut s = Setup::new(&r.url(), "");
    let rotate = Logrotate::new(s.dir.path(), "copytruncate", &s.log, "    copytruncate");
    let mut w = AppWriter::start(&s.log);
    let mut p = s.serve(None);
    w.rate(2000);
    for round in 0..16 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let sig = match round {
            5 => Some("-TERM"),
            11 => Some("-KILL"),
            _ => None,
        };
        p = rotate_paused(&mut s, &mut w, 2000, p, sig, &rotate).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let written = w.pause();
    assert_eq!(records_held(s.dir.path()).len() as u64, written);
    let said = s.said();
    assert_eq!(settle_counted(&p, written).await, written, "lockwatch said:\n{said}");
    assert!(
        said.contains("truncated: reading its copy from where the file was read to"),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn olddir_rotations_while_stopped_or_killed_are_found_and_finished() {
    let r = common::redis(&[]);
    let mut s = Setup::new(&r.url(), "rotated = \"archive/*/app.log*\"");
    let d = s.dir.path().to_path_buf();
    std::fs::create_dir(d.join("old")).unwrap();
    let olddir = Logrotate::new(&d, "olddir", &s.log, "    olddir old\n    create");
    let far = Logrotate::new(
        &d,
        "archive",
        &s.log,
        "    olddir archive/2026\n    createolddir 0755 root root\n    create",
    );
    let old_copy = Logrotate::new(&d, "copy", &s.log, "    olddir old\n    copytruncate");
    let mut w = AppWriter::start(&s.log);
    let mut p = s.serve(None);
    let mut want = w.write(5);
    assert_eq!(settle_counted(&p, want).await, want);

    // Each phase: `lead` more records just before the exporter is stopped (SIGTERM) or
    // killed (SIGKILL); `down` more while it is down; rotated into old/ (old/app.log.1
    // becoming old/app.log.2 the second time), or two levels down where only `rotated`
    // points; the application reopens (SIGHUP) and writes `after`; started again.
    let phases = [
        ("after a restart", 0, "-TERM", 7, &olddir, 3),
        ("after a SIGKILL", 4, "-KILL", 6, &olddir, 2),
        ("rotated where `rotated` points", 0, "-TERM", 5, &far, 1),
    ];
    for (what, lead, sig, down, rotate, after) in phases {
        w.write(lead);
        tokio::time::sleep(Duration::from_millis(100)).await;
        p.signal(sig);
        w.write(down);
        rotate.run();
        w.hup();
        w.write(after);
        p = s.serve(None);
        want = w.write(0);
        assert_eq!(settle_counted(&p, want).await, want, "{what}");
    }
    assert!(d.join("archive/2026/app.log.1").is_file());

    // copytruncate into old/ while running, then once more while killed, under a writer.
    w.rate(500);
    tokio::time::sleep(Duration::from_millis(700)).await;
    p = rotate_paused(&mut s, &mut w, 500, p, None, &old_copy).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    p = rotate_paused(&mut s, &mut w, 500, p, Some("-KILL"), &old_copy).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    let written = w.pause();
    assert_eq!(records_held(&d).len() as u64, written);
    assert_eq!(settle_counted(&p, written).await, written, "copytruncate into old/");
    let said = s.said();
    assert!(
        said.contains("finishing a file rotated while lockwatch was stopped"),
        "{said}"
    );
    let copies: Vec<PathBuf> = std::fs::read_dir(d.join("old"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(copies.len() >= 4, "{copies:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copytruncate_copies_the_glob_matches_are_read_from_the_offset_not_whole() {
    let r = common::redis(&[]);
    // `dateext` with `extension .log`: the copies are app-DATE.log, which `*.log` matches.
    let mut s = Setup::reading(&r.url(), "*.log", "");
    let rotate = Logrotate::new(
        s.dir.path(),
        "dateext",
        &s.log,
        "    copytruncate\n    dateext\n    dateformat -%Y%m%d-%s\n    extension .log",
    );
    let mut w = AppWriter::start(&s.log);
    let mut p = s.serve(None);
    w.rate(1000);
    for sig in [None, Some("-TERM"), None] {
        tokio::time::sleep(Duration::from_millis(1100)).await; // one copy a second: %s
        p = rotate_paused(&mut s, &mut w, 1000, p, sig, &rotate).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let written = w.pause();
    let copies = std::fs::read_dir(s.dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("app-"))
        .count();
    assert_eq!(copies, 3);
    assert_eq!(records_held(s.dir.path()).len() as u64, written);
    assert_eq!(
        settle_counted(&p, written).await,
        written,
        "copies counted twice or lost"
    );
}

/// `cp FROM TO` (in place when TO exists: its inode kept, its bytes replaced).
fn cp(from: &Path, to: &Path) {
    let out = std::process::Command::new("cp").arg(from).arg(to).output().unwrap();
    assert!(out.status.success(), "cp: {}", common::output_text(&out));
}

fn truncate(path: &Path) {
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followed_rotated_file_rewritten_in_place_counts_every_record_once() {
    let r = common::redis(&[]);
    let mut s = Setup::new(&r.url(), "");
    let rotated = s.dir.path().join("app.log.1");
    let rename = Logrotate::new(s.dir.path(), "create", &s.log, "    create");
    let mut w = AppWriter::start(&s.log);
    let mut p = s.serve(None);
    w.write(10);
    assert_eq!(settle_counted(&p, 10).await, 10);
    // Renamed; the application, not told, writes into the rotated file, which is then
    // truncated and written anew: new content, read from its start.
    rename.run();
    w.write(5);
    assert_eq!(settle_counted(&p, 15).await, 15);
    truncate(&rotated);
    w.write(7);
    assert_eq!(
        settle_counted(&p, 22).await,
        22,
        "new lines in a truncated rotated file"
    );
    w.hup();
    // Now the rotated file, still followed, gets the live file's lines copied over it in
    // place, and the live file is truncated (`cp app.log app.log.1 && : > app.log`), 20
    // times under a 2,000 lines/s writer paused around each; a restart and a SIGKILL among
    // them. The next copy waits until the last one's lines are counted: written over
    // unread, they would be in no file at all.
    w.rate(2000);
    for round in 0..20 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let before = w.pause();
        let sig = match round {
            6 => Some("-TERM"),
            13 => Some("-KILL"),
            _ => None,
        };
        if let Some(sig) = sig {
            p.signal(sig);
        }
        cp(&s.log, &rotated);
        if round == 0 {
            // Once, the copy is judged before the live file is truncated: it holds the
            // live file's lines, so it is not read until that truncation is found.
            let until = std::time::Instant::now() + Duration::from_secs(10);
            while !s.said().contains("holds a copy of another followed file's lines") {
                assert!(
                    std::time::Instant::now() < until,
                    "the copy never judged:\n{}",
                    s.said()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        truncate(&s.log);
        if sig.is_some() {
            p = s.serve(None);
        }
        w.rate(2000);
        wait_until(&p, Duration::from_secs(20), "the copy's lines counted", |m| {
            common::logs::not_owned(m, "workflow") as u64 >= before
        })
        .await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let written = w.pause();
    let said = s.said();
    assert_eq!(settle_counted(&p, written).await, written, "lockwatch said:\n{said}");
}

/// Busy loops on every core until dropped: the load under which a race shows.
struct Busy(
    std::sync::Arc<std::sync::atomic::AtomicBool>,
    Vec<std::thread::JoinHandle<()>>,
);

impl Busy {
    fn start() -> Busy {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads = (0..cores)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                    }
                })
            })
            .collect();
        Busy(stop, threads)
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.1.drain(..) {
            let _ = t.join();
        }
    }
}

/// `n` lock failures numbered from `from`, as the writer's.
fn records(from: u64, n: u64) -> String {
    (from..from + n)
        .map(|i| format!("ts=1.0 level=error msg=\"lock not owned\" key=wf:lock:{i}\n"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncation_raced_by_new_lines_with_the_same_first_bytes_is_told_under_cpu_load() {
    let r = common::redis(&[]);
    let mut s = Setup::new(&r.url(), "");
    let _busy = Busy::start();
    // The application writes the same banner, longer than the fingerprint, at every start.
    let banner = format!("# payout-worker 4.2.1 starting {}\n", "=".repeat(1200));
    let mut written = 0;
    std::fs::write(&s.log, format!("{banner}{}", records(0, 40))).unwrap();
    written += 40;
    let mut p = s.serve(None);
    // Truncated and written past the offset read to again before the next poll, the
    // first 1 KiB the same: every round once lockwatch has caught up.
    for round in 0..20u64 {
        assert_eq!(settle_quick(&p, written).await, written, "round {round}");
        let n = 40 + round * 3;
        std::fs::write(&s.log, format!("{banner}{}", records(written, n))).unwrap();
        written += n;
    }
    // Rewritten in place while lockwatch was stopped or killed: the same banner, more
    // lines than it read.
    for sig in ["-TERM", "-KILL", "-TERM"] {
        assert_eq!(settle_quick(&p, written).await, written, "before {sig}");
        p.signal(sig);
        std::fs::write(&s.log, format!("{banner}{}", records(written, 200))).unwrap();
        written += 200;
        p = s.serve(None);
    }
    let said = s.said();
    assert_eq!(settle_counted(&p, written).await, written, "lockwatch said:\n{said}");
    assert!(said.contains("the bytes before its offset changed"), "{said}");
}

/// Wait until `want` records are counted (at most 20 s); what was counted then.
async fn settle_quick(p: &common::logs::Proc, want: u64) -> u64 {
    let started = std::time::Instant::now();
    loop {
        let now = counted(p).await;
        if now >= want || started.elapsed() > Duration::from_secs(20) {
            return now;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
