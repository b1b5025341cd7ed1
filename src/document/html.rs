//! A document as one self-contained HTML page: the one page shell and the one stylesheet
//! (light and dark, shared with the exporter's pages), the swimlane inline, no script,
//! font, image or any other resource from anywhere; every string escaped.

use std::fmt::Write as _;

use super::{Cell, Document, Fact, Finding, Format, Item, Section, Table, Timeline, Tone, esc, swimlane, timeline};

/// The stylesheet of every page lockwatch draws: the reports (`body.doc`), the status and
/// key pages (`body.status`), and the swimlane they share.
pub const STYLE: &str = include_str!("style.css");

impl Document {
    /// The document as one self-contained HTML page.
    pub fn html(&self) -> String {
        self.render(Html(String::with_capacity(64 * 1024))).0
    }
}

struct Html(String);

impl Html {
    fn dl(&mut self, facts: &[Fact]) {
        if facts.is_empty() {
            return;
        }
        self.0.push_str("<dl class=\"facts\">");
        for f in facts {
            let value = match f.code {
                true => format!("<code>{}</code>", esc(&f.value)),
                false => esc(&f.value),
            };
            let _ = write!(self.0, "<dt>{}</dt><dd>{value}</dd>", esc(&f.label));
        }
        self.0.push_str("</dl>");
    }

    fn td(&mut self, c: &Cell) {
        let mut class: Vec<&str> = Vec::new();
        if c.num {
            class.push("num");
        }
        match c.tone {
            Tone::Good => class.push("ok"),
            Tone::Bad => class.push("bad"),
            Tone::Neutral => {}
        }
        let class = match class.is_empty() {
            true => String::new(),
            false => format!(" class=\"{}\"", class.join(" ")),
        };
        let text = match c.code {
            true => format!("<code>{}</code>", esc(&c.text)),
            false => esc(&c.text),
        };
        let _ = write!(self.0, "<td{class}>{text}</td>");
    }

    fn finding(&mut self, f: &Finding) {
        let tone = match f.tone {
            Tone::Good => "",
            Tone::Bad => " deviation",
            Tone::Neutral => " neutral",
        };
        let o = &mut self.0;
        let _ = write!(o, "<li class=\"{} finding{tone}\"", esc(&f.kind));
        if let Some(a) = &f.anchor {
            let _ = write!(o, " id=\"{}\"", esc(a));
        }
        if let Some(n) = f.n {
            let _ = write!(o, " data-step=\"{n}\"");
        }
        if let Some(ok) = f.tone.data_ok() {
            let _ = write!(o, " data-ok=\"{ok}\"");
        }
        let title = match f.code_title {
            true => format!("<code>{}</code>", esc(&f.title)),
            false => esc(&f.title),
        };
        let _ = write!(
            o,
            "><h3><span class=\"mark\">{}</span><span>{}{title}</span>",
            esc(&f.mark),
            f.n.map(|n| format!("{n}. ")).unwrap_or_default(),
        );
        if let Some(at) = &f.at {
            let _ = write!(o, "<span class=\"at\">{}</span>", esc(at));
        }
        o.push_str("</h3>");
        self.dl(&f.facts);
        if let Some(c) = &f.consequence {
            let _ = write!(self.0, "<p class=\"consequence\">Consequence: {}</p>", esc(c));
        }
        if let Some(fix) = &f.fix {
            let _ = write!(self.0, "<p class=\"fix\">Fix: {}</p>", esc(fix));
        }
        self.0.push_str("</li>");
    }
}

impl Format for Html {
    fn head(&mut self, d: &Document) {
        let _ = write!(
            self.0,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
             <title>{}</title><style>{STYLE}</style></head><body class=\"doc\"><main>\
             <header><h1>{} <span class=\"verdict {}\" id=\"verdict\">{}</span></h1><p class=\"lead\" id=\"result\">{}</p>",
            esc(&d.tab),
            esc(&d.title),
            esc(&d.badge.class),
            esc(&d.badge.word),
            esc(&d.lead),
        );
        self.dl(&d.facts);
        self.0.push_str("</header>");
    }

    fn section(&mut self, s: &Section) {
        let _ = write!(
            self.0,
            "<section id=\"{}\"{}><h2>{}</h2>",
            esc(&s.id),
            if s.tone == Tone::Bad {
                " class=\"deviations\""
            } else {
                ""
            },
            esc(&s.title)
        );
    }

    fn section_end(&mut self, _s: &Section) {
        self.0.push_str("</section>");
    }

