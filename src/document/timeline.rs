//! A timeline: lanes (who) and moments (when, from a named origin; a span when it has an
//! end), and the stretches of time a drawing shows — the whole, and a close-up of a burst
//! that would fall a few pixels apart in the whole.

use serde::{Deserialize, Serialize};

/// Who a moment belongs to: a lane of the swimlane.
pub trait Lane: Copy + PartialEq {
    /// Its name in attributes and JSON (`worker_a`).
    fn id(self) -> &'static str;
    /// Its name as people read it (`worker A`).
    fn name(self) -> &'static str;
    /// What the lane says when nothing happened on it.
    fn empty(self) -> &'static str {
        "nothing"
    }
}

/// One moment, in milliseconds from the timeline's origin (negative: before it); a span
/// when it has an end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Moment<L> {
    pub at_ms: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until_ms: Option<i64>,
    pub lane: L,
    /// A few words.
    pub what: String,
    /// The step it belongs to, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<usize>,
    /// `false`: a deviation, a sign of harm.
    pub ok: bool,
}

impl<L> Moment<L> {
    /// A point of no step.
    pub fn at(at_ms: i64, lane: L, what: impl Into<String>, ok: bool) -> Self {
        Moment {
            at_ms,
            until_ms: None,
            lane,
            what: what.into(),
            step: None,
            ok,
        }
    }

    /// A span from `at_ms` to `until_ms`.
    pub fn span(at_ms: i64, until_ms: i64, lane: L, what: impl Into<String>, ok: bool) -> Self {
        Moment {
            until_ms: Some(until_ms),
            ..Moment::at(at_ms, lane, what, ok)
        }
    }
}

/// A lane as drawn: its id, name, and what it says when empty.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaneRow {
    pub id: String,
    pub name: String,
    pub empty: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Timeline {
    /// What time 0 is, as the axis says it: `start`, `freeze`, `now`.
    pub origin: String,
    /// How to read it, in a sentence.
    pub about: String,
    /// Top to bottom.
    pub lanes: Vec<LaneRow>,
    /// In time order (equal times keep the order they were recorded in); `lane` indexes
    /// `lanes`.
    pub moments: Vec<Moment<usize>>,
    /// The drawing runs at least to here (the TTL of a drill's lock).
    pub at_least_to: i64,
    /// At most this many rows of labels per lane; the rest keep their words in the
    /// moment's tooltip and the list.
    pub label_rows: usize,
    /// An extra class of the drawing (`lifecycle`).
    pub class: String,
}

impl Timeline {
    /// The moments of `lanes`, in time order; a moment of another lane is left out.
    pub fn of<L: Lane>(origin: &str, about: impl Into<String>, lanes: &[L], moments: &[Moment<L>]) -> Timeline {
        let mut drawn: Vec<Moment<usize>> = moments
            .iter()
            .filter_map(|m| {
                let lane = lanes.iter().position(|l| *l == m.lane)?;
                Some(Moment {
                    at_ms: m.at_ms,
                    until_ms: m.until_ms,
                    lane,
                    what: m.what.clone(),
                    step: m.step,
                    ok: m.ok,
                })
            })
            .collect();
        drawn.sort_by_key(|m| m.at_ms);
        Timeline {
            origin: origin.into(),
            about: about.into(),
            lanes: lanes
                .iter()
                .map(|l| LaneRow {
                    id: l.id().into(),
                    name: l.name().into(),
                    empty: l.empty().into(),
                })
                .collect(),
            moments: drawn,
            at_least_to: 0,
            label_rows: usize::MAX,
            class: String::new(),
        }
    }

    /// Whether any moment belongs to a numbered step (the list then has a step column).
    pub fn stepped(&self) -> bool {
        self.moments.iter().any(|m| m.step.is_some())
    }

    /// The lane's name of a moment.
    pub fn lane_name(&self, m: &Moment<usize>) -> &str {
        self.lanes.get(m.lane).map_or("", |l| l.name.as_str())
    }

    /// The lane's id of a moment.
    pub fn lane_id(&self, m: &Moment<usize>) -> &str {
        self.lanes.get(m.lane).map_or("", |l| l.id.as_str())
    }

    /// The whole: from the first moment (or the origin) to the last moment's end (at least
    /// `at_least_to`), widened to round ticks.
    pub fn whole(&self) -> Window {
        let ends = self.moments.iter().map(|m| m.until_ms.unwrap_or(m.at_ms).max(m.at_ms));
        let first = self.moments.iter().map(|m| m.at_ms).min().unwrap_or(0).min(0);
        let last = ends.max().unwrap_or(0).max(self.at_least_to).max(first + 1);
        let tick = tick_ms(last - first);
        Window {
            from: first.div_euclid(tick) * tick,
            to: -((-last).div_euclid(tick) * tick),
        }
    }

