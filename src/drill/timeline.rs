//! The HTML report's swimlane timeline: one inline SVG, a lane per actor (worker A, worker B,
//! the network proxy of the delay scenarios, Redis, lockwatch), each event at its real time
//! since the run started, periods (A frozen, a request held) as bars. Labels that would
//! overlap go to another row of their lane. Events come out in time order.

use std::fmt::Write as _;

use super::report::{Event, Lane, Period, Report};
use crate::markup::esc;

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

/// An event placed: its x, row in its lane, and whether its label goes left of the mark.
struct Placed<'a> {
    event: &'a Event,
    x: f64,
    row: usize,
    left: bool,
}

/// The lanes drawn: A, B, Redis and lockwatch always; the proxy when anything happened there
/// or the scenario has one.
fn lanes(r: &Report) -> Vec<Lane> {
    let proxied = r.scenario != "stale-holder" || r.events.iter().any(|e| e.lane == Lane::Proxy);
    Lane::ALL.into_iter().filter(|l| *l != Lane::Proxy || proxied).collect()
}

/// A tick spacing that gives at most about 10 ticks over `total` ms.
fn tick_ms(total: u64) -> u64 {
    const NICE: [u64; 12] = [
        100, 200, 250, 500, 1000, 2000, 2500, 5000, 10_000, 20_000, 30_000, 60_000,
    ];
    NICE.into_iter()
        .find(|t| total / t <= 10)
        .unwrap_or_else(|| (total / 10).max(1))
}

/// The events in time order (stable: equal times keep the order they were recorded in).
pub(super) fn in_order(r: &Report) -> Vec<&Event> {
    let mut v: Vec<&Event> = r.events.iter().collect();
    v.sort_by_key(|e| e.at_ms);
    v
}

fn label_width(e: &Event) -> f64 {
    e.what.chars().count() as f64 * CHAR_W + LABEL_PAD
}

/// Place every event of `lane`: the first row where its label overlaps nothing.
fn place<'a>(events: &[&'a Event], lane: Lane, x_of: &dyn Fn(u64) -> f64) -> Vec<Placed<'a>> {
    let mut rows: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut out = Vec::new();
    for e in events.iter().filter(|e| e.lane == lane) {
        let x = x_of(e.at_ms);
        let w = label_width(e);
        let left = x + w > WIDTH - RIGHT;
        let span = if left { (x - w, x + 6.0) } else { (x - 6.0, x + w) };
        let free = |row: &Vec<(f64, f64)>| row.iter().all(|(a, b)| span.1 <= *a || span.0 >= *b);
        let row = match rows.iter().position(free) {
            Some(i) => i,
            None => {
                rows.push(Vec::new());
                rows.len() - 1
            }
        };
        if let Some(r) = rows.get_mut(row) {
            r.push(span);
        }
        out.push(Placed { event: e, x, row, left });
    }
    out
}

fn secs(ms: u64) -> String {
    format!("{:.2} s", ms as f64 / 1000.0)
}

/// The SVG, and its height in SVG units.
pub(super) fn svg(r: &Report) -> String {
    let events = in_order(r);
    let total = r.span_ms().max(r.ttl_ms).max(1);
    let tick = tick_ms(total);
    let end = total.div_ceil(tick) * tick;
    let x_of = |ms: u64| LEFT + (WIDTH - LEFT - RIGHT) * ms as f64 / end as f64;
    let lanes = lanes(r);
    let placed: Vec<(Lane, Vec<Placed>)> = lanes.iter().map(|l| (*l, place(&events, *l, &x_of))).collect();
    let heights: Vec<f64> = placed
        .iter()
        .map(|(_, p)| (p.iter().map(|p| p.row + 1).max().unwrap_or(1)) as f64 * ROW + 2.0 * LANE_PAD)
        .collect();
    let height = AXIS + heights.iter().sum::<f64>() + 4.0;
    let mut o = String::new();
    let _ = write!(
        o,
        "<svg class=\"timeline\" viewBox=\"0 0 {WIDTH} {height}\" role=\"img\" \
         aria-label=\"swimlane timeline of the run\" preserveAspectRatio=\"xMinYMin meet\">"
    );
    let _ = write!(o, "<g class=\"axis\">");
    let mut t = 0;
    while t <= end {
        let x = x_of(t);
        let anchor = if t == end { "end" } else { "middle" };
        let _ = write!(
            o,
            "<line class=\"grid\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{}\" y2=\"{height}\"/>\
             <text class=\"tick\" x=\"{x:.1}\" y=\"{}\" text-anchor=\"{anchor}\">{}</text>",
            AXIS - 8.0,
            AXIS - 12.0,
            if t == 0 {
                "start".into()
            } else {
                format!("+{}", secs(t))
            }
        );
        t += tick;
    }
    o.push_str("</g>");
    let mut y = AXIS;
    for ((lane, placed), h) in placed.iter().zip(&heights) {
        lane_svg(&mut o, *lane, placed, y, *h, &x_of, end);
        y += h;
    }
    o.push_str("</svg>");
    o
}

