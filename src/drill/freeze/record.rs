//! The freeze drill's report as a document: the verdict and what was frozen, how and for
//! how long, each lock of the frozen worker with its finding, exposure, consequence and fix,
//! the application's timeline from the freeze, the witness, the alerts and the notes.

use super::report::{Actor, FreezeReport, headline};
use super::verdict::{LockVerdict, Verdict};
use crate::document::{Badge, Block, Document, Fact, Finding, Item, Section, Table, Timeline, Tone};

/// Rows of labels per lane of the timeline.
const LABEL_ROWS: usize = 4;

impl FreezeReport {
    /// The report as a document.
    pub fn document(&self) -> Document {
        let word = headline(self.verdict, self.interrupted);
        let class = if self.interrupted {
            "interrupted"
        } else {
            self.verdict.as_str()
        };
        let mut facts = vec![
            Fact::code("frozen", &self.frozen),
            Fact::new("what", &self.what),
            Fact::new("how", &self.method),
            Fact::new("for", self.frozen_for()),
            Fact::new("thawed by", self.thawed_by()),
            Fact::new(
                "watched after the thaw",
                format!("{:.1} s", self.observe_ms as f64 / 1000.0),
            ),
        ];
        if !self.worker.is_empty() {
            facts.push(Fact::new("the frozen worker, from /proc", &self.worker));
        }
        facts.extend([
            Fact::new("target", &self.target),
            Fact::code("namespace", &self.namespace),
            Fact::new("started", &self.started_at),
            Fact::new(
                "locks held at the freeze",
                format!("{}, the frozen worker's: {}", self.held_at_freeze, self.locks.len()),
            ),
        ]);
        let mut sections = vec![Section::new(
            "locks",
            "The frozen worker's locks",
            match self.locks.is_empty() {
                true => vec![Block::Note(
                    "None of the namespace's locks was the frozen worker's.".into(),
                )],
                false => vec![Block::Findings(self.locks.iter().map(finding).collect())],
            },
        )];
        if !self.timeline.is_empty() {
            let about = "Each moment at its time from the freeze (negative: before it). Shaded: the worker frozen, \
                         and in red the time it acted under a lock it no longer held.";
            let mut t = Timeline::of("freeze", about, &Actor::ALL, &self.timeline);
            // Many commands right after the thaw: labels in four rows, the rest in the
            // tooltips and the list.
            t.label_rows = LABEL_ROWS;
            sections.push(Section::new("timeline", "Timeline", vec![Block::Timeline(Box::new(t))]));
        }
        sections.push(Section::new(
            "witness",
            "Witness",
            vec![Block::Para(self.witness_words())],
        ));
        if !self.alerts.is_empty() {
            let alerts = Table::pairs(["alert", "state"], &self.alerts, true);
            sections.push(Section::new(
                "alerts",
                "Lock alerts in Prometheus",
                vec![Block::Table(alerts)],
            ));
        }
        if !self.notes.is_empty() {
            let notes = self.notes.iter().map(Item::plain).collect();
            sections.push(Section::new("notes", "Notes", vec![Block::List(notes)]));
        }
        Document {
            title: "Freeze drill".into(),
            badge: Badge {
                word: word.into(),
                class: class.into(),
            },
            lead: self.result.clone(),
            facts,
            sections,
            tab: format!("lockwatch freeze drill: {word}"),
        }
    }

    /// Who thawed it, and why when the drill did not ask; or that the thaw failed and how
    /// to thaw it by hand.
    fn thawed_by(&self) -> String {
        match (&self.thaw.failed, &self.thaw.why) {
            (Some(failed), _) => format!(
                "nobody: THE THAW FAILED ({failed}); thaw it by hand: {}",
                self.thaw.by_hand
            ),
            (None, Some(why)) => format!("the {} ({why})", self.thaw.by),
            (None, None) if self.thaw.by.is_empty() => "the drill".into(),
            (None, None) => format!("the {}", self.thaw.by),
        }
    }
}

