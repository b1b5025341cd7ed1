//! The staged drill's report as a document: the verdict and the run's facts, the
//! deviations first, the swimlane timeline, each step (what happened, what was expected,
//! the consequence of a deviation), what lockwatch counted, the alerts, the sustained run,
//! the commands to check it yourself, the rollback and the pre-flight.

use super::report::{Lane, Report, Step};
use crate::document::{
    Badge, Block, Cell, Document, Fact, Finding, Item, Row, Section, Table, Timeline, Tone, signed_secs,
};

impl Report {
    /// The report as a document.
    pub fn document(&self) -> Document {
        let (word, class) = match (self.interrupted, self.passed()) {
            (true, _) => ("interrupted", "interrupted"),
            (false, true) => ("passed", "passed"),
            (false, false) => ("FAILED", "failed"),
        };
        let mut sections = Vec::new();
        sections.extend(self.deviation_box());
        sections.push(Section::new(
            "timeline",
            "Timeline",
            vec![Block::Timeline(Box::new(self.timeline()))],
        ));
        sections.push(Section::new(
            "steps",
            "Steps",
            vec![Block::Findings(self.steps.iter().map(finding).collect())],
        ));
        sections.push(self.counted());
        sections.push(self.alerts());
        if let Some(c) = &self.cycles {
            let after = |s: Option<f64>| s.map_or("—".into(), |s| format!("{s:.0} s"));
            let said = format!(
                "{} {} cycles in {:.0} s; alert pending after {}, firing after {}.",
                c.cycles,
                self.scenario,
                c.seconds,
                after(c.pending_after_s),
                after(c.firing_after_s)
            );
            sections.push(Section::new("sustained", "Sustained run", vec![Block::Para(said)]));
        }
        sections.push(self.check_it());
        sections.push(Section::new(
            "rollback",
            "Rollback",
            vec![Block::List(self.rollback.iter().map(Item::plain).collect())],
        ));
        let preflight = Table::pairs(["check", "finding"], &self.preflight, false);
        sections.push(Section::new("preflight", "Pre-flight", vec![Block::Table(preflight)]));
        Document {
            title: format!("Drill record, {}", self.scenario.replace('-', " ")),
            badge: Badge {
                word: word.into(),
                class: class.into(),
            },
            lead: self.result.clone(),
            facts: vec![
                Fact::code("run", &self.run_id),
                Fact::new("scenario", &self.scenario),
                Fact::new("started", &self.started_at),
                Fact::new("target", &self.target),
                Fact::new("namespace", &self.namespace),
                Fact::code("lock key", &self.lock_key),
                Fact::new(
                    "TTL",
                    crate::duration::format(std::time::Duration::from_millis(self.ttl_ms)),
                ),
            ],
            sections,
            tab: format!("lockwatch drill {} — {word}", self.run_id),
        }
    }

    /// The report as text, for a terminal.
    pub fn text(&self) -> String {
        self.document().text()
    }

    fn timeline(&self) -> Timeline {
        // The proxy's lane when the scenario has one or anything happened there.
        let proxied = self.scenario != "stale-holder" || self.events.iter().any(|e| e.lane == Lane::Proxy);
        let lanes: Vec<Lane> = Lane::ALL.into_iter().filter(|l| *l != Lane::Proxy || proxied).collect();
        let mut t = Timeline::of(
            "start",
            "Each moment at its time since the run started. Shaded: worker A frozen (SIGSTOP to SIGCONT), \
             a request held in the network proxy. Red: a deviation.",
            &lanes,
            &self.events,
        );
        t.at_least_to = i64::try_from(self.ttl_ms).unwrap_or(i64::MAX);
        t
    }

    /// What went wrong, first, each with what it means.
    fn deviation_box(&self) -> Option<Section> {
        let steps = self.steps.iter().filter(|s| !s.ok).map(|s| Item {
            lead: Some(format!("Step {} — {}", s.n, s.title)),
            link: Some(format!("step-{}", s.n)),
            text: format!("{}.", s.happened),
            stress: s.consequence.clone(),
        });
        let counters = self.counters.iter().filter(|c| !c.ok).map(|c| Item {
            lead: Some(c.series.clone()),
            link: Some("counters".into()),
            text: c.words(),
            stress: None,
        });
        let items: Vec<Item> = steps.chain(counters).collect();
        (!items.is_empty()).then(|| Section {
            tone: Tone::Bad,
            ..Section::new("deviations", "Deviations", vec![Block::List(items)])
        })
    }

