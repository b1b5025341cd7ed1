//! The one swimlane drawing: an inline SVG with a lane per actor, each moment a dot at its
//! time with its label (labels that would overlap go to another row of their lane), spans
//! as bars behind them, and a round time axis. Used by both drill reports and the key page.

use std::fmt::Write as _;

use super::esc;
use super::timeline::{Moment, Timeline, Window, at, tick_ms};

/// The drawing's width in SVG units; the page scales it.
const WIDTH: f64 = 1000.0;
/// Room for the lane names.
const LEFT: f64 = 130.0;
const RIGHT: f64 = 16.0;
/// The time axis above the lanes.
const AXIS: f64 = 30.0;
const ROW: f64 = 22.0;
const LANE_PAD: f64 = 10.0;
/// A label's width per character at the drawing's font size, and around it.
const CHAR_W: f64 = 6.6;
const LABEL_PAD: f64 = 18.0;

/// A moment placed: its x, its label's row in its lane (`None`: no room, tooltip only),
/// and whether its label goes left of the dot.
struct Placed<'a> {
    moment: &'a Moment<usize>,
    x: f64,
    row: Option<usize>,
    left: bool,
}

fn x(w: Window, ms: i64) -> f64 {
    let span = (w.to - w.from).max(1) as f64;
    LEFT + (WIDTH - LEFT - RIGHT) * (ms.clamp(w.from, w.to) - w.from) as f64 / span
}

/// Place the moments of `lane` inside `w`: each label in the first row where it overlaps
/// nothing, at most `rows` rows.
fn place<'a>(t: &'a Timeline, lane: usize, w: Window) -> Vec<Placed<'a>> {
    let mut rows: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut out = Vec::new();
    for m in t.moments.iter().filter(|m| m.lane == lane && w.holds(m.at_ms)) {
        let at = x(w, m.at_ms);
        let width = m.what.chars().count() as f64 * CHAR_W + LABEL_PAD;
        let left = at + width > WIDTH - RIGHT;
        let span = if left {
            (at - width, at + 6.0)
        } else {
            (at - 6.0, at + width)
        };
        let free = |row: &Vec<(f64, f64)>| row.iter().all(|(a, b)| span.1 <= *a || span.0 >= *b);
        let row = match rows.iter().position(free) {
            Some(i) => Some(i),
            None if rows.len() < t.label_rows => {
                rows.push(Vec::new());
                Some(rows.len() - 1)
            }
            None => None,
        };
        if let Some(r) = row.and_then(|r| rows.get_mut(r)) {
            r.push(span);
        }
        out.push(Placed {
            moment: m,
            x: at,
            row,
            left,
        });
    }
    out
}

/// The whole of `t`, for a page that lists the moments its own way.
pub fn whole(t: &Timeline) -> String {
    svg(t, t.whole(), "whole")
}

/// The SVG of the moments inside `w`; `class` names the drawing (`whole`, `burst`).
pub(super) fn svg(t: &Timeline, w: Window, class: &str) -> String {
    let placed: Vec<Vec<Placed>> = (0..t.lanes.len()).map(|l| place(t, l, w)).collect();
    let heights: Vec<f64> = placed
        .iter()
        .map(|p| p.iter().filter_map(|p| p.row).max().map_or(1, |r| r + 1) as f64 * ROW + 2.0 * LANE_PAD)
        .collect();
    let height = AXIS + heights.iter().sum::<f64>() + 4.0;
    let mut o = String::new();
    let _ = write!(
        o,
        "<svg class=\"timeline {class}{extra}\" viewBox=\"0 0 {WIDTH} {height}\" role=\"img\" \
         aria-label=\"swimlane timeline, {} to {}\" preserveAspectRatio=\"xMinYMin meet\">",
        esc(&at(w.from, &t.origin)),
        esc(&at(w.to, &t.origin)),
        extra = if t.class.is_empty() {
            String::new()
        } else {
            format!(" {}", esc(&t.class))
        },
    );
    axis(&mut o, t, w, height);
    let mut y = AXIS;
    for (lane, (placed, h)) in placed.iter().zip(&heights).enumerate() {
        lane_svg(&mut o, t, lane, placed, (y, *h), w);
        y += h;
    }
    o.push_str("</svg>");
    o
}

