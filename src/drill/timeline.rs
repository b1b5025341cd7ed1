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
    const NICE: [u64; 19] = [
        1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 2500, 5000, 10_000, 20_000, 30_000, 60_000,
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

/// The stretch of time a drawing shows, in ms since the run started.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Window {
    pub(super) from: u64,
    pub(super) to: u64,
}

impl Window {
    fn x(self, ms: u64) -> f64 {
        let span = self.to.saturating_sub(self.from).max(1) as f64;
        LEFT + (WIDTH - LEFT - RIGHT) * ms.clamp(self.from, self.to).saturating_sub(self.from) as f64 / span
    }

    fn holds(self, ms: u64) -> bool {
        (self.from..=self.to).contains(&ms)
    }
}

/// The whole run, from its start to a round tick past its last moment (at least the TTL).
pub(super) fn whole(r: &Report) -> Window {
    let total = r.span_ms().max(r.ttl_ms).max(1);
    let tick = tick_ms(total);
    Window {
        from: 0,
        to: total.div_ceil(tick) * tick,
    }
}

/// A close-up of the burst after the run's longest quiet stretch (the takeover and the
/// stale operations after the TTL ran out), when that stretch is most of the run and the
/// burst has several moments: they fall a few pixels apart in the whole.
pub(super) fn burst(r: &Report) -> Option<Window> {
    let times: Vec<u64> = in_order(r).iter().map(|e| e.at_ms).collect();
    let (i, gap) = times
        .windows(2)
        .enumerate()
        .map(|(i, w)| (i, w[1] - w[0]))
        .max_by_key(|(_, g)| *g)?;
    let after = times.get(i + 1..)?;
    let (first, last) = (*after.first()?, *after.last()?);
    let total = whole(r).to;
    (after.len() >= 3 && gap * 2 > total && (last - first) * 5 < total).then(|| {
        let tick = tick_ms((last - first).max(10));
        Window {
            from: first / tick * tick,
            to: (last / tick + 1) * tick,
        }
    })
}

/// The SVG of the moments inside `w`; `class` names the drawing.
pub(super) fn svg(r: &Report, w: Window, class: &str) -> String {
    let events: Vec<&Event> = in_order(r);
    let inside: Vec<&Event> = events.iter().copied().filter(|e| w.holds(e.at_ms)).collect();
    let x_of = |ms: u64| w.x(ms);
    let lanes = lanes(r);
    let placed: Vec<(Lane, Vec<Placed>)> = lanes.iter().map(|l| (*l, place(&inside, *l, &x_of))).collect();
    let heights: Vec<f64> = placed
        .iter()
        .map(|(_, p)| (p.iter().map(|p| p.row + 1).max().unwrap_or(1)) as f64 * ROW + 2.0 * LANE_PAD)
        .collect();
    let height = AXIS + heights.iter().sum::<f64>() + 4.0;
    let mut o = String::new();
    let _ = write!(
        o,
        "<svg class=\"timeline {class}\" viewBox=\"0 0 {WIDTH} {height}\" role=\"img\" \
         aria-label=\"swimlane timeline of the run, {} to {}\" preserveAspectRatio=\"xMinYMin meet\">",
        at(w.from),
        at(w.to)
    );
    let _ = write!(o, "<g class=\"axis\">");
    let tick = tick_ms(w.to - w.from);
    let mut t = w.from;
    while t <= w.to {
        let x = w.x(t);
        let anchor = if t == w.to { "end" } else { "middle" };
        let _ = write!(
            o,
            "<line class=\"grid\" x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{}\" y2=\"{height}\"/>\
             <text class=\"tick\" x=\"{x:.1}\" y=\"{}\" text-anchor=\"{anchor}\">{}</text>",
            AXIS - 8.0,
            AXIS - 12.0,
            at(t)
        );
        t += tick;
    }
    o.push_str("</g>");
    let mut y = AXIS;
    for ((lane, placed), h) in placed.iter().zip(&heights) {
        let all: Vec<&Event> = events.iter().copied().filter(|e| e.lane == *lane).collect();
        lane_svg(&mut o, *lane, (&all, placed), (y, *h), w);
        y += h;
    }
    o.push_str("</svg>");
    o
}

/// `+1.234 s` since the start, or `start`.
fn at(ms: u64) -> String {
    if ms == 0 {
        "start".into()
    } else if ms.is_multiple_of(10) {
        format!("+{}", secs(ms))
    } else {
        format!("+{:.3} s", ms as f64 / 1000.0)
    }
}

