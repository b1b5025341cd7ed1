//! A document as markdown, the record teams keep beside an incident: the title and
//! verdict as the heading, the facts as a list, each section under its heading, tables as
//! tables (`|` escaped), findings as sub-headings with their facts.

use std::fmt::Write as _;

use super::{Document, Fact, Finding, Format, Item, Section, Table, Timeline, timeline};

impl Document {
    pub fn markdown(&self) -> String {
        self.render(Markdown(String::new())).0
    }
}

struct Markdown(String);

/// `s` safe in a table cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// A fact's value, an identifier in backticks.
fn value(f: &Fact) -> String {
    match f.code {
        true => format!("`{}`", f.value),
        false => f.value.clone(),
    }
}

impl Format for Markdown {
    fn head(&mut self, d: &Document) {
        let _ = writeln!(self.0, "# {}: {}\n\n**{}**\n", d.title, d.badge.word, d.lead);
        self.facts(&d.facts);
    }

    fn section(&mut self, s: &Section) {
        let _ = writeln!(self.0, "## {}\n", s.title);
    }

    fn para(&mut self, p: &str) {
        let _ = writeln!(self.0, "{p}\n");
    }

    /// A paragraph in italics.
    fn note(&mut self, p: &str) {
        self.para(&format!("_{p}_"));
    }

    fn facts(&mut self, facts: &[Fact]) {
        for f in facts {
            let _ = writeln!(self.0, "- **{}:** {}", f.label, value(f));
        }
        self.0.push('\n');
    }

    fn list(&mut self, items: &[Item]) {
        for i in items {
            let lead = i.lead.as_ref().map(|l| format!("**{l}**: ")).unwrap_or_default();
            let stress = i.stress.as_ref().map(|s| format!(" **{s}**")).unwrap_or_default();
            let _ = writeln!(self.0, "- {lead}{}{stress}", i.text);
        }
        self.0.push('\n');
    }

    fn table(&mut self, t: &Table) {
        let head: Vec<String> = t.head.iter().map(|h| cell(h)).collect();
        let rule: Vec<&str> = t.head.iter().map(|_| "---").collect();
        let _ = writeln!(self.0, "| {} |\n|{}|", head.join(" | "), rule.join("|"));
        for r in &t.rows {
            let cells: Vec<String> = r
                .cells
                .iter()
                .map(|c| match c.code {
                    true => format!("`{}`", cell(&c.text)),
                    false => cell(&c.text),
                })
                .collect();
            let _ = writeln!(self.0, "| {} |", cells.join(" | "));
        }
        self.0.push('\n');
    }

    fn findings(&mut self, list: &[Finding]) {
        for f in list {
            let n = f.n.map(|n| format!("{n}. ")).unwrap_or_default();
            let title = match f.code_title {
                true => format!("`{}`", f.title),
                false => f.title.clone(),
            };
            let at = f.at.as_ref().map(|a| format!(" ({a})")).unwrap_or_default();
            let _ = writeln!(self.0, "### {} {n}{title}{at}\n", f.mark);
            for fact in &f.facts {
                let _ = writeln!(self.0, "- {}: {}", fact.label, value(fact));
            }
            if let Some(c) = &f.consequence {
                let _ = writeln!(self.0, "- **Consequence**: {c}");
            }
            if let Some(fix) = &f.fix {
                let _ = writeln!(self.0, "- **Fix**: {fix}");
            }
            self.0.push('\n');
        }
    }

    /// A table of moments; a deviation marked `✗ deviation`.
    fn timeline(&mut self, t: &Timeline) {
        let stepped = t.stepped();
        let _ = writeln!(
            self.0,
            "| from the {} | who |{} what | |\n|---:|---|{}---|---|",
            t.origin,
            if stepped { " step |" } else { "" },
            if stepped { "---|" } else { "" }
        );
        for m in &t.moments {
            let until = m
                .until_ms
                .map(|u| format!(" (until {})", timeline::at(u, &t.origin)))
                .unwrap_or_default();
            let step = match stepped {
                true => format!(" {} |", m.step.map(|n| n.to_string()).unwrap_or_default()),
                false => String::new(),
            };
            let _ = writeln!(
                self.0,
                "| {} | {} |{step} {}{until} | {} |",
                timeline::at(m.at_ms, &t.origin),
                t.lane_name(m),
                cell(&m.what),
                if m.ok { "" } else { "✗ deviation" }
            );
        }
        self.0.push('\n');
    }

    fn commands(&mut self, about: &str, lines: &[String]) {
        let _ = writeln!(self.0, "{about}:\n\n```sh\n{}\n```\n", lines.join("\n"));
    }
}