fn axis(o: &mut String, t: &Timeline, w: Window, height: f64) {
    o.push_str("<g class=\"axis\">");
    let tick = tick_ms(w.to - w.from);
    // Ticks on round times, the origin among them.
    let mut ms = -(-w.from).div_euclid(tick) * tick;
    while ms <= w.to {
        let tx = x(w, ms);
        let anchor = if ms == w.to { "end" } else { "middle" };
        let _ = write!(
            o,
            "<line class=\"tick-line\" x1=\"{tx:.1}\" x2=\"{tx:.1}\" y1=\"{}\" y2=\"{height}\"/>\
             <text class=\"tick\" x=\"{tx:.1}\" y=\"{}\" text-anchor=\"{anchor}\">{}</text>",
            AXIS - 8.0,
            AXIS - 12.0,
            esc(&at(ms, &t.origin))
        );
        ms += tick;
    }
    o.push_str("</g>");
}

/// One lane: its band and name, its spans (cut to the window), then its moments inside
/// the window in time order.
fn lane_svg(o: &mut String, t: &Timeline, lane: usize, placed: &[Placed], (y, h): (f64, f64), w: Window) {
    let Some(row) = t.lanes.get(lane) else {
        return;
    };
    let _ = write!(
        o,
        "<g class=\"lane\" data-lane=\"{id}\"><rect class=\"band\" x=\"0\" y=\"{y}\" width=\"{WIDTH}\" height=\"{h}\"/>\
         <text class=\"lane-name\" x=\"8\" y=\"{:.1}\">{}</text>",
        y + LANE_PAD + 15.0,
        esc(&row.name),
        id = esc(&row.id),
    );
    if !t.moments.iter().any(|m| m.lane == lane) {
        let _ = write!(
            o,
            "<text class=\"none\" x=\"{LEFT}\" y=\"{:.1}\">{}</text>",
            y + LANE_PAD + 15.0,
            esc(&row.empty)
        );
    }
    for m in t.moments.iter().filter(|m| m.lane == lane) {
        let Some(until) = m.until_ms else {
            continue;
        };
        if !w.meets(m.at_ms, until) {
            continue;
        }
        let (x1, x2) = (x(w, m.at_ms), x(w, until));
        let _ = write!(
            o,
            "<rect class=\"span{}\" data-from=\"{}\" data-until=\"{until}\" x=\"{x1:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" rx=\"3\">\
             <title>{}: {} to {}</title></rect>",
            if m.ok { "" } else { " deviation" },
            m.at_ms,
            y + 3.0,
            (x2 - x1).max(1.0),
            h - 6.0,
            esc(&m.what),
            esc(&at(m.at_ms, &t.origin)),
            esc(&at(until, &t.origin))
        );
    }
    for p in placed {
        moment_svg(o, t, p, y);
    }
    o.push_str("</g>");
}

