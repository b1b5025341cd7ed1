//! The drill report as one self-contained HTML page (`Report::html`): inline CSS with a
//! light and a dark scheme, the swimlane timeline as inline SVG (`timeline`), no script,
//! font, image or any other resource from anywhere. Every string of the run is escaped.

use std::fmt::Write as _;

use super::report::{Report, Step};
use super::timeline;
use crate::markup::esc;

const STYLE: &str = r#"
:root{color-scheme:light dark;--bg:#fff;--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--band:#f6f8fa;
--ok:#1a7f37;--bad:#cf222e;--bad-bg:#ffebe9;--frozen:#b6e3ff;--held:#ffd8b5;--code:#f6f8fa}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--muted:#9198a1;--line:#3d444d;
--band:#151b23;--ok:#3fb950;--bad:#f85149;--bad-bg:#3c1618;--frozen:#1d4b7a;--held:#6b3b12;--code:#151b23}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
main{max-width:1120px;margin:0 auto;padding:16px}
h1{font-size:1.5rem;margin:.2em 0}h2{font-size:1.15rem;margin:1.6em 0 .5em;border-bottom:1px solid var(--line);padding-bottom:.2em}
.verdict{display:inline-block;padding:.1em .6em;border-radius:1em;font-weight:600;color:#fff;background:#1a7f37}
.verdict.failed,.verdict.interrupted{background:#cf222e}a{color:inherit}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:.2em 1em;margin:.8em 0}
dl.facts dt{color:var(--muted)}dl.facts dd{margin:0;overflow-wrap:anywhere}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.88em}
pre{background:var(--code);border:1px solid var(--line);border-radius:6px;padding:.5em .7em;overflow-x:auto;margin:.3em 0}
.scroll{overflow-x:auto;border:1px solid var(--line);border-radius:6px}
svg.timeline{display:block;width:100%;min-width:880px;height:auto;font-size:12px}
svg .band{fill:var(--bg)}svg .lane:nth-of-type(even) .band{fill:var(--band)}
svg text{fill:var(--fg)}svg .tick,svg .none{fill:var(--muted)}svg .lane-name{font-weight:600}
svg .grid{stroke:var(--line);stroke-width:1}
svg .period{fill:var(--frozen);opacity:.8}svg [data-lane=proxy] .period{fill:var(--held)}
svg .event circle{fill:var(--ok);stroke:var(--bg);stroke-width:1.5}
svg .event.deviation circle{fill:var(--bad)}svg .event.deviation text{fill:var(--bad);font-weight:700}
.deviations{background:var(--bad-bg);border:1px solid var(--bad);border-radius:6px;padding:.4em 1em;margin:1em 0}
.deviations li{margin:.3em 0}.deviations h2{margin-top:.3em}h3.close-up{font-size:1rem;margin:1em 0 .4em}
ol.steps{list-style:none;padding:0;margin:0}
.step{border:1px solid var(--line);border-left:5px solid var(--ok);border-radius:6px;padding:.5em .8em;margin:.5em 0}
.step.deviation{border-left-color:var(--bad);background:var(--bad-bg)}
.step h3{font-size:1rem;margin:0;display:flex;gap:.5em;flex-wrap:wrap}
.step .at{color:var(--muted);font-weight:400;margin-left:auto}
.step dl{display:grid;grid-template-columns:max-content 1fr;gap:.1em .8em;margin:.3em 0}
.step dt{color:var(--muted)}.step dd{margin:0;overflow-wrap:anywhere}
.mark{font-weight:700;color:var(--ok)}.deviation .mark,td.bad{color:var(--bad);font-weight:700}td.ok{color:var(--ok)}
.consequence{color:var(--bad);font-weight:600;margin:.3em 0}
table{border-collapse:collapse;width:100%}th,td{text-align:left;padding:.25em .5em;border-bottom:1px solid var(--line);vertical-align:top}
td code{overflow-wrap:anywhere}.num{width:1%;white-space:nowrap}#counters table{min-width:760px}
.muted,footer{color:var(--muted)}footer{margin-top:2em;font-size:.85em}
@media (max-width:600px){main{padding:10px}.step dl{grid-template-columns:1fr}.step dd{margin-bottom:.3em}}
"#;

impl Report {
    /// The report as one self-contained HTML page.
    pub fn html(&self) -> String {
        let mut o = String::new();
        let (verdict, class) = if self.interrupted {
            ("interrupted", "interrupted")
        } else if self.passed() {
            ("passed", "passed")
        } else {
            ("FAILED", "failed")
        };
        let _ = write!(
            o,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
             <title>lockwatch drill {} — {verdict}</title><style>{STYLE}</style></head><body><main>",
            esc(&self.run_id)
        );
        self.header(&mut o, verdict, class);
        self.deviations_box(&mut o);
        let _ = write!(
            o,
            "<section id=\"timeline\"><h2>Timeline</h2><p class=\"muted\">Each moment at its time since \
             the run started. Shaded: worker A frozen (SIGSTOP to SIGCONT), a request held in the \
             network proxy. Red: a deviation.</p><div class=\"scroll\">{}</div>",
            timeline::svg(self, timeline::whole(self), "whole")
        );
        if let Some(w) = timeline::burst(self) {
            let _ = write!(
                o,
                "<h3 class=\"close-up\">Close-up, +{:.3} s to +{:.3} s</h3><div class=\"scroll\">{}</div>",
                w.from as f64 / 1000.0,
                w.to as f64 / 1000.0,
                timeline::svg(self, w, "burst")
            );
        }
        self.event_list(&mut o);
        o.push_str("</section>");
        self.steps(&mut o);
        self.checks(&mut o);
        self.preflight_and_commands(&mut o);
        let _ = writeln!(
            o,
            "<footer>lockwatch {} drill report: one file, no script and nothing loaded from anywhere.</footer>\
             </main></body></html>",
            env!("CARGO_PKG_VERSION")
        );
        o
    }

    fn header(&self, o: &mut String, verdict: &str, class: &str) {
        let _ = write!(
            o,
            "<header><h1>Drill: {} <span class=\"verdict {class}\" id=\"verdict\">{verdict}</span></h1>\
             <dl class=\"facts\"><dt>Run</dt><dd><code>{}</code></dd><dt>Scenario</dt><dd>{}</dd>\
             <dt>Started</dt><dd>{}</dd><dt>Target</dt><dd>{}</dd><dt>Namespace</dt><dd>{}</dd>\
             <dt>Lock key</dt><dd><code>{}</code></dd><dt>TTL</dt><dd>{}</dd><dt>Result</dt><dd>{}</dd></dl></header>",
            esc(&self.scenario.replace('-', " ")),
            esc(&self.run_id),
            esc(&self.scenario),
            esc(&self.started_at),
            esc(&self.target),
            esc(&self.namespace),
            esc(&self.lock_key),
            crate::duration::format(std::time::Duration::from_millis(self.ttl_ms)),
            esc(&self.result)
        );
    }

    /// The deviations first, each with what it means.
    fn deviations_box(&self, o: &mut String) {
        let steps: Vec<&Step> = self.steps.iter().filter(|s| !s.ok).collect();
        let counters: Vec<_> = self.counters.iter().filter(|c| !c.ok).collect();
        if steps.is_empty() && counters.is_empty() {
            return;
        }
        o.push_str("<section class=\"deviations\" id=\"deviations\"><h2>Deviations</h2><ul>");
        for s in steps {
            let _ = write!(
                o,
                "<li><a href=\"#step-{}\">Step {} — {}</a>: {}. <strong>{}</strong></li>",
                s.n,
                s.n,
                esc(&s.title),
                esc(&s.happened),
                esc(s.consequence.as_deref().unwrap_or(""))
            );
        }
        for c in counters {
            let _ = write!(
                o,
                "<li><code>{}</code> {} where {} was expected</li>",
                esc(&c.series),
                match c.drill {
                    Some(d) => format!("moved by {d} for the run's key"),
                    None => format!("moved by {}", c.moved),
                },
                c.expected
            );
        }
        o.push_str("</ul></section>");
    }

    /// The timeline as a list, for reading on a small screen or by a screen reader.
    fn event_list(&self, o: &mut String) {
        o.push_str(
            "<details><summary>The timeline as a list</summary><table><thead><tr><th>at</th><th>lane</th>\
             <th>step</th><th>what</th></tr></thead><tbody>",
        );
        for e in timeline::in_order(self) {
            let _ = write!(
                o,
                "<tr data-at=\"{}\"><td>+{:.3} s</td><td>{}</td><td>{}</td><td class=\"{}\">{}</td></tr>",
                e.at_ms,
                e.at_ms as f64 / 1000.0,
                e.lane.name(),
                e.step.map(|n| n.to_string()).unwrap_or_default(),
                if e.ok { "ok" } else { "bad" },
                esc(&e.what)
            );
        }
        o.push_str("</tbody></table></details>");
    }

    fn steps(&self, o: &mut String) {
        o.push_str("<section id=\"steps\"><h2>Steps</h2><ol class=\"steps\">");
        for s in &self.steps {
            let _ = write!(
                o,
                "<li class=\"step{}\" id=\"step-{}\" data-step=\"{}\" data-ok=\"{}\">\
                 <h3><span class=\"mark\">{}</span><span>{}. {}</span><span class=\"at\">+{:.2} s</span></h3>\
                 <dl><dt>happened</dt><dd>{}</dd><dt>expected</dt><dd>{}</dd></dl>",
                if s.ok { "" } else { " deviation" },
                s.n,
                s.n,
                s.ok,
                if s.ok { "✓ pass" } else { "✗ FAIL" },
                s.n,
                esc(&s.title),
                s.at_ms as f64 / 1000.0,
                esc(&s.happened),
                esc(&s.expected)
            );
            if let Some(c) = &s.consequence {
                let _ = write!(o, "<p class=\"consequence\">Consequence: {}</p>", esc(c));
            }
            o.push_str("</li>");
        }
        o.push_str("</ol></section>");
    }

    /// The exporter's counters, Prometheus' alerts and the sustained cycles.
    fn checks(&self, o: &mut String) {
        o.push_str("<section id=\"counters\"><h2>What lockwatch counted</h2>");
        if self.counters.is_empty() {
            o.push_str("<p class=\"muted\">No <code>--exporter</code> given: the counters were not checked.</p>");
        } else {
            let _ = write!(
                o,
                "<p id=\"attribution\">{}</p><div class=\"scroll\"><table><thead><tr><th>series</th><th class=\"num\">expected</th>\
                 <th class=\"num\">moved</th><th>the drill's</th>\
                 <th title=\"other traffic in the namespace, not attributed to the drill\">other traffic</th><th class=\"num\"></th></tr></thead><tbody>",
                esc(&self.attribution)
            );
            let opt = |v: Option<f64>| v.map_or("—".to_string(), |v| format!("+{v}"));
            for c in &self.counters {
                let _ = write!(
                    o,
                    "<tr data-ok=\"{}\"><td><code>{}</code></td><td class=\"num\">+{}</td><td class=\"num\">+{}</td>\
                     <td class=\"num\" data-drill>{}</td><td class=\"num\" data-other>{}</td><td class=\"num {}\">{}</td></tr>",
                    c.ok,
                    esc(&c.series),
                    c.expected,
                    c.moved,
                    opt(c.drill),
                    opt(c.other),
                    if c.ok { "ok" } else { "bad" },
                    if c.ok { "✓" } else { "✗" }
                );
            }
            o.push_str("</tbody></table></div>");
        }
        o.push_str("</section><section id=\"alerts\"><h2>Lock alerts in Prometheus</h2>");
        if self.alerts.is_empty() {
            o.push_str("<p class=\"muted\">None pending or firing, or no <code>--prometheus</code> given.</p>");
        } else {
            o.push_str("<table><thead><tr><th>alert</th><th>state</th></tr></thead><tbody>");
            for (a, st) in &self.alerts {
                let _ = write!(o, "<tr><td>{}</td><td>{}</td></tr>", esc(a), esc(st));
            }
            o.push_str("</tbody></table>");
        }
        o.push_str("</section>");
        if let Some(c) = &self.cycles {
            let after = |s: Option<f64>| s.map_or("—".into(), |s| format!("{s:.0} s"));
            let _ = write!(
                o,
                "<section id=\"sustained\"><h2>Sustained run</h2><p>{} {} cycles in {:.0} s; \
                 alert pending after {}, firing after {}.</p></section>",
                c.cycles,
                esc(&self.scenario),
                c.seconds,
                after(c.pending_after_s),
                after(c.firing_after_s)
            );
        }
    }

    /// Pre-flight, the commands to check it yourself, and the rollback.
    fn preflight_and_commands(&self, o: &mut String) {
        o.push_str(
            "<section id=\"check\"><h2>Check it yourself</h2><p class=\"muted\">The rollback deleted \
             the run's keys: run these at the step, during an <code>--interactive</code> drill.</p>",
        );
        for s in self.steps.iter().filter(|s| !s.check.is_empty()) {
            let cmds: Vec<String> = s.check.iter().map(|c| esc(c)).collect();
            let _ = write!(
                o,
                "<p>Step {}, {}:</p><pre><code>{}</code></pre>",
                s.n,
                esc(&s.title),
                cmds.join("\n")
            );
        }
        o.push_str("</section><section id=\"rollback\"><h2>Rollback</h2><ul>");
        for r in &self.rollback {
            let _ = write!(o, "<li>{}</li>", esc(r));
        }
        o.push_str("</ul></section><section id=\"preflight\"><h2>Pre-flight</h2><table><tbody>");
        for (k, v) in &self.preflight {
            let _ = write!(o, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v));
        }
        o.push_str("</tbody></table></section>");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drill::report::{CounterCheck, Event, Judged, Lane};

    fn step(n: usize, ok: bool, title: &str) -> Step {
        Step {
            n,
            title: title.into(),
            at_ms: 100 * n as u64,
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
        let html = report().html();
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
        let html = report().html();
        assert!(html.contains("<li class=\"step\" id=\"step-1\" data-step=\"1\" data-ok=\"true\">"));
        assert!(html.contains("<li class=\"step deviation\" id=\"step-2\" data-step=\"2\" data-ok=\"false\">"));
        assert!(html.contains("a stale release deleted B&#39;s lock: two holders"));
        assert!(html.contains("class=\"verdict failed\""));
        let list = html.split("<tbody>").nth(1).unwrap_or("");
        assert!(
            list.find("data-at=\"50\"") < list.find("data-at=\"150\""),
            "list in time order"
        );
    }
}