/// One lane: its band, name, periods, then its events in time order.
fn lane_svg(o: &mut String, lane: Lane, placed: &[Placed], y: f64, h: f64, x_of: &dyn Fn(u64) -> f64, end: u64) {
    let id = lane_id(lane);
    let _ = write!(
        o,
        "<g class=\"lane\" data-lane=\"{id}\"><rect class=\"band\" x=\"0\" y=\"{y}\" width=\"{WIDTH}\" height=\"{h}\"/>\
         <text class=\"lane-name\" x=\"8\" y=\"{:.1}\">{}</text>",
        y + LANE_PAD + 15.0,
        lane.name()
    );
    if placed.is_empty() {
        let _ = write!(
            o,
            "<text class=\"none\" x=\"{LEFT}\" y=\"{:.1}\">{}</text>",
            y + LANE_PAD + 15.0,
            if lane == Lane::Lockwatch {
                "no --exporter given: no counters read"
            } else {
                "nothing"
            }
        );
    }
    // Periods: a Begins until the next Ends of the lane, or the end of the run.
    for (i, p) in placed.iter().enumerate() {
        if p.event.period != Some(Period::Begins) {
            continue;
        }
        let until = placed[i + 1..]
            .iter()
            .find(|q| q.event.period == Some(Period::Ends))
            .map_or(end, |q| q.event.at_ms);
        let x2 = x_of(until);
        let _ = write!(
            o,
            "<rect class=\"period\" data-from=\"{}\" data-until=\"{until}\" x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" rx=\"3\">\
             <title>{}: {}</title></rect>",
            p.event.at_ms,
            p.x,
            y + 3.0,
            (x2 - p.x).max(1.0),
            h - 6.0,
            esc(&p.event.what),
            secs(until.saturating_sub(p.event.at_ms))
        );
    }
    for p in placed {
        event_svg(o, p, y);
    }
    o.push_str("</g>");
}

fn event_svg(o: &mut String, p: &Placed, lane_y: f64) {
    let e = p.event;
    let cy = lane_y + LANE_PAD + ROW * p.row as f64 + ROW / 2.0;
    let class = if e.ok { "event" } else { "event deviation" };
    let step = e.step.map(|n| n.to_string()).unwrap_or_default();
    let (tx, anchor) = if p.left {
        (p.x - 9.0, "end")
    } else {
        (p.x + 9.0, "start")
    };
    let _ = write!(
        o,
        "<g class=\"{class}\" data-at=\"{}\" data-lane=\"{}\" data-step=\"{step}\">\
         <title>+{}{}: {}</title><circle cx=\"{:.1}\" cy=\"{cy:.1}\" r=\"{}\"/>\
         <text x=\"{tx:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\">{}</text></g>",
        e.at_ms,
        lane_id(e.lane),
        secs(e.at_ms),
        e.step.map(|n| format!(", step {n}")).unwrap_or_default(),
        esc(&e.what),
        p.x,
        if e.ok { 5 } else { 7 },
        cy + 4.0,
        esc(&e.what)
    );
}

/// The lane's name in attributes and JSON.
pub(super) fn lane_id(l: Lane) -> &'static str {
    match l {
        Lane::WorkerA => "worker_a",
        Lane::WorkerB => "worker_b",
        Lane::Proxy => "proxy",
        Lane::Redis => "redis",
        Lane::Lockwatch => "lockwatch",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(events: Vec<Event>) -> Report {
        Report {
            scenario: "stale-holder".into(),
            ttl_ms: 1000,
            events,
            ..Report::default()
        }
    }

    fn attr_values<'a>(svg: &'a str, attr: &str) -> Vec<&'a str> {
        svg.split(&format!("{attr}=\""))
            .skip(1)
            .filter_map(|s| s.split('"').next())
            .collect()
    }

    #[test]
    fn events_come_out_in_time_order_within_each_lane_and_labels_do_not_overlap() {
        let r = report(vec![
            Event::at(900, Lane::WorkerA, "late", true),
            Event::at(10, Lane::WorkerA, "A acquires", true),
            Event::at(12, Lane::WorkerA, "SIGSTOP", true),
            Event::at(11, Lane::WorkerB, "B refused", true),
        ]);
        let svg = svg(&r);
        let lane_a = svg.split("data-lane=\"worker_b\"").next().unwrap_or("");
        let at: Vec<u64> = attr_values(lane_a, "data-at")
            .iter()
            .filter_map(|v| v.parse().ok())
            .collect();
        assert_eq!(at, [10, 12, 900]);
        // 10 and 12 ms are a pixel apart: the second label goes to a second row.
        let placed = place(&in_order(&r), Lane::WorkerA, &|ms| LEFT + ms as f64);
        let rows: Vec<usize> = placed.iter().map(|p| p.row).collect();
        assert_eq!(rows, [0, 1, 0]);
    }

    #[test]
    fn a_period_runs_to_its_end_or_to_the_end_of_the_run() {
        let mut stop = Event::at(100, Lane::WorkerA, "SIGSTOP", true);
        stop.period = Some(Period::Begins);
        let mut cont = Event::at(1300, Lane::WorkerA, "SIGCONT", true);
        cont.period = Some(Period::Ends);
        let mut held = Event::at(200, Lane::Proxy, "renewal held", true);
        held.period = Some(Period::Begins);
        let svg = svg(&report(vec![stop, cont, held]));
        assert_eq!(attr_values(&svg, "data-until"), ["1300", "1400"]);
        assert!(svg.contains("data-lane=\"proxy\""), "the proxy lane is drawn when used");
    }

    #[test]
    fn labels_near_the_right_edge_turn_left_and_deviations_stand_out() {
        let svg = svg(&report(vec![
            Event::at(0, Lane::WorkerA, "A acquires", true),
            Event::at(1000, Lane::WorkerA, "release ACCEPTED", false),
        ]));
        assert!(svg.contains("text-anchor=\"end\">release ACCEPTED"), "{svg}");
        assert_eq!(svg.matches("class=\"event deviation\"").count(), 1);
        assert!(svg.contains("no --exporter given"), "an empty lockwatch lane says why");
        assert!(
            !svg.contains("data-lane=\"proxy\""),
            "no proxy lane in the stale-holder scenario"
        );
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(tick_ms(1_000), 100);
        assert_eq!(tick_ms(2_400), 250);
        assert_eq!(tick_ms(3_100), 500);
        assert_eq!(tick_ms(40_000), 5_000);
    }
}