fn moment_svg(o: &mut String, t: &Timeline, p: &Placed, lane_y: f64) {
    let m = p.moment;
    let cy = lane_y + LANE_PAD + ROW * p.row.unwrap_or(0) as f64 + ROW / 2.0;
    let (tx, anchor) = if p.left {
        (p.x - 9.0, "end")
    } else {
        (p.x + 9.0, "start")
    };
    let _ = write!(
        o,
        "<g class=\"event{}\" data-at=\"{}\" data-lane=\"{}\" data-step=\"{}\">\
         <title>{}{}: {}</title><circle cx=\"{:.1}\" cy=\"{cy:.1}\" r=\"{}\"/>",
        if m.ok { "" } else { " deviation" },
        m.at_ms,
        esc(t.lane_id(m)),
        m.step.map(|n| n.to_string()).unwrap_or_default(),
        esc(&at(m.at_ms, &t.origin)),
        m.step.map(|n| format!(", step {n}")).unwrap_or_default(),
        esc(&m.what),
        p.x,
        if m.ok { 5 } else { 7 },
    );
    if p.row.is_some() {
        let _ = write!(
            o,
            "<text x=\"{tx:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\">{}</text>",
            cy + 4.0,
            esc(&m.what)
        );
    }
    o.push_str("</g>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::timeline::Lane;

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum L {
        A,
        B,
        Proxy,
    }

    impl Lane for L {
        fn id(self) -> &'static str {
            ["worker_a", "worker_b", "proxy"][self as usize]
        }
        fn name(self) -> &'static str {
            ["worker A", "worker B", "proxy"][self as usize]
        }
        fn empty(self) -> &'static str {
            "no --exporter given"
        }
    }

    fn timeline(moments: &[Moment<L>]) -> Timeline {
        let mut t = Timeline::of("start", "", &[L::A, L::B, L::Proxy], moments);
        t.at_least_to = 1000;
        t
    }

    fn attr_values<'a>(svg: &'a str, attr: &str) -> Vec<&'a str> {
        svg.split(&format!("{attr}=\""))
            .skip(1)
            .filter_map(|s| s.split('"').next())
            .collect()
    }

    #[test]
    fn moments_come_out_in_time_order_within_each_lane_and_labels_do_not_overlap() {
        let t = timeline(&[
            Moment::at(900, L::A, "late", true),
            Moment::at(10, L::A, "A acquires", true),
            Moment::at(12, L::A, "SIGSTOP", true),
            Moment::at(11, L::B, "B refused", true),
        ]);
        let svg = svg(&t, t.whole(), "whole");
        let lane_a = svg.split("data-lane=\"worker_b\"").next().unwrap_or("");
        assert_eq!(attr_values(lane_a, "data-at"), ["10", "12", "900"]);
        // 10 and 12 ms are a pixel apart: the second label goes to a second row.
        let rows: Vec<Option<usize>> = place(&t, 0, t.whole()).iter().map(|p| p.row).collect();
        assert_eq!(rows, [Some(0), Some(1), Some(0)]);
        assert!(svg.contains("no --exporter given"), "an empty lane says why");
    }

    #[test]
    fn a_span_is_a_bar_cut_to_the_window_and_harm_stands_out() {
        let t = timeline(&[
            Moment::span(100, 1300, L::A, "SIGSTOP", true),
            Moment::span(200, 400, L::Proxy, "renewal held", false),
            Moment::at(1390, L::B, "release ACCEPTED", false),
        ]);
        let svg = svg(&t, t.whole(), "whole");
        assert_eq!(attr_values(&svg, "data-until"), ["1300", "400"]);
        assert_eq!(svg.matches("class=\"span deviation\"").count(), 1);
        assert_eq!(svg.matches("class=\"event deviation\"").count(), 2);
        assert!(svg.contains("text-anchor=\"end\">release ACCEPTED"), "{svg}");
        // A close-up that starts inside the span draws its bar from the left edge.
        let close = super::svg(&t, Window { from: 1000, to: 1400 }, "burst");
        assert!(close.contains(&format!("data-from=\"100\" data-until=\"1300\" x=\"{LEFT:.1}\"")));
    }

    #[test]
    fn past_the_rows_allowed_a_label_is_left_to_the_tooltip() {
        let moments: Vec<Moment<L>> = (0..5).map(|i| Moment::at(i, L::A, format!("m{i}"), true)).collect();
        let mut t = timeline(&moments);
        t.label_rows = 2;
        let svg = svg(&t, t.whole(), "whole");
        assert_eq!(svg.matches("<circle").count(), 5);
        assert_eq!(svg.matches("text-anchor=\"start\">m").count(), 2);
        assert!(svg.contains("<title>+0.004 s: m4</title>"));
    }
}
