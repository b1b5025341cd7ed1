//! The freeze drill's report as one self-contained HTML page: inline CSS (light and dark),
//! the verdict, each lock with its consequence and fix, the timeline drawn as inline SVG
//! (one lane per actor, the freeze shaded) and listed, no script and nothing loaded from
//! anywhere. Every string of the run is escaped.

use std::fmt::Write as _;

use super::report::{Actor, FreezeReport, headline};
use crate::markup::esc;

const STYLE: &str = r#"
:root{color-scheme:light dark;--bg:#fff;--fg:#1f2328;--muted:#59636e;--line:#d1d9e0;--ok:#1a7f37;--bad:#cf222e;--frozen:#b6e3ff}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--muted:#9198a1;--line:#3d444d;--ok:#3fb950;--bad:#f85149;--frozen:#1d4b7a}}
body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.5 system-ui,sans-serif}
main{max-width:1100px;margin:0 auto;padding:16px}h1{font-size:1.5rem}h2{font-size:1.1rem;border-bottom:1px solid var(--line)}
.verdict{display:inline-block;padding:.1em .6em;border-radius:1em;color:#fff;font-weight:600}
.safe{background:var(--ok)}.unsafe,.interrupted{background:var(--bad)}.not_exercised{background:var(--muted)}
.lock{border:1px solid var(--line);border-left:5px solid var(--muted);border-radius:6px;padding:.4em .8em;margin:.6em 0}
.lock.safe{border-left-color:var(--ok);background:none}.lock.unsafe{border-left-color:var(--bad);background:none}
.lock dl{display:grid;grid-template-columns:max-content 1fr;gap:.1em .8em}.lock dt{color:var(--muted)}.lock dd{margin:0;overflow-wrap:anywhere}
.scroll{overflow-x:auto}svg{display:block;min-width:760px;width:100%;height:auto;font-size:12px}
svg text{fill:var(--fg)}svg .frozen{fill:var(--frozen)}svg .ok{fill:var(--ok)}svg .bad{fill:var(--bad)}svg .grid{stroke:var(--line)}
table{border-collapse:collapse;width:100%}td,th{text-align:left;padding:.2em .5em;border-bottom:1px solid var(--line)}
td.bad{color:var(--bad);font-weight:600}.muted{color:var(--muted)}
"#;

const ACTORS: [Actor; 5] = [
    Actor::Drill,
    Actor::Worker,
    Actor::NewOwner,
    Actor::Redis,
    Actor::Lockwatch,
];

impl FreezeReport {
    pub fn html(&self) -> String {
        let mut o = String::new();
        let class = if self.interrupted {
            "interrupted"
        } else {
            self.verdict.as_str()
        };
        let _ = write!(
            o,
            "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width,initial-scale=1\"><title>lockwatch freeze drill: {v}</title><style>{STYLE}</style></head><body><main>\
             <h1>Freeze drill <span class=\"verdict {class}\">{v}</span></h1><p>{result}</p>\
             <p class=\"muted\">Froze <code>{frozen}</code> — {what} — by {method} for {hold:.1} s (measured; --for {asked:.1} s), watched {obs:.1} s after the thaw. Target {target}, namespace <code>{ns}</code>, started {started}. {held} lock(s) held at the freeze, {mine} the frozen worker's.</p>",
            v = esc(headline(self.verdict, self.interrupted)),
            result = esc(&self.result),
            frozen = esc(&self.frozen),
            what = esc(&self.what),
            method = esc(&self.method),
            hold = self.frozen_ms() as f64 / 1000.0,
            asked = self.for_ms as f64 / 1000.0,
            obs = self.observe_ms as f64 / 1000.0,
            target = esc(&self.target),
            ns = esc(&self.namespace),
            started = esc(&self.started_at),
            held = self.held_at_freeze,
            mine = self.locks.len(),
        );
        for l in &self.locks {
            let _ = write!(
                o,
                "<section class=\"lock {c}\"><h2><code>{k}</code>: {w}</h2><dl><dt>attributed</dt><dd>{a}</dd>",
                c = l.verdict.as_str(),
                k = esc(&l.key),
                w = esc(l.finding.words()),
                a = esc(&l.attributed_by)
            );
            let mut row = |dt: &str, dd: &str| {
                let _ = write!(o, "<dt>{}</dt><dd>{}</dd>", esc(dt), esc(dd));
            };
            if let Some(h) = &l.deleted_how {
                row("deletion", h);
            }
            if let Some(words) = l.exposure_words() {
                row("exposure", &words);
            }
            if !l.refusals.is_empty() {
                row("the worker's refusals", &l.refusal_words());
            }
            if !l.not_credited.is_empty() {
                row("not credited to it", &l.not_credited_words());
            }
            for n in &l.notes {
                row("note", n);
            }
            row("consequence", &l.consequence);
            row("fix", l.fix);
            o.push_str("</dl></section>");
        }
        if !self.timeline.is_empty() {
            o.push_str("<h2>Timeline</h2><div class=\"scroll\">");
            self.svg(&mut o);
            o.push_str("</div><table><tr><th>from the freeze</th><th>who</th><th>what</th></tr>");
            for m in &self.timeline {
                let _ = write!(
                    o,
                    "<tr><td>{:+.1} s{}</td><td>{}</td><td{}>{}</td></tr>",
                    m.at_ms as f64 / 1000.0,
                    m.until_ms
                        .map_or_else(String::new, |u| format!(" to {:+.1} s", u as f64 / 1000.0)),
                    m.actor.name(),
                    if m.ok { "" } else { " class=\"bad\"" },
                    esc(&m.what)
                );
            }
            o.push_str("</table>");
        }
        let _ = write!(o, "<h2>Witness</h2><p>{}</p>", esc(&self.witness_words()));
        for (alert, state) in &self.alerts {
            let _ = write!(o, "<p>Alert <code>{}</code>: {}</p>", esc(alert), esc(state));
        }
        for n in &self.notes {
            let _ = write!(o, "<p class=\"muted\">{}</p>", esc(n));
        }
        o.push_str("</main></body></html>\n");
        o
    }

    /// One lane per actor, the freeze shaded, each moment a dot at its time.
    fn svg(&self, o: &mut String) {
        let (Some(first), Some(last)) = (self.timeline.first(), self.timeline.last()) else {
            return;
        };
        let (lo, hi) = (first.at_ms.min(0), last.at_ms.max(1));
        let (left, width, lane) = (130.0, 900.0, 34.0);
        let x = |ms: i64| left + (ms - lo) as f64 / (hi - lo).max(1) as f64 * (width - 20.0);
        let height = lane * ACTORS.len() as f64 + 24.0;
        let _ = write!(
            o,
            "<svg viewBox=\"0 0 {w} {height}\" role=\"img\" aria-label=\"timeline\"><rect class=\"frozen\" x=\"{fx:.1}\" y=\"0\" width=\"{fw:.1}\" height=\"{fh:.1}\" opacity=\".6\"/>",
            w = left + width,
            fx = x(0),
            fw = x(self.frozen_ms() as i64) - x(0),
            fh = lane * ACTORS.len() as f64,
        );
        for (i, a) in ACTORS.iter().enumerate() {
            let y = lane * i as f64 + lane / 2.0;
            let _ = write!(
                o,
                "<text x=\"4\" y=\"{ty:.1}\">{n}</text><line class=\"grid\" x1=\"{left}\" x2=\"{r}\" y1=\"{y:.1}\" y2=\"{y:.1}\"/>",
                ty = y + 4.0,
                n = a.name(),
                r = left + width,
            );
            for m in self.timeline.iter().filter(|m| m.actor == *a) {
                if let Some(until) = m.until_ms {
                    let _ = write!(
                        o,
                        "<rect class=\"{c}\" x=\"{x0:.1}\" y=\"{y0:.1}\" width=\"{w:.1}\" height=\"8\" rx=\"3\"><title>{t:+.1} s to {u:+.1} s {what}</title></rect>",
                        c = if m.ok { "ok" } else { "bad" },
                        x0 = x(m.at_ms),
                        y0 = y - 4.0,
                        w = (x(until) - x(m.at_ms)).max(2.0),
                        t = m.at_ms as f64 / 1000.0,
                        u = until as f64 / 1000.0,
                        what = esc(&m.what)
                    );
                    continue;
                }
                let _ = write!(
                    o,
                    "<circle class=\"{c}\" cx=\"{cx:.1}\" cy=\"{y:.1}\" r=\"5\"><title>{t:+.1} s {what}</title></circle>",
                    c = if m.ok { "ok" } else { "bad" },
                    cx = x(m.at_ms),
                    t = m.at_ms as f64 / 1000.0,
                    what = esc(&m.what)
                );
            }
        }
        let _ = write!(
            o,
            "<text x=\"{x0:.1}\" y=\"{ty:.1}\">freeze</text><text x=\"{x1:.1}\" y=\"{ty:.1}\">thaw</text></svg>",
            x0 = x(0),
            x1 = x(self.frozen_ms() as i64),
            ty = height - 6.0
        );
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
        let page = r.html();
        assert!(!page.contains("<script"), "unescaped");
        assert!(page.contains("lock:&lt;script&gt;"));
        assert!(!page.contains("http://") && !page.contains("https://") && !page.contains(" src="));
        assert!(page.contains("<svg") && page.contains("unsafe: deleted the new owner"));
        // The moments in time order, from before the freeze (the last renewal) to the end.
        let at: Vec<i64> = r.timeline.iter().map(|m| m.at_ms).collect();
        assert!(at.windows(2).all(|p| p[0] <= p[1]) && at[0] < 0, "{at:?}");
        assert!(r.text().contains("UNSAFE") && r.markdown().contains("# Freeze drill: UNSAFE"));
    }
}