    /// A close-up of the burst after the longest quiet stretch (a takeover and the stale
    /// operations after a TTL ran out), when that stretch is most of the whole and the
    /// burst has at least three moments packed into a fifth of it.
    pub fn burst(&self) -> Option<Window> {
        let times: Vec<i64> = self.moments.iter().map(|m| m.at_ms).collect();
        let (i, gap) = times
            .windows(2)
            .enumerate()
            .map(|(i, w)| (i, w[1] - w[0]))
            .max_by_key(|(_, g)| *g)?;
        let after = times.get(i + 1..)?;
        let (first, last) = (*after.first()?, *after.last()?);
        let whole = self.whole();
        let total = whole.to - whole.from;
        (after.len() >= 3 && gap * 2 > total && (last - first) * 5 < total).then(|| {
            let tick = tick_ms((last - first).max(10));
            Window {
                from: first.div_euclid(tick) * tick,
                to: (last.div_euclid(tick) + 1) * tick,
            }
        })
    }
}

/// The stretch of time a drawing shows, in ms from the origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub from: i64,
    pub to: i64,
}

impl Window {
    pub fn holds(self, ms: i64) -> bool {
        (self.from..=self.to).contains(&ms)
    }

    /// Whether `[a, b]` meets the window.
    pub fn meets(self, a: i64, b: i64) -> bool {
        b >= self.from && a <= self.to
    }
}

/// A round tick spacing that gives at most about 10 ticks over `total` ms.
pub fn tick_ms(total: i64) -> i64 {
    const NICE: [i64; 27] = [
        1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 2500, 5000, 10_000, 20_000, 30_000, 60_000, 120_000,
        300_000, 600_000, 900_000, 1_800_000, 3_600_000, 7_200_000, 21_600_000,
    ];
    NICE.into_iter()
        .find(|t| total / t <= 10)
        .unwrap_or_else(|| (total / 10).max(1))
}

/// A time as the axis and the list say it: the origin's word at 0, whole minutes past two
/// minutes, else seconds to the millisecond it needs.
pub fn at(ms: i64, origin: &str) -> String {
    if ms == 0 {
        origin.to_string()
    } else if ms % 60_000 == 0 && ms.abs() >= 120_000 {
        format!("{:+} min", ms / 60_000)
    } else if ms % 1000 == 0 {
        format!("{:+} s", ms / 1000)
    } else if ms % 10 == 0 {
        format!("{:+.2} s", ms as f64 / 1000.0)
    } else {
        format!("{:+.3} s", ms as f64 / 1000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum L {
        A,
        B,
    }

    impl Lane for L {
        fn id(self) -> &'static str {
            ["a", "b"][self as usize]
        }
        fn name(self) -> &'static str {
            ["lane A", "lane B"][self as usize]
        }
    }

    fn timeline(at: &[i64]) -> Timeline {
        let moments: Vec<Moment<L>> = at.iter().map(|t| Moment::at(*t, L::A, "x", true)).collect();
        Timeline::of("start", "", &[L::A, L::B], &moments)
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(tick_ms(1_000), 100);
        assert_eq!(tick_ms(2_400), 250);
        assert_eq!(tick_ms(3_100), 500);
        assert_eq!(tick_ms(40_000), 5_000);
        assert_eq!(tick_ms(3_600_000), 600_000);
    }

    #[test]
    fn the_whole_runs_from_the_origin_or_earlier_to_a_round_tick_past_the_last_end() {
        let mut t = timeline(&[10, 900]);
        t.at_least_to = 1000;
        assert_eq!(t.whole(), Window { from: 0, to: 1000 });
        let t = timeline(&[-1_200, 3_100]);
        assert_eq!(
            t.whole(),
            Window {
                from: -1_500,
                to: 3_500
            }
        );
        // A span's end counts; the key page's times end at 0, now.
        let spans = [Moment::span(-50_000, -20_000, L::B, "held", true)];
        let t = Timeline::of("now", "", &[L::A, L::B], &spans);
        assert_eq!(t.whole(), Window { from: -50_000, to: 0 });
    }

    #[test]
    fn the_burst_after_the_pause_gets_a_close_up() {
        let t = timeline(&[10, 20, 1031, 1035, 1039, 1043, 1046]);
        assert_eq!(t.burst(), Some(Window { from: 1030, to: 1048 }));
        let even = timeline(&(0..10).map(|i| i * 100).collect::<Vec<_>>());
        assert_eq!(even.burst(), None);
    }

    #[test]
    fn times_read_from_the_origin() {
        assert_eq!(at(0, "freeze"), "freeze");
        assert_eq!(at(1_030, "start"), "+1.03 s");
        assert_eq!(at(1_032, "start"), "+1.032 s");
        assert_eq!(at(-500, "freeze"), "-0.50 s");
        assert_eq!(at(-600_000, "now"), "-10 min");
        assert_eq!(at(3_000, "freeze"), "+3 s");
    }
}
