//! The status page's pictures, drawn on the server as inline SVG so they exist without
//! JavaScript: a namespace's last hour as small charts (gauges as lines, counts as bars),
//! and a key's lifecycle as a timeline (holds as bars per owner hash, expiries and
//! takeovers marked). Pure: values in, markup out.

use std::fmt::Write;

use crate::locks::recent::Bucket;

pub(super) use crate::markup::esc;

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

/// The key's lifecycle from `from_ms` to `to_ms` as a timeline: a lane per owner hash with
/// its holds as bars (an acquisition to the release, expiry or eviction that ends it, or to
/// now), expiries and evictions marked ×, takeovers marked ▲.
pub(super) fn lifecycle(transitions: &[Transition<'_>], from_ms: i64, to_ms: i64) -> String {
    let span = (to_ms - from_ms).max(1) as f64;
    const LW: f64 = 1000.0;
    let x = |at: i64| ((at - from_ms) as f64 / span * LW).clamp(0.0, LW);
    let mut lanes: Vec<&str> = Vec::new();
    for (_, _, owner, _) in transitions {
        let o = owner.unwrap_or("unknown");
        if !lanes.contains(&o) {
            lanes.push(o);
        }
    }
    let lane_h = 26.0;
    let height = (lanes.len().max(1) as f64) * lane_h + 22.0;
    let mut svg = format!(
        r#"<svg class="lifecycle" viewBox="0 0 1120 {height}" role="img" aria-label="lifecycle of the key"><title>holds per owner hash; × expired or evicted; ▲ takeover</title>"#
    );
    let lane_of = |owner: Option<&str>| lanes.iter().position(|l| *l == owner.unwrap_or("unknown")).unwrap_or(0);
    for (i, l) in lanes.iter().enumerate() {
        let ty = i as f64 * lane_h + 17.0;
        let _ = write!(
            svg,
            r#"<text class="lane" x="0" y="{ty}">{}</text>"#,
            esc(&l[..l.len().min(8)])
        );
    }
    let mut open: Option<(i64, usize)> = None;
    let bar = |svg: &mut String, start: i64, end: i64, lane: usize| {
        let (x0, x1) = (x(start), x(end));
        let _ = write!(
            svg,
            r#"<rect class="hold" x="{:.1}" y="{:.1}" width="{:.1}" height="16"/>"#,
            120.0 + x0,
            lane as f64 * lane_h + 4.0,
            (x1 - x0).max(2.0)
        );
    };
    for &(at, kind, owner, takeover) in transitions {
        let lane = lane_of(owner);
        match kind {
            "acquired" => {
                if let Some((start, l)) = open.take() {
                    bar(&mut svg, start, at, l);
                }
                open = Some((at, lane));
                if takeover {
                    let _ = write!(
                        svg,
                        r#"<text class="takeover" x="{:.1}" y="{:.1}">▲<title>takeover</title></text>"#,
                        120.0 + x(at) - 5.0,
                        lane as f64 * lane_h + 30.0
                    );
                }
            }
            "released" | "expired" | "evicted" => {
                let lane = open.take().map_or(lane, |(start, l)| {
                    bar(&mut svg, start, at, l);
                    l
                });
                if kind != "released" {
                    let _ = write!(
                        svg,
                        r#"<text class="expiry" x="{:.1}" y="{:.1}">×<title>{kind}</title></text>"#,
                        120.0 + x(at) - 4.0,
                        lane as f64 * lane_h + 17.0
                    );
                }
            }
            _ => {}
        }
    }
    if let Some((start, l)) = open {
        bar(&mut svg, start, to_ms, l);
    }
    let secs = (to_ms - from_ms) / 1000;
    let _ = write!(
        svg,
        r#"<text class="lane" x="120" y="{b}">−{secs} s</text><text class="lane" x="1080" y="{b}">now</text></svg>"#,
        b = height - 4.0
    );
    svg
}
