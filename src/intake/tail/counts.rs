//! A source's event and line counts as saved beside its offsets, by label value (namespace
//! name, op, outcome, line result), so a restart continues the counters from exactly what the
//! saved offsets cover — neither losing nor repeating a count — even when the config's
//! namespaces changed in between.

use serde::{Deserialize, Serialize};

use crate::intake::count::Tally;
use crate::vocab::{LineResult, Op, Outcome, UNKNOWN_NAMESPACE};

/// Everything a source counted up to its saved offsets, since its state began.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SavedCounts {
    pub(crate) lines: SavedLines,
    /// Non-zero event counts only.
    pub(crate) events: Vec<SavedEvent>,
}

/// `lockwatch_log_lines_total` of the source, by result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SavedLines {
    pub(crate) matched: u64,
    pub(crate) ignored: u64,
    pub(crate) malformed: u64,
}

/// One `lockwatch_lock_events_total` series' share from this source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SavedEvent {
    pub(crate) namespace: String,
    pub(crate) op: String,
    pub(crate) outcome: String,
    pub(crate) count: u64,
}

impl SavedCounts {
    /// The counts of `t`, whose namespaces are `names` in config order.
    pub(crate) fn of(t: &Tally, names: &[String]) -> Self {
        let line = |r: LineResult| t.lines[r as usize];
        SavedCounts {
            lines: SavedLines {
                matched: line(LineResult::Matched),
                ignored: line(LineResult::Ignored),
                malformed: line(LineResult::Malformed),
            },
            events: t
                .events()
                .map(|(ns, op, outcome, count)| SavedEvent {
                    namespace: ns
                        .and_then(|i| names.get(i))
                        .map_or(UNKNOWN_NAMESPACE, String::as_str)
                        .to_string(),
                    op: op.as_str().to_string(),
                    outcome: outcome.as_str().to_string(),
                    count,
                })
                .collect(),
        }
    }

    /// A tally of these counts for the namespaces `names`, and the events it could not place
    /// (a namespace no longer configured, or a word this version does not know).
    pub(crate) fn to_tally(&self, names: &[String]) -> (Tally, u64) {
        let mut t = Tally::new(names.len());
        let mut dropped = 0;
        for e in &self.events {
            let ns = if e.namespace == UNKNOWN_NAMESPACE {
                Some(None)
            } else {
                names.iter().position(|n| *n == e.namespace).map(Some)
            };
            match (ns, e.op.parse::<Op>(), e.outcome.parse::<Outcome>()) {
                (Some(ns), Ok(op), Ok(outcome)) => t.events_of(ns, op, outcome, e.count),
                _ => dropped += e.count,
            }
        }
        t.lines[LineResult::Matched as usize] = self.lines.matched;
        t.lines[LineResult::Ignored as usize] = self.lines.ignored;
        t.lines[LineResult::Malformed as usize] = self.lines.malformed;
        (t, dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_round_trip_by_name_and_follow_renamed_namespaces() {
        let names = vec!["jobs".to_string(), "pay".to_string()];
        let mut t = Tally::new(2);
        t.event(Some(1), Op::Renew, Outcome::NotOwned);
        t.event(Some(1), Op::Renew, Outcome::NotOwned);
        t.event(None, Op::Release, Outcome::Error);
        t.too_long();
        let saved = SavedCounts::of(&t, &names);
        assert_eq!(saved.lines.matched, 3);
        assert_eq!(saved.lines.malformed, 1);
        assert_eq!(saved.to_tally(&names), (t.clone(), 0));
        // `jobs` removed and `pay` moved: its counts follow the name; nothing was in `jobs`.
        let (moved, dropped) = saved.to_tally(&["pay".to_string()]);
        let got: Vec<_> = moved.events().collect();
        assert_eq!(
            got,
            vec![
                (Some(0), Op::Renew, Outcome::NotOwned, 2),
                (None, Op::Release, Outcome::Error, 1)
            ]
        );
        assert_eq!(dropped, 0);
        // `pay` gone: its two are dropped, and said so.
        let (_, dropped) = saved.to_tally(&["jobs".to_string()]);
        assert_eq!(dropped, 2);
    }
}
