//! The status page's pictures, drawn on the server as inline SVG so they exist without
//! JavaScript: a namespace's last hour as small charts (gauges as lines, counts as bars),
//! and a key's lifecycle as the reports' swimlane (holds as spans per owner hash, expiries
//! and takeovers marked). Pure: values in, markup out.

use std::fmt::Write;

use crate::document::{LaneRow, Moment, Timeline};
use crate::locks::recent::Bucket;

pub(super) use crate::document::esc;

/// Which of a bucket's values a chart shows.
#[derive(Debug, Clone, Copy)]
pub(super) enum Metric {
    Held,
    Overdue,
    Failures,
    /// Acquisitions busy or timed out: drawn apart from the failures, not in red.
    Contention,
    Takeovers,
}

impl Metric {
    pub(super) const ALL: [Metric; 5] = [
        Metric::Held,
        Metric::Overdue,
        Metric::Failures,
        Metric::Contention,
        Metric::Takeovers,
    ];

    pub(super) fn name(self) -> &'static str {
        match self {
            Metric::Held => "held",
            Metric::Overdue => "overdue",
            Metric::Failures => "failures",
            Metric::Contention => "contention",
            Metric::Takeovers => "takeovers",
        }
    }

    fn words(self) -> &'static str {
        match self {
            Metric::Held => "held",
            Metric::Overdue => "renewal overdue",
            Metric::Failures => "lock failures (logs, pushes)",
            Metric::Contention => "acquisitions waited or gave up",
            Metric::Takeovers => "expiry takeovers",
        }
    }

    /// A count per bucket (bars, summed) rather than a gauge (a line, its latest).
    fn counts(self) -> bool {
        matches!(self, Metric::Failures | Metric::Contention | Metric::Takeovers)
    }

    fn of(self, b: &Bucket) -> u32 {
        match self {
            Metric::Held => b.held,
            Metric::Overdue => b.overdue,
            Metric::Failures => b.failures,
            Metric::Contention => b.contention,
            Metric::Takeovers => b.takeovers,
        }
    }
}

const W: usize = 360;
const H: u32 = 60;
/// Ten-second buckets per bar of a count chart: one bar a minute, wide enough to see.
const PER_BAR: usize = 6;