    fn para(&mut self, p: &str) {
        let _ = write!(self.0, "<p>{}</p>", esc(p));
    }

    fn note(&mut self, p: &str) {
        let _ = write!(self.0, "<p class=\"muted\">{}</p>", esc(p));
    }

    fn facts(&mut self, f: &[Fact]) {
        self.dl(f);
    }

    fn list(&mut self, items: &[Item]) {
        let o = &mut self.0;
        o.push_str("<ul>");
        for i in items {
            o.push_str("<li>");
            match (&i.lead, &i.link) {
                (Some(lead), Some(link)) => {
                    let _ = write!(o, "<a href=\"#{}\">{}</a>: ", esc(link), esc(lead));
                }
                (Some(lead), None) => {
                    let _ = write!(o, "<strong>{}</strong>: ", esc(lead));
                }
                _ => {}
            }
            let _ = write!(o, "{}", esc(&i.text));
            if let Some(s) = &i.stress {
                let _ = write!(o, " <strong>{}</strong>", esc(s));
            }
            o.push_str("</li>");
        }
        o.push_str("</ul>");
    }

    fn table(&mut self, t: &Table) {
        self.0.push_str("<div class=\"scroll\"><table><thead><tr>");
        for h in &t.head {
            let _ = write!(self.0, "<th>{}</th>", esc(h));
        }
        self.0.push_str("</tr></thead><tbody>");
        for r in &t.rows {
            match r.tone.data_ok() {
                Some(ok) => {
                    let _ = write!(self.0, "<tr data-ok=\"{ok}\">");
                }
                None => self.0.push_str("<tr>"),
            }
            for c in &r.cells {
                self.td(c);
            }
            self.0.push_str("</tr>");
        }
        self.0.push_str("</tbody></table></div>");
    }

    fn findings(&mut self, list: &[Finding]) {
        self.0.push_str("<ol class=\"findings\">");
        for f in list {
            self.finding(f);
        }
        self.0.push_str("</ol>");
    }

    /// The swimlane of the whole, a close-up of a burst when there is one, and the moments
    /// as a list for a small screen or a screen reader.
    fn timeline(&mut self, t: &Timeline) {
        let o = &mut self.0;
        if !t.about.is_empty() {
            let _ = write!(o, "<p class=\"muted\">{}</p>", esc(&t.about));
        }
        let _ = write!(
            o,
            "<div class=\"scroll\">{}</div>",
            swimlane::svg(t, t.whole(), "whole")
        );
        if let Some(w) = t.burst() {
            let _ = write!(
                o,
                "<h3 class=\"close-up\">Close-up, {} to {}</h3><div class=\"scroll\">{}</div>",
                esc(&timeline::at(w.from, &t.origin)),
                esc(&timeline::at(w.to, &t.origin)),
                swimlane::svg(t, w, "burst")
            );
        }
        moment_list(o, t);
    }

    fn commands(&mut self, about: &str, lines: &[String]) {
        let cmds: Vec<String> = lines.iter().map(|c| esc(c)).collect();
        let _ = write!(
            self.0,
            "<p>{}:</p><pre><code>{}</code></pre>",
            esc(about),
            cmds.join("\n")
        );
    }

    fn foot(&mut self, _d: &Document) {
        let _ = writeln!(
            self.0,
            "<footer>lockwatch {}: one file, no script and nothing loaded from anywhere.</footer></main></body></html>",
            env!("CARGO_PKG_VERSION")
        );
    }
}

fn moment_list(o: &mut String, t: &Timeline) {
    let stepped = t.stepped();
    let _ = write!(
        o,
        "<details><summary>The timeline as a list</summary><div class=\"scroll\"><table><thead><tr><th>at</th><th>who</th>\
         {}<th>what</th></tr></thead><tbody>",
        if stepped { "<th>step</th>" } else { "" }
    );
    for m in &t.moments {
        let step = match stepped {
            true => format!("<td>{}</td>", m.step.map(|n| n.to_string()).unwrap_or_default()),
            false => String::new(),
        };
        let _ = write!(
            o,
            "<tr data-at=\"{}\"><td class=\"num\">{}{}</td><td>{}</td>{step}<td class=\"{}\">{}</td></tr>",
            m.at_ms,
            esc(&timeline::at(m.at_ms, &t.origin)),
            m.until_ms
                .map(|u| format!(" to {}", esc(&timeline::at(u, &t.origin))))
                .unwrap_or_default(),
            esc(t.lane_name(m)),
            if m.ok { "ok" } else { "bad" },
            esc(&m.what)
        );
    }
    o.push_str("</tbody></table></div></details>");
}
