//! A document as plain text for a terminal or a log: the title and verdict, the lead, the
//! facts as `label: value` lines, then each section under its title, tables in aligned
//! columns and the timeline as a list of moments.

use std::fmt::Write as _;

use super::{Document, Fact, Finding, Format, Item, Section, Table, Timeline, timeline};

impl Document {
    pub fn text(&self) -> String {
        self.render(Text(String::new())).0
    }
}

struct Text(String);

impl Text {
    fn lines(&mut self, facts: &[Fact], indent: &str) {
        for f in facts {
            let _ = writeln!(self.0, "{indent}{}: {}", f.label, f.value);
        }
    }
}

impl Format for Text {
    fn head(&mut self, d: &Document) {
        let _ = writeln!(self.0, "{}: {}\n{}", d.title, d.badge.word, d.lead);
        self.lines(&d.facts, "  ");
    }

    fn section(&mut self, s: &Section) {
        let _ = writeln!(self.0, "\n{}", s.title);
    }

    fn para(&mut self, p: &str) {
        let _ = writeln!(self.0, "  {p}");
    }

    /// A paragraph in brackets.
    fn note(&mut self, p: &str) {
        self.para(&format!("({p})"));
    }

    fn facts(&mut self, f: &[Fact]) {
        self.lines(f, "  ");
    }

    fn list(&mut self, items: &[Item]) {
        for i in items {
            let lead = i.lead.as_ref().map(|l| format!("{l}: ")).unwrap_or_default();
            let stress = i.stress.as_ref().map(|s| format!(" {s}")).unwrap_or_default();
            let _ = writeln!(self.0, "  - {lead}{}{stress}", i.text);
        }
    }

    /// Columns padded to their widest cell.
    fn table(&mut self, t: &Table) {
        let rows: Vec<Vec<&str>> = std::iter::once(t.head.iter().map(String::as_str).collect())
            .chain(t.rows.iter().map(|r| r.cells.iter().map(|c| c.text.as_str()).collect()))
            .collect();
        let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
        let widths: Vec<usize> = (0..cols)
            .map(|i| {
                rows.iter()
                    .filter_map(|r| r.get(i))
                    .map(|c| c.chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        for r in rows {
            let cells: Vec<String> = r
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c}{}", " ".repeat(w - c.chars().count())))
                .collect();
            let _ = writeln!(self.0, "  {}", cells.join("  ").trim_end());
        }
    }

    fn findings(&mut self, list: &[Finding]) {
        for f in list {
            let n = f.n.map(|n| format!("{n}. ")).unwrap_or_default();
            let at = f.at.as_ref().map(|a| format!(" ({a})")).unwrap_or_default();
            let _ = writeln!(self.0, "  {} {n}{}{at}", f.mark, f.title);
            self.lines(&f.facts, "      ");
            if let Some(c) = &f.consequence {
                let _ = writeln!(self.0, "      consequence: {c}");
            }
            if let Some(fix) = &f.fix {
                let _ = writeln!(self.0, "      fix: {fix}");
            }
        }
    }

    /// One line a moment: its time from the origin, its lane, what (and a span's end); a
    /// deviation marked `✗`.
    fn timeline(&mut self, t: &Timeline) {
        let _ = writeln!(self.0, "  (times from the {})", t.origin);
        let lane_w = t.lanes.iter().map(|l| l.name.chars().count()).max().unwrap_or(0);
        for m in &t.moments {
            let until = m
                .until_ms
                .map(|u| format!(" (until {})", timeline::at(u, &t.origin)))
                .unwrap_or_default();
            let name = t.lane_name(m);
            let _ = writeln!(
                self.0,
                "  {:>9}  {name}{} {} {}{until}",
                timeline::at(m.at_ms, &t.origin),
                " ".repeat(lane_w - name.chars().count()),
                if m.ok { " " } else { "✗" },
                m.what,
            );
        }
    }

    fn commands(&mut self, about: &str, lines: &[String]) {
        let _ = writeln!(self.0, "  {about}:");
        for l in lines {
            let _ = writeln!(self.0, "    {l}");
        }
    }
}