/// One chart of the hour `hour` (oldest bucket first, `None` = no data): a figure with its
/// words and current value (`data-now`: the latest gauge, or the hour's sum of a count),
/// the scale (0 and the hour's highest at the left), the hour (−60 min, −30, now) below;
/// gauges as a line over a shaded area, counts as one bar a minute.
pub(super) fn chart(metric: Metric, hour: &[Option<Bucket>]) -> String {
    let values: Vec<Option<u32>> = hour.iter().map(|b| b.as_ref().map(|b| metric.of(b))).collect();
    let now = if metric.counts() {
        values.iter().flatten().map(|v| u64::from(*v)).sum::<u64>()
    } else {
        values.iter().rev().flatten().next().map_or(0, |v| u64::from(*v))
    };
    // Counts summed per minute; gauges as they are.
    let drawn: Vec<Option<u32>> = if metric.counts() {
        values
            .chunks(PER_BAR)
            .map(|c| c.iter().flatten().copied().reduce(|a, b| a.saturating_add(b)))
            .collect()
    } else {
        values.clone()
    };
    let max = drawn.iter().flatten().copied().max().unwrap_or(0);
    let hour_max = values.iter().flatten().copied().max().unwrap_or(0);
    let scale = f64::from(max.max(1));
    let y = |v: u32| f64::from(H) - f64::from(v) / scale * f64::from(H - 4);
    let step = if drawn.is_empty() {
        1.0
    } else {
        W as f64 / drawn.len() as f64
    };
    let mut body = format!(
        r#"<line class="mid" x1="0" y1="{m:.1}" x2="{W}" y2="{m:.1}"/><line class="mid" x1="{half}" y1="0" x2="{half}" y2="{H}"/>"#,
        m = y(max.max(1)) / 2.0 + f64::from(H) / 2.0 - 1.0,
        half = W / 2
    );
    if metric.counts() {
        for (i, v) in drawn.iter().enumerate() {
            if let Some(v) = v.filter(|v| *v > 0) {
                let top = y(v).min(f64::from(H) - 2.0);
                let _ = write!(
                    body,
                    r#"<rect x="{:.1}" y="{top:.1}" width="{:.1}" height="{:.1}"><title>{v}</title></rect>"#,
                    i as f64 * step + 0.5,
                    step - 1.0,
                    f64::from(H) - top
                );
            }
        }
    } else {
        let mut line = String::new();
        let mut area = String::new();
        let mut run: Option<(f64, f64)> = None;
        for (i, v) in drawn.iter().enumerate() {
            let x = i as f64 * step;
            match (v, run) {
                (Some(v), None) => {
                    let _ = write!(line, "M{x:.1} {:.1}", y(*v));
                    let _ = write!(area, "M{x:.1} {H}L{x:.1} {:.1}", y(*v));
                    run = Some((x, x));
                }
                (Some(v), Some((start, _))) => {
                    let _ = write!(line, "L{x:.1} {:.1}", y(*v));
                    let _ = write!(area, "L{x:.1} {:.1}", y(*v));
                    run = Some((start, x));
                }
                (None, Some((_, end))) => {
                    let _ = write!(area, "L{end:.1} {H}Z");
                    run = None;
                }
                (None, None) => {}
            }
        }
        if let Some((_, end)) = run {
            let _ = write!(area, "L{end:.1} {H}Z");
        }
        if !line.is_empty() {
            let _ = write!(body, r#"<path class="area" d="{area}"/><path d="{line}"/>"#);
        }
        // The latest value marked, so a few minutes of data show at the right edge.
        if let Some((i, v)) = drawn.iter().enumerate().rev().find_map(|(i, v)| v.map(|v| (i, v))) {
            let _ = write!(
                body,
                r#"<rect class="last" x="{:.1}" y="{:.1}" width="5" height="5"/>"#,
                (i as f64 * step - 2.5).max(0.0),
                y(v) - 2.5
            );
        }
    }
    let seen = values.iter().flatten().count();
    let (summary, note) = if metric.counts() {
        (
            format!("{now} in the last hour"),
            format!("in the hour · at most {max} a minute"),
        )
    } else {
        (
            format!("{now} now, at most {hour_max} in the hour"),
            format!("now · at most {hour_max} in the hour"),
        )
    };
    format!(
        r#"<figure class="chart {cls}" data-metric="{name}" data-now="{now}" data-max="{hour_max}"><figcaption><span>{words}</span> <b>{now}</b> <small>{note}</small></figcaption><div class="plot"><div class="y"><span>{top}</span><span>0</span></div><svg viewBox="0 0 {W} {H}" preserveAspectRatio="none" role="img" aria-label="{words}: {summary}"><title>{words}: {summary} ({seen} of {n} ten-second buckets with data)</title>{body}</svg></div><div class="x"><span>−60 min</span><span>−30 min</span><span>now</span></div></figure>"#,
        cls = if metric.counts() { "bars" } else { "line" },
        name = metric.name(),
        words = metric.words(),
        n = values.len(),
        top = max.max(1),
    )
}

/// A key's lifecycle to draw: (at ms, kind, owner hash, takeover), oldest first.
pub(super) type Transition<'a> = (i64, &'a str, Option<&'a str>, bool);

/// The key's lifecycle up to `now_ms` as the swimlane: a lane per owner hash with its holds
/// as spans (an acquisition to the release, expiry or eviction that ends it, or to now),
/// expiries, evictions and takeovers marked as harm.
pub(super) fn lifecycle(transitions: &[Transition<'_>], now_ms: i64) -> String {
    let mut lanes: Vec<LaneRow> = Vec::new();
    // A lane per owner hash, named by its first 8 characters.
    let mut lane_of = |owner: Option<&str>| {
        let id = owner.unwrap_or("unknown");
        lanes.iter().position(|l| l.id == id).unwrap_or_else(|| {
            lanes.push(LaneRow {
                id: id.into(),
                name: id.get(..8).unwrap_or(id).into(),
                empty: String::new(),
            });
            lanes.len() - 1
        })
    };
    let mut moments: Vec<Moment<usize>> = Vec::new();
    let mut open: Option<(i64, usize)> = None;
    let held = |start: i64, end: i64, lane: usize, now: bool| {
        let what = match now {
            true => format!("held {:.1} s, now", (end - start) as f64 / 1000.0),
            false => format!("held {:.1} s", (end - start) as f64 / 1000.0),
        };
        Moment::span(start - now_ms, end - now_ms, lane, what, true)
    };
    for &(at, kind, owner, takeover) in transitions {
        let lane = lane_of(owner);
        match kind {
            "acquired" => {
                if let Some((start, l)) = open.replace((at, lane)) {
                    moments.push(held(start, at, l, false));
                }
                if takeover {
                    moments.push(Moment::at(at - now_ms, lane, "takeover", false));
                }
            }
            "released" | "expired" | "evicted" => {
                let lane = open.take().map_or(lane, |(start, l)| {
                    moments.push(held(start, at, l, false));
                    l
                });
                if kind != "released" {
                    moments.push(Moment::at(at - now_ms, lane, kind, false));
                }
            }
            _ => {}
        }
    }
    if let Some((start, l)) = open {
        moments.push(held(start, now_ms, l, true));
    }
    moments.sort_by_key(|m| m.at_ms);
    let t = Timeline {
        origin: "now".into(),
        about: String::new(),
        lanes,
        moments,
        at_least_to: 0,
        label_rows: 2,
        class: "lifecycle".into(),
    };
    crate::document::swimlane::whole(&t)
}
