//! The drills' recorded results as the status page and `/api/v1/status` show them: a line
//! of counts first, then a line per drill — its latest verdict, how long ago it ran, the
//! worst lock's finding in a sentence, a strip of its recent verdicts (oldest left), and a
//! link to the latest run's report. Unsafe first. Every text a drill sent is escaped.

use std::fmt::Write;

use serde::Serialize;

use super::charts::esc;
use super::status_view::rfc3339;
use crate::drills::results::{Kept, Run, Verdict};

/// One drill, as `/api/v1/status` carries it under `drills`.
#[derive(Debug, Serialize)]
pub(super) struct DrillView {
    pub(super) target: String,
    pub(super) namespace: String,
    pub(super) drill: String,
    /// `staged` or `freeze`.
    pub(super) kind: crate::drills::results::Kind,
    pub(super) verdict: Verdict,
    pub(super) ended_ms: u64,
    /// Whole seconds since the latest run ended.
    pub(super) age_s: u64,
    pub(super) exposure_ms: u64,
    pub(super) summary: String,
    /// Runs in a row with the latest verdict.
    pub(super) streak: usize,
    /// The last runs, the latest last.
    pub(super) recent: Vec<Run>,
    /// The latest run's report, relative to the exporter's root.
    pub(super) report: String,
}

/// The views of `kept` at `now_ms`: unsafe first, then not exercised, interrupted and
/// safe; by name within each.
pub(super) fn views(kept: Vec<std::sync::Arc<Kept>>, now_ms: i64) -> Vec<DrillView> {
    let now = u64::try_from(now_ms).unwrap_or(0);
    let mut out: Vec<DrillView> = kept
        .into_iter()
        .map(|k| {
            let r = &k.latest;
            DrillView {
                report: link(&r.name, &r.target, &r.namespace),
                target: r.target.clone(),
                namespace: r.namespace.clone(),
                drill: r.name.clone(),
                kind: r.kind,
                verdict: r.verdict,
                ended_ms: r.ended_ms,
                age_s: now.saturating_sub(r.ended_ms) / 1000,
                exposure_ms: r.exposure_ms,
                summary: r.summary.clone(),
                streak: k.streak(),
                recent: k.recent.iter().cloned().collect(),
            }
        })
        .collect();
    out.sort_by_key(|v| (rank(v.verdict), v.drill.clone(), v.target.clone(), v.namespace.clone()));
    out
}

/// `drills/NAME?target=T&namespace=NS`: names are of `A-Z a-z 0-9 _ - . :`, nothing to
/// encode.
pub(super) fn link(name: &str, target: &str, namespace: &str) -> String {
    format!("drills/{name}?target={target}&namespace={namespace}")
}

fn rank(v: Verdict) -> u8 {
    match v {
        Verdict::Unsafe => 0,
        Verdict::NotExercised => 1,
        Verdict::Interrupted => 2,
        Verdict::Safe => 3,
    }
}

/// `5 min`, `3 h`, `2 d`: how long ago, roughly.
fn age(s: u64) -> String {
    match s {
        0..60 => format!("{s} s"),
        60..7200 => format!("{} min", s / 60),
        7200..172_800 => format!("{} h", s / 3600),
        _ => format!("{} d", s / 86_400),
    }
}

fn words(v: Verdict) -> &'static str {
    match v {
        Verdict::Safe => "safe",
        Verdict::Unsafe => "UNSAFE",
        Verdict::NotExercised => "not exercised",
        Verdict::Interrupted => "interrupted",
    }
}

/// The section: a heading, a line of counts, then a line per drill; a sentence saying how
/// to record one when none is.
pub(super) fn html(views: &[DrillView]) -> String {
    let mut h = String::from(
        r#"<h2 id="drills-recorded">drills <small>the latest result of each drill recorded here</small></h2>"#,
    );
    if views.is_empty() {
        h.push_str(r#"<p class="muted" data-drills="0">No drill has recorded a result here: run <code>lockwatch drill … --exporter URL</code> (on a schedule: docs/drill.md).</p>"#);
        return h;
    }
    let count = |v: Verdict| views.iter().filter(|d| d.verdict == v).count();
    let counts: Vec<String> = Verdict::ALL
        .into_iter()
        .filter(|v| count(*v) > 0)
        .map(|v| format!("{} {}", count(v), words(v)))
        .collect();
    let _ = write!(
        h,
        r#"<p data-drills="{}">{} drill(s): {}</p><ol class="summary">"#,
        views.len(),
        views.len(),
        counts.join(", ")
    );
    for v in views {
        let level = match v.verdict {
            Verdict::Safe => "ok",
            Verdict::Unsafe => "bad",
            Verdict::NotExercised | Verdict::Interrupted => "warn",
        };
        let mark = if v.verdict == Verdict::Safe { "✓" } else { "✗" };
        let exposure = match v.exposure_ms {
            0 => String::new(),
            ms => format!(", exposure {:.1} s", ms as f64 / 1000.0),
        };
        let _ = write!(
            h,
            r#"<li class="line lvl-{level}" data-drill="{name}" data-verdict="{verdict}"><span class="mark">{mark}</span> <b class="what">{name}</b> <small>{target} / {ns}</small> — <span class="verdict {verdict}">{words}</span> {ago} ago (<time datetime="{at}">{at}</time>){exposure}: {summary} {strip} <a href="{report}">report</a></li>"#,
            name = esc(&v.drill),
            target = esc(&v.target),
            ns = esc(&v.namespace),
            verdict = v.verdict.as_str(),
            words = words(v.verdict),
            ago = age(v.age_s),
            at = rfc3339(i64::try_from(v.ended_ms).unwrap_or(i64::MAX)),
            summary = esc(&v.summary),
            strip = strip(&v.recent),
            report = esc(&v.report),
        );
    }
    h.push_str("</ol>");
    h
}

/// The recent verdicts as a row of small squares, the oldest left, each titled.
fn strip(runs: &[Run]) -> String {
    let mut s = format!(
        r#"<span class="strip" role="img" aria-label="the last {} runs' verdicts, oldest first">"#,
        runs.len()
    );
    for r in runs {
        let _ = write!(
            s,
            r#"<i class="{v}" title="{at}: {w}"></i>"#,
            v = r.verdict.as_str(),
            at = rfc3339(i64::try_from(r.ended_ms).unwrap_or(i64::MAX)),
            w = words(r.verdict),
        );
    }
    s.push_str("</span>");
    s
}