    /// The exporter's counters: expected, moved, and (judged by the run's key) the drill's
    /// share and the rest.
    fn counted(&self) -> Section {
        if self.counters.is_empty() {
            let none = Block::Note("No --exporter given: the counters were not checked.".into());
            return Section::new("counters", "What lockwatch counted", vec![none]);
        }
        let by_key = self.counters.iter().any(|c| c.drill.is_some());
        let mut head = vec!["series".to_string(), "expected".into(), "moved".into()];
        if by_key {
            head.extend([
                "the drill's".to_string(),
                "other traffic, not attributed to the drill".into(),
            ]);
        }
        head.push(String::new());
        let opt = |v: Option<f64>| Cell::num(v.map_or("—".to_string(), |v| format!("+{v}")));
        let rows = self
            .counters
            .iter()
            .map(|c| {
                let mut cells = vec![
                    Cell::code(&c.series),
                    Cell::num(format!("+{}", c.expected)),
                    Cell::num(format!("+{}", c.moved)),
                ];
                if by_key {
                    cells.extend([opt(c.drill), opt(c.other)]);
                }
                cells.push(Cell::mark(c.ok));
                Row {
                    cells,
                    tone: Tone::ok(c.ok),
                }
            })
            .collect();
        let mut blocks = Vec::new();
        if !self.attribution.is_empty() {
            blocks.push(Block::Para(self.attribution.clone()));
        }
        blocks.push(Block::Table(Table { head, rows }));
        Section::new("counters", "What lockwatch counted", blocks)
    }

    fn alerts(&self) -> Section {
        let block = match self.alerts.is_empty() {
            true => Block::Note("None pending or firing, or no --prometheus given.".into()),
            false => Block::Table(Table::pairs(["alert", "state"], &self.alerts, true)),
        };
        Section::new("alerts", "Lock alerts in Prometheus", vec![block])
    }

    fn check_it(&self) -> Section {
        let mut blocks = vec![Block::Note(
            "The rollback deleted the run's keys: run these at the step, during an --interactive drill.".into(),
        )];
        blocks.extend(
            self.steps
                .iter()
                .filter(|s| !s.check.is_empty())
                .map(|s| Block::Commands {
                    about: format!("Step {}, {}", s.n, s.title),
                    lines: s.check.clone(),
                }),
        );
        Section::new("check", "Check it yourself", blocks)
    }
}

fn finding(s: &Step) -> Finding {
    Finding {
        kind: "step".into(),
        anchor: Some(format!("step-{}", s.n)),
        n: Some(s.n),
        title: s.title.clone(),
        code_title: false,
        tone: Tone::ok(s.ok),
        mark: if s.ok { "✓ pass" } else { "✗ FAIL" }.into(),
        at: Some(signed_secs(s.at_ms, 2)),
        facts: vec![Fact::new("happened", &s.happened), Fact::new("expected", &s.expected)],
        consequence: s.consequence.clone(),
        fix: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drill::report::{CounterCheck, Event, Judged};

    fn step(n: usize, ok: bool, title: &str) -> Step {
        Step {
            n,
            title: title.into(),
            at_ms: 100 * n as i64,
            happened: "happened".into(),
            expected: "expected".into(),
            ok,
            check: vec![format!("redis-cli GET 'drill:lock:<{n}>'")],
            consequence: (!ok).then(|| "a stale release deleted B's lock: two holders".into()),
        }
    }

    fn report() -> Report {
        let evil = "<script>alert(\"x\")</script>&'";
        let mut r = Report {
            run_id: format!("run{evil}"),
            target: evil.into(),
            namespace: evil.into(),
            scenario: "stale-holder".into(),
            lock_key: evil.into(),
            ttl_ms: 1000,
            steps: vec![step(1, true, evil), step(2, false, "A tries to release")],
            events: vec![
                Event::at(150, Lane::WorkerA, evil, false),
                Event::at(50, Lane::Redis, "x", true),
            ],
            counters: vec![CounterCheck {
                series: evil.into(),
                expected: 1.0,
                moved: 2.0,
                ok: false,
                judged_by: Judged::Key,
                drill: Some(2.0),
                other: Some(0.0),
            }],
            attribution: evil.into(),
            alerts: vec![(evil.into(), evil.into())],
            preflight: vec![(evil.into(), evil.into())],
            rollback: vec![evil.into()],
            ..Report::default()
        };
        r.finish();
        r
    }

    #[test]
    fn nothing_from_the_run_becomes_markup() {
        let html = report().document().html();
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("alert(\"x\")"));
        assert!(html.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;"));
        assert!(html.contains("redis-cli GET &#39;drill:lock:&lt;1&gt;&#39;"));
        for bad in ["http://", "https://", "src=", "@import", "url("] {
            assert!(!html.contains(bad), "{bad}");
        }
    }

    #[test]
    fn the_failing_step_is_marked_and_its_consequence_shown() {
        let html = report().document().html();
        assert!(html.contains("<li class=\"step finding\" id=\"step-1\" data-step=\"1\" data-ok=\"true\">"));
        assert!(html.contains("<li class=\"step finding deviation\" id=\"step-2\" data-step=\"2\" data-ok=\"false\">"));
        assert!(html.contains("a stale release deleted B&#39;s lock: two holders"));
        assert!(html.contains("class=\"verdict failed\""));
        let list = html.split("The timeline as a list").nth(1).unwrap_or("");
        assert!(
            list.find("data-at=\"50\"") < list.find("data-at=\"150\""),
            "list in time order"
        );
    }

    #[test]
    fn counters_judged_by_the_namespace_say_nothing_of_the_drills_share() {
        let mut r = report();
        for c in &mut r.counters {
            (c.drill, c.other, c.judged_by) = (None, None, Judged::Namespace);
        }
        let doc = r.document();
        assert!(!doc.text().contains("the drill's"), "{}", doc.text());
        assert!(
            report()
                .document()
                .markdown()
                .contains("other traffic, not attributed to the drill")
        );
    }
}
