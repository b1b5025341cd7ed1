//! A document from outside (a drill's record sent to the exporter) is checked before it is
//! kept and drawn: every moment on a lane of its timeline, every time within a century of
//! its origin, a span ending after it begins, a row of labels or more. Its words need no
//! check: every format escapes them.

use super::{Block, Document, Timeline};

/// The farthest a time may lie from its timeline's origin, in ms (about 31 years): the
/// drawing's arithmetic never comes near overflowing.
pub const MAX_MS: i64 = 1_000_000_000_000;

impl Document {
    /// Whether the document can be drawn: the first problem found, in a sentence.
    pub fn check(&self) -> Result<(), String> {
        for (n, s) in self.sections.iter().enumerate() {
            for b in &s.blocks {
                if let Block::Timeline(t) = b {
                    t.check()
                        .map_err(|e| format!("section {n} (`{}`)'s timeline: {e}", s.id))?;
                }
            }
        }
        Ok(())
    }
}

impl Timeline {
    fn check(&self) -> Result<(), String> {
        if self.label_rows == 0 {
            return Err("`label_rows` must be 1 or more".into());
        }
        let far = |ms: i64| !(-MAX_MS..=MAX_MS).contains(&ms);
        if far(self.at_least_to) {
            return Err(format!(
                "`at_least_to` {} is farther than {MAX_MS} ms from the origin",
                self.at_least_to
            ));
        }
        let mut last = i64::MIN;
        for (i, m) in self.moments.iter().enumerate() {
            if m.lane >= self.lanes.len() {
                return Err(format!(
                    "moment {i} is on lane {}, of {} lanes",
                    m.lane,
                    self.lanes.len()
                ));
            }
            if far(m.at_ms) || m.until_ms.is_some_and(far) {
                return Err(format!("moment {i} lies farther than {MAX_MS} ms from the origin"));
            }
            if m.until_ms.is_some_and(|u| u < m.at_ms) {
                return Err(format!("moment {i} ends before it begins"));
            }
            if m.at_ms < last {
                return Err(format!(
                    "moment {i} comes before the one above it: moments are in time order"
                ));
            }
            last = m.at_ms;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Badge, Block, Document, Moment, Section, Timeline, timeline::LaneRow};

    fn doc(moments: Vec<Moment<usize>>) -> Document {
        let t = Timeline {
            origin: "start".into(),
            about: String::new(),
            lanes: vec![LaneRow {
                id: "a".into(),
                name: "A".into(),
                empty: "nothing".into(),
            }],
            moments,
            at_least_to: 0,
            label_rows: 2,
            class: String::new(),
        };
        Document {
            title: "t".into(),
            badge: Badge {
                word: "SAFE".into(),
                class: "safe".into(),
            },
            lead: String::new(),
            facts: vec![],
            sections: vec![Section::new("timeline", "Timeline", vec![Block::Timeline(Box::new(t))])],
            tab: String::new(),
        }
    }

    #[test]
    fn a_drawable_document_passes_and_a_broken_one_is_named() {
        assert_eq!(
            doc(vec![Moment::at(0, 0, "x", true), Moment::span(5, 9, 0, "y", true)]).check(),
            Ok(())
        );
        let off_lane = doc(vec![Moment::at(0, 1, "x", true)]).check().unwrap_err();
        assert!(off_lane.contains("moment 0 is on lane 1, of 1 lanes"), "{off_lane}");
        let far = doc(vec![Moment::at(i64::MAX, 0, "x", true)]).check().unwrap_err();
        assert!(far.contains("farther"), "{far}");
        let backwards = doc(vec![Moment::span(9, 5, 0, "x", true)]).check().unwrap_err();
        assert!(backwards.contains("ends before it begins"), "{backwards}");
        let unordered = doc(vec![Moment::at(9, 0, "x", true), Moment::at(5, 0, "y", true)])
            .check()
            .unwrap_err();
        assert!(unordered.contains("time order"), "{unordered}");
    }

    #[test]
    fn a_document_survives_its_json() {
        let d = doc(vec![Moment::at(0, 0, "<b>", false)]);
        let back: Document = serde_json::from_str(&serde_json::to_string(&d).unwrap()).unwrap();
        assert_eq!(back.html(), d.html());
        assert!(back.html().contains("&lt;b&gt;"));
    }
}
