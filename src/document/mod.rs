//! What lockwatch reports to people, as one document: a title with its verdict, a lead
//! sentence, facts, and sections of paragraphs, facts, lists, tables, findings (each with
//! its consequence and fix) and timelines. The drills build one each; `text`, `markdown`
//! and `html` render any document, and the exporter's pages share its stylesheet and its
//! swimlane. Pure: values in, words and markup out.

pub mod checked;
pub mod html;
pub mod markdown;
pub mod swimlane;
pub mod text;
pub mod timeline;

pub use timeline::{Lane, LaneRow, Moment, Timeline};

use serde::{Deserialize, Serialize};

/// How a verdict, a row or a finding reads: fine, harmful, or neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tone {
    Good,
    Bad,
    Neutral,
}

impl Tone {
    /// `true` for good, `false` for bad.
    pub fn ok(ok: bool) -> Tone {
        if ok { Tone::Good } else { Tone::Bad }
    }

    /// The `data-ok` value, when the tone has one.
    fn data_ok(self) -> Option<bool> {
        match self {
            Tone::Good => Some(true),
            Tone::Bad => Some(false),
            Tone::Neutral => None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Document {
    /// What it is: `Drill record, stale holder`, `Freeze drill`.
    pub title: String,
    pub badge: Badge,
    /// The result in one sentence.
    pub lead: String,
    pub facts: Vec<Fact>,
    pub sections: Vec<Section>,
    /// The HTML page's title (the browser tab).
    pub tab: String,
}

/// The verdict as a word, and the class that colours it (`passed`, `unsafe`, …).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Badge {
    pub word: String,
    pub class: String,
}

/// A labelled value; `code` values are identifiers (keys, series, run ids) set as code.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Fact {
    pub label: String,
    pub value: String,
    pub code: bool,
}

impl Fact {
    pub fn new(label: impl Into<String>, value: impl Into<String>) -> Fact {
        Fact {
            label: label.into(),
            value: value.into(),
            code: false,
        }
    }

    pub fn code(label: impl Into<String>, value: impl Into<String>) -> Fact {
        Fact {
            code: true,
            ..Fact::new(label, value)
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Section {
    /// The anchor (`id` in HTML).
    pub id: String,
    pub title: String,
    /// `Bad`: a box of what went wrong, shown before the rest.
    pub tone: Tone,
    pub blocks: Vec<Block>,
}

impl Section {
    pub fn new(id: &str, title: impl Into<String>, blocks: Vec<Block>) -> Section {
        Section {
            id: id.into(),
            title: title.into(),
            tone: Tone::Neutral,
            blocks,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Block {
    Para(String),
    /// A quieter paragraph: what is missing and why, how to read what follows.
    Note(String),
    Facts(Vec<Fact>),
    List(Vec<Item>),
    Table(Table),
    Findings(Vec<Finding>),
    Timeline(Box<Timeline>),
    /// Commands to run, under a line that says what for.
    Commands {
        about: String,
        lines: Vec<String>,
    },
}

/// A list item: `lead` (a link to `link`'s anchor, when given), then `text`, then what it
/// means (`stress`), stressed.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Item {
    pub lead: Option<String>,
    pub link: Option<String>,
    pub text: String,
    pub stress: Option<String>,
}

impl Item {
    pub fn plain(text: impl Into<String>) -> Item {
        Item {
            lead: None,
            link: None,
            text: text.into(),
            stress: None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Table {
    pub head: Vec<String>,
    pub rows: Vec<Row>,
}

impl Table {
    /// Two columns: each pair's first (an identifier set as code when `code`) and second.
    pub fn pairs(head: [&str; 2], pairs: &[(String, String)], code: bool) -> Table {
        let rows = pairs
            .iter()
            .map(|(a, b)| Row {
                cells: vec![if code { Cell::code(a) } else { Cell::text(a) }, Cell::text(b)],
                tone: Tone::Neutral,
            })
            .collect();
        Table {
            head: head.map(String::from).to_vec(),
            rows,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    pub cells: Vec<Cell>,
    /// `data-ok` in HTML, when not neutral.
    pub tone: Tone,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cell {
    pub text: String,
    pub code: bool,
    /// A figure: right-aligned, one line.
    pub num: bool,
    pub tone: Tone,
}

impl Cell {
    pub fn text(t: impl Into<String>) -> Cell {
        Cell {
            text: t.into(),
            code: false,
            num: false,
            tone: Tone::Neutral,
        }
    }

    pub fn code(t: impl Into<String>) -> Cell {
        Cell {
            code: true,
            ..Cell::text(t)
        }
    }

    pub fn num(t: impl Into<String>) -> Cell {
        Cell {
            num: true,
            ..Cell::text(t)
        }
    }

    /// `✓` or `✗`, coloured.
    pub fn mark(ok: bool) -> Cell {
        Cell {
            tone: Tone::ok(ok),
            ..Cell::num(if ok { "✓" } else { "✗" })
        }
    }
}

/// One judged thing — a step of the drill, a lock of the freeze — with its facts, and when
/// it went wrong what that means and what to do.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Finding {
    /// Its class (`step`, `lock`) and anchor (`step-7`).
    pub kind: String,
    pub anchor: Option<String>,
    /// Its number (`data-step`), when numbered.
    pub n: Option<usize>,
    pub title: String,
    /// The title is an identifier, set as code.
    pub code_title: bool,
    pub tone: Tone,
    /// `✓ pass`, `✗ FAIL`, `unsafe`: said before the title.
    pub mark: String,
    /// When, as said beside the title (`+1.20 s`).
    pub at: Option<String>,
    pub facts: Vec<Fact>,
    pub consequence: Option<String>,
    pub fix: Option<String>,
}

/// One format: what it writes for each part of a document. [`Document::render`] walks the
/// document once, in order; a format only writes.
trait Format {
    fn head(&mut self, d: &Document);
    fn section(&mut self, s: &Section);
    fn section_end(&mut self, _s: &Section) {}
    fn para(&mut self, p: &str);
    fn note(&mut self, p: &str);
    fn facts(&mut self, f: &[Fact]);
    fn list(&mut self, items: &[Item]);
    fn table(&mut self, t: &Table);
    fn findings(&mut self, f: &[Finding]);
    fn timeline(&mut self, t: &Timeline);
    fn commands(&mut self, about: &str, lines: &[String]);
    fn foot(&mut self, _d: &Document) {}
}

impl Document {
    fn render<F: Format>(&self, mut f: F) -> F {
        f.head(self);
        for s in &self.sections {
            f.section(s);
            for b in &s.blocks {
                match b {
                    Block::Para(p) => f.para(p),
                    Block::Note(p) => f.note(p),
                    Block::Facts(facts) => f.facts(facts),
                    Block::List(items) => f.list(items),
                    Block::Table(t) => f.table(t),
                    Block::Findings(list) => f.findings(list),
                    Block::Timeline(t) => f.timeline(t),
                    Block::Commands { about, lines } => f.commands(about, lines),
                }
            }
            f.section_end(s);
        }
        f.foot(self);
        f
    }
}

/// Seconds, signed, as the reports write a time from their origin: `+1.23 s`.
pub fn signed_secs(ms: i64, decimals: usize) -> String {
    format!("{:+.*} s", decimals, ms as f64 / 1000.0)
}

/// `s` safe in HTML text and in a quoted attribute: text from outside (keys, owners, run
/// data) never becomes markup.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

#[cfg(test)]
mod tests {
    #[test]
    fn markup_and_quotes_are_escaped() {
        assert_eq!(
            super::esc("<a href=\"x\">&'é"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;é"
        );
    }
}