/// One lane: its band, name, periods (from all of its events, cut to the window), then its
/// events inside the window in time order.
fn lane_svg(o: &mut String, lane: Lane, (all, placed): (&[&Event], &[Placed]), (y, h): (f64, f64), w: Window) {
    let id = lane_id(lane);
    let _ = write!(
        o,
        "<g class=\"lane\" data-lane=\"{id}\"><rect class=\"band\" x=\"0\" y=\"{y}\" width=\"{WIDTH}\" height=\"{h}\"/>\
         <text class=\"lane-name\" x=\"8\" y=\"{:.1}\">{}</text>",
        y + LANE_PAD + 15.0,
        lane.name()
    );
    if all.is_empty() {
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
    for (i, e) in all.iter().enumerate() {
        if e.period != Some(Period::Begins) {
            continue;
        }
        let until = all[i + 1..]
            .iter()
            .find(|q| q.period == Some(Period::Ends))
            .map_or(w.to.max(e.at_ms), |q| q.at_ms);
        if until < w.from || e.at_ms > w.to {
            continue;
        }
        let (x1, x2) = (w.x(e.at_ms), w.x(until));
        let _ = write!(
            o,
            "<rect class=\"period\" data-from=\"{}\" data-until=\"{until}\" x=\"{x1:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" rx=\"3\">\
             <title>{}: {}</title></rect>",
            e.at_ms,
            y + 3.0,
            (x2 - x1).max(1.0),
            h - 6.0,
            esc(&e.what),
            secs(until.saturating_sub(e.at_ms))
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
         <title>{}{}: {}</title><circle cx=\"{:.1}\" cy=\"{cy:.1}\" r=\"{}\"/>\
         <text x=\"{tx:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\">{}</text></g>",
        e.at_ms,
        lane_id(e.lane),
        at(e.at_ms),
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

    fn period(at_ms: u64, lane: Lane, p: Period) -> Event {
        Event {
            period: Some(p),
            ..Event::at(at_ms, lane, format!("{p:?}"), true)
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
        let svg = svg(&r, whole(&r), "whole");
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
        let r = report(vec![
            period(100, Lane::WorkerA, Period::Begins),
            period(1300, Lane::WorkerA, Period::Ends),
            period(200, Lane::Proxy, Period::Begins),
        ]);
        let svg = svg(&r, whole(&r), "whole");
        assert_eq!(attr_values(&svg, "data-until"), ["1300", "1400"]);
        assert!(svg.contains("data-lane=\"proxy\""), "the proxy lane is drawn when used");
    }

    #[test]
    fn labels_near_the_right_edge_turn_left_and_deviations_stand_out() {
        let r = report(vec![
            Event::at(0, Lane::WorkerA, "A acquires", true),
            Event::at(1000, Lane::WorkerA, "release ACCEPTED", false),
        ]);
        let svg = svg(&r, whole(&r), "whole");
        assert!(svg.contains("text-anchor=\"end\">release ACCEPTED"), "{svg}");
        assert_eq!(svg.matches("class=\"event deviation\"").count(), 1);
        assert!(svg.contains("no --exporter given"), "an empty lockwatch lane says why");
        assert!(
            !svg.contains("data-lane=\"proxy\""),
            "no proxy lane in the stale-holder scenario"
        );
    }

    #[test]
    fn the_burst_after_the_pause_gets_a_close_up_with_the_periods_cut_to_it() {
        let (stop, cont) = (
            period(20, Lane::WorkerA, Period::Begins),
            period(1043, Lane::WorkerA, Period::Ends),
        );
        let mut events = vec![Event::at(10, Lane::WorkerA, "A acquires", true), stop];
        events.extend([1031, 1035, 1039].map(|t| Event::at(t, Lane::WorkerB, "B", true)));
        events.extend([cont, Event::at(1046, Lane::WorkerA, "renew refused", true)]);
        let r = report(events);
        let w = burst(&r).expect("a close-up");
        assert_eq!(w, Window { from: 1030, to: 1048 });
        let svg = svg(&r, w, "burst");
        let at: Vec<&str> = attr_values(&svg, "data-at");
        assert_eq!(at, ["1043", "1046", "1031", "1035", "1039"], "lane A, then lane B");
        // A frozen since before the close-up: its bar starts at the left edge.
        assert!(
            svg.contains(&format!("data-from=\"20\" data-until=\"1043\" x=\"{LEFT:.1}\"")),
            "{svg}"
        );
        assert!(svg.contains(">+1.03 s<") && svg.contains(">+1.032 s<"), "{svg}");
        // Nothing to zoom into when the moments spread over the run.
        let even = report((0..10).map(|i| Event::at(i * 100, Lane::Redis, "x", true)).collect());
        assert_eq!(burst(&even), None);
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(tick_ms(1_000), 100);
        assert_eq!(tick_ms(2_400), 250);
        assert_eq!(tick_ms(3_100), 500);
        assert_eq!(tick_ms(40_000), 5_000);
    }
}