fn finding(l: &LockVerdict) -> Finding {
    let mut facts = vec![
        Fact::new("finding", l.finding.words()),
        Fact::new("attributed", &l.attributed_by),
    ];
    if let Some(h) = &l.deleted_how {
        facts.push(Fact::new("deletion", h));
    }
    if let Some(words) = l.exposure_words() {
        facts.push(Fact::new("exposure", words));
    }
    if !l.refusals.is_empty() {
        facts.push(Fact::new("the worker's refusals after the thaw", l.refusal_words()));
    }
    if !l.not_credited.is_empty() {
        facts.push(Fact::new(
            "refusals of the key not credited to it",
            l.not_credited_words(),
        ));
    }
    facts.extend(l.notes.iter().map(|n| Fact::new("note", n)));
    let (tone, mark) = match l.verdict {
        Verdict::Safe => (Tone::Good, "✓ safe"),
        Verdict::Unsafe => (Tone::Bad, "✗ unsafe"),
        Verdict::NotExercised => (Tone::Neutral, "– not exercised"),
    };
    Finding {
        kind: "lock".into(),
        anchor: None,
        n: None,
        title: l.key.clone(),
        code_title: true,
        tone,
        mark: mark.into(),
        at: None,
        facts,
        consequence: Some(l.consequence.clone()),
        fix: Some(l.fix.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::report::{FreezeReport, Moment, Witness};
    use super::super::seen::Window;
    use super::super::verdict::{Finding, LockVerdict, Verdict};

    fn report() -> FreezeReport {
        let finding = Finding::DeletedNewOwnersLock;
        let lock = LockVerdict {
            key: "lock:<script>alert(1)</script>".into(),
            verdict: finding.verdict(),
            finding,
            attributed_by: "held & expired".into(),
            owner: Some("a".into()),
            last_renewal_ms: Some(900),
            expired_ms: Some(2_000),
            taken_over_ms: Some(2_500),
            new_owner: Some("b".into()),
            deleted_ms: Some(6_500),
            deleted_how: Some("DEL sent by the woken worker's connection".into()),
            exposure_ms: Some(500),
            last_act: Some("DEL".into()),
            exposure_open: false,
            commands: vec![],
            commands_seen: 0,
            refusals: vec![],
            not_credited: vec![],
            consequence: finding.consequence(Some(500), false),
            fix: finding.fix(),
            notes: vec![],
        };
        let mut r = FreezeReport {
            verdict: Verdict::Unsafe,
            result: "unsafe".into(),
            started_at: "2026-11-26T00:00:00Z".into(),
            target: "staging".into(),
            namespace: "payout".into(),
            frozen: "pid:42".into(),
            what: "process 42 (worker \"<x>\")".into(),
            method: "SIGSTOP/SIGCONT".into(),
            for_ms: 5_000,
            observe_ms: 5_000,
            window: Some(Window {
                frozen_ms: 1_000,
                thawed_ms: 6_000,
                end_ms: 11_000,
            }),
            worker: "pids 42".into(),
            held_at_freeze: 1,
            locks: vec![lock],
            counted: vec![],
            witness: Witness::default(),
            timeline: Vec::<Moment>::new(),
            alerts: vec![],
            notes: vec![],
            interrupted: false,
            thaw: Default::default(),
        };
        r.build_timeline();
        r
    }

    #[test]
    fn the_page_is_self_contained_and_escapes_what_the_run_saw() {
        let r = report();
        let page = r.document().html();
        assert!(!page.contains("<script"), "unescaped");
        assert!(page.contains("lock:&lt;script&gt;"));
        assert!(!page.contains("http://") && !page.contains("https://") && !page.contains(" src="));
        assert!(page.contains("<svg") && page.contains("unsafe: deleted the new owner"));
        // The moments in time order, from before the freeze (the last renewal) to the end.
        let at: Vec<i64> = r.timeline.iter().map(|m| m.at_ms).collect();
        assert!(at.windows(2).all(|p| p[0] <= p[1]) && at[0] < 0, "{at:?}");
        let doc = r.document();
        assert!(doc.text().contains("UNSAFE") && doc.markdown().contains("# Freeze drill: UNSAFE"));
    }
}
