//! Classifying one log record (a line, or a line with its traceback) into a lock event
//! `{namespace, op, outcome}`, or saying why not.
//!
//! Order: configured `[[rule]]`s (regexes on the raw record) first; then a prefilter (the
//! skim's case-blind SIMD search for the lock words) so a record with none costs about a
//! memory scan; then the first line's fields are read (the lines after it join the error
//! text) and the built-in rules (`phrases`) look for a lock noun, an outcome and an
//! operation, as whole words. Namespace: an explicit field, else a lock key (a field, or a
//! word of the text) matched against the patterns, else `log_phrases`, else unknown. Label
//! values only ever come from the config.

use super::fields::{self, Fields};
use super::origin::Origin;
use super::phrases::{self, Phrasebook, Said};
use super::records::Piece;
use super::skim::Skim;
use super::words::{word_around, word_around_ascii};
use crate::config::{Config, LogFormat};
use crate::glob::Glob;
use crate::metrics::TraceContext;
use crate::vocab::{Op, Outcome};

/// What a record brought beside its text (see [`Classifier::classify_given`]).
#[derive(Debug, Default, Clone, Copy)]
pub struct Given<'a> {
    /// An error's type and message (`exception.type: exception.message`).
    pub error: Option<&'a str>,
    /// A stack trace, read after the record's own lines.
    pub trace: Option<&'a str>,
    /// A lock key, matched against the namespaces' patterns.
    pub key: Option<&'a str>,
    /// A namespace name, used when configured.
    pub namespace: Option<&'a str>,
    /// The trace and span the record was written in (an OTLP record's `traceId`/`spanId`,
    /// Loki structured metadata): preferred to ids in the record's own text.
    pub trace_id: Option<&'a str>,
    pub span_id: Option<&'a str>,
    /// Who wrote it (an OTLP resource's `process.pid`, `host.name`, `service.instance.id`;
    /// a Loki stream's labels): preferred to the record's own fields.
    pub pid: Option<&'a str>,
    pub host: Option<&'a str>,
    pub instance: Option<&'a str>,
}

/// What a line is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A lock event. `namespace` indexes the config's namespaces; `None` is `unknown`.
    Event {
        namespace: Option<usize>,
        op: Op,
        outcome: Outcome,
        /// Which rule decided: `rule[N]` or the built-in signal that matched.
        by: String,
        /// The lock key the record named (a key field, or a word of its text) when one
        /// matches a namespace's pattern, cut to 256 bytes.
        key: Option<Box<str>>,
        /// The trace context the record carried (checked ids), for exemplars and links;
        /// never a label.
        trace: Option<TraceContext>,
        /// Who wrote it, as far as the record says (its file is added by the tailer);
        /// `None` when it says nothing.
        origin: Option<Box<Origin>>,
    },
    Ignored(&'static str),
    Malformed(&'static str),
}

/// Words that make a record worth reading: each of the phrasebook's nouns holds one. Kept
/// to a few words that seldom start ordinary text, so the prefilter stays a fast scan.
pub(crate) const LOCK_WORDS: &[&str] = &[
    "lock",
    "lease",
    "mutex",
    "illegalmonitorstate",
    "not owned",
    "no longer owned",
    "token mismatch",
    "fenc",
];

/// Why a record without any of `LOCK_WORDS` is ignored.
const NO_LOCK_WORD: &str = "no lock word";

/// Why a record is ignored when counting finds no outcome phrase in it (`count_piece`).
const NO_OUTCOME: &str = "no failure named";

struct Namespace {
    name: String,
    pattern: Glob,
    /// `log_phrases`, each searched for with a searcher built once.
    phrases: Vec<memchr::memmem::Finder<'static>>,
}

struct Rule {
    regex: regex::bytes::Regex,
    op: Op,
    outcome: Outcome,
    namespace: Option<usize>,
}

/// The rules of one config, built once; `classify` is then allocation-free for most lines.
pub struct Classifier {
    rules: Vec<Rule>,
    rule_set: regex::bytes::RegexSet,
    skim: Skim,
    phrases: Phrasebook,
    namespaces: Vec<Namespace>,
}

#[derive(Debug, thiserror::Error)]
pub enum ClassifierError {
    #[error("rule[{index}]: {source}")]
    Rule { index: usize, source: regex::Error },
    #[error("cannot build the phrasebook: {0}")]
    Phrasebook(#[from] super::phrases::PhrasebookError),
    #[error("cannot build the lock-word skim: {0}")]
    Skim(#[from] super::skim::SkimError),
}

impl Classifier {
    pub fn new(config: &Config) -> Result<Self, ClassifierError> {
        let rules = config
            .rules
            .iter()
            .enumerate()
            .map(|(index, r)| {
                Ok(Rule {
                    regex: regex::bytes::Regex::new(r.pattern.as_str())
                        .map_err(|source| ClassifierError::Rule { index, source })?,
                    op: r.op,
                    outcome: r.outcome,
                    namespace: r
                        .namespace
                        .as_ref()
                        .and_then(|n| config.namespaces.iter().position(|c| &c.name == n)),
                })
            })
            .collect::<Result<Vec<_>, ClassifierError>>()?;
        let rule_set = regex::bytes::RegexSet::new(rules.iter().map(|r| r.regex.as_str()))
            .map_err(|source| ClassifierError::Rule { index: 0, source })?;
        Ok(Classifier {
            rules,
            rule_set,
            skim: Skim::new(LOCK_WORDS)?,
            phrases: Phrasebook::new()?,
            namespaces: config
                .namespaces
                .iter()
                .map(|n| Namespace {
                    name: n.name.clone(),
                    pattern: n.pattern.clone(),
                    phrases: n
                        .log_phrases
                        .iter()
                        .map(|p| memchr::memmem::Finder::new(p.as_bytes()).into_owned())
                        .collect(),
                })
                .collect(),
        })
    }

    /// How records read as `format` may be skimmed (`RecordSplitter::feed_skimming`): by
    /// the lock words, unless `[[rule]]`s (regexes on whole records) are configured or every
    /// record's shape is checked (`format = "json"`).
    pub fn skim(&self, format: LogFormat) -> Option<&Skim> {
        (self.rules.is_empty() && format != LogFormat::Json).then_some(&self.skim)
    }

    /// How many namespaces are configured.
    pub fn namespace_count(&self) -> usize {
        self.namespaces.len()
    }

    /// The configured namespace of this name.
    pub fn namespace_index(&self, name: &str) -> Option<usize> {
        self.namespaces.iter().position(|n| n.name == name)
    }

    /// The namespace whose pattern matches the lock key `key`.
    pub fn namespace_of_key(&self, key: &str) -> Option<usize> {
        self.namespaces.iter().position(|n| n.pattern.matches(key.as_bytes()))
    }

    /// The namespace name of an event (`unknown` for `None`).
    pub fn namespace_name(&self, ns: Option<usize>) -> &str {
        ns.and_then(|i| self.namespaces.get(i))
            .map(|n| n.name.as_str())
            .unwrap_or(crate::vocab::UNKNOWN_NAMESPACE)
    }

    /// Classify one piece of input: a record, or a line too long to keep.
    pub fn classify_piece(&self, piece: &Piece<'_>, format: LogFormat) -> Verdict {
        self.piece(piece, format, false)
    }

    /// [`classify_piece`](Self::classify_piece) for counting, where an ignored record's
    /// reason is not shown: a one-line record read as `auto` or `text` that holds a lock
    /// word but no outcome phrase (and no `\\`, so no escape can make one) is ignored with
    /// [`NO_OUTCOME`] before its fields are read. Every verdict but that reason is the same.
    pub fn count_piece(&self, piece: &Piece<'_>, format: LogFormat) -> Verdict {
        self.piece(piece, format, true)
    }

    fn piece(&self, piece: &Piece<'_>, format: LogFormat, quick: bool) -> Verdict {
        match piece {
            Piece::Record { orphan: true, .. } => {
                Verdict::Ignored("continuation lines whose first line was read before (counted with it)")
            }
            Piece::Record { bytes, marked, .. } => self.record(bytes, format, quick, *marked),
            Piece::TooLong(_) => Verdict::Malformed("line too long"),
            Piece::Quiet { .. } => Verdict::Ignored(NO_LOCK_WORD),
        }
    }

    /// Classify one record read as `format`: a line (without its newline), or lines joined
    /// by newlines whose first line starts the record.
    pub fn classify(&self, record: &[u8], format: LogFormat) -> Verdict {
        self.record(record, format, false, false)
    }

    /// `marked`: the skim found a lock word in `record`, so it is not looked for again.
    fn record(&self, record: &[u8], format: LogFormat, quick: bool, marked: bool) -> Verdict {
        let text = match readable(record) {
            Ok(text) => text,
            Err(malformed) => return malformed,
        };
        let rule = if self.rules.is_empty() {
            None
        } else {
            self.rule_set.matches(record).iter().next()
        };
        if rule.is_none() && !marked && !self.skim.is_match(record) {
            return match format {
                LogFormat::Json if !fields::looks_like_json(first_and_rest(record, text).0) => {
                    Verdict::Malformed("not a JSON object")
                }
                _ => Verdict::Ignored(NO_LOCK_WORD),
            };
        }
        if quick
            && rule.is_none()
            && matches!(format, LogFormat::Auto | LogFormat::Text)
            && memchr::memchr2(b'\\', b'\n', record).is_none()
            && !self.phrases.may_say(text)
        {
            return Verdict::Ignored(NO_OUTCOME);
        }
        let (first, rest) = first_and_rest(record, text);
        let (f, rest) = match fields::read_record(first, rest, text, format) {
            Ok(v) => v,
            Err(m) => return Verdict::Malformed(m.as_str()),
        };
        self.decide(rule, &f, &Text::of(&f, rest))
    }

    /// The verdict of a record read: the configured rule that matched, else the built-in rules.
    fn decide(&self, rule: Option<usize>, f: &Fields<'_>, t: &Text) -> Verdict {
        if let Some(i) = rule {
            let r = &self.rules[i];
            let (namespace, key) = self.place(f, t);
            return Verdict::Event {
                namespace: r.namespace.or(namespace),
                op: r.op,
                outcome: r.outcome,
                by: format!("rule[{i}]"),
                key,
                trace: trace_of(f),
                origin: origin_of(f),
            };
        }
        self.builtin(f, t)
    }

    /// Classify a record that arrived with fields of its own (an OTLP record's attributes,
    /// a Loki stream's labels, a shipper's JSON object): the record's text is read as a
    /// file's would be, and `given` fills what its first line does not say. A given
    /// namespace counts only when it names a configured one (a Kubernetes `namespace` label
    /// is not a lock namespace); the error and trace join the error text.
    pub fn classify_given(&self, record: &[u8], given: &Given<'_>) -> Verdict {
        let extra = [given.error, given.trace];
        let extra = extra.iter().flatten();
        let text = match readable(record) {
            Ok(_) if extra.clone().any(|e| e.contains('\0')) => return Verdict::Malformed(NUL),
            Ok(text) => text,
            Err(malformed) => return malformed,
        };
        let rule = if self.rules.is_empty() {
            None
        } else {
            std::iter::once(record)
                .chain(extra.clone().map(|e| e.as_bytes()))
                .find_map(|r| self.rule_set.matches(r).iter().next())
        };
        if rule.is_none() && !self.skim.is_match(record) && !extra.clone().any(|e| self.skim.is_match(e.as_bytes())) {
            return Verdict::Ignored(NO_LOCK_WORD);
        }
        let (first, rest) = first_and_rest(record, text);
        let (mut f, rest) = fields::read_record(first, rest, text, LogFormat::Auto).unwrap_or_default();
        if f.key.is_none() {
            f.key = given.key.map(Into::into);
        }
        if f.namespace.is_none() {
            f.namespace = given
                .namespace
                .filter(|n| self.namespace_index(n).is_some())
                .map(Into::into);
        }
        if let Some(t) = given.trace_id {
            f.trace_id = Some(t.into());
            f.span_id = given.span_id.map(Into::into);
        }
        for (mine, given) in [
            (&mut f.pid, given.pid),
            (&mut f.host, given.host),
            (&mut f.instance, given.instance),
        ] {
            if let Some(g) = given {
                *mine = Some(g.into());
            }
        }
        if let Some(e) = given.error {
            f.error = Some(match f.error.take() {
                Some(own) => format!("{own} | {e}").into(),
                None => e.into(),
            });
        }
        let t = match given.trace {
            Some(trace) if rest.is_empty() => Text::of(&f, trace),
            Some(trace) => Text::of(&f, &format!("{rest}\n{trace}")),
            None => Text::of(&f, rest),
        };
        self.decide(rule, &f, &t)
    }

    fn builtin(&self, f: &Fields<'_>, t: &Text) -> Verdict {
        let found = self.phrases.find(&t.lowered, &t.text);
        if !found.noun {
            return Verdict::Ignored("lock words only as an adjective (locked, unlocked): not about a lock");
        }
        let Some((said, signal)) = found.said else {
            return Verdict::Ignored("about a lock, but no failure in it");
        };
        let Some((op, outcome)) = said.resolve(found.op.map(|(_, op)| op)) else {
            return Verdict::Ignored("a lock failure that names no operation (acquire, release, renew, write)");
        };
        let signal = match said {
            Said::Quorum | Said::Held => format!("built-in: \"{signal}\" (another holder: {})", outcome.as_str()),
            _ => self.phrases.signal(signal),
        };
        let (namespace, key) = self.place(f, t);
        Verdict::Event {
            namespace,
            op,
            outcome,
            by: signal,
            key,
            trace: trace_of(f),
            origin: origin_of(f),
        }
    }

    /// An event's namespace and the key it named. Namespace: explicit field, else the
    /// named key's, else a phrase, else unknown. Key: a key field, else the first word of
    /// the text, matching a namespace's pattern. Read only for events.
    fn place(&self, f: &Fields<'_>, t: &Text) -> (Option<usize>, Option<Box<str>>) {
        let named = self.named_key(f, t);
        let namespace = match (&f.namespace, named) {
            // Only configured names become labels; anything else is `unknown`.
            (Some(ns), _) => self.namespace_index(ns),
            (None, Some((i, _))) => Some(i),
            (None, None) => self.namespace_of_phrase(t),
        };
        (namespace, named.map(|(_, k)| super::keyed::cut(k).into()))
    }

    /// The lock key a record names (field or word) and its namespace, by pattern.
    fn named_key<'t>(&self, f: &'t Fields<'_>, t: &'t Text) -> Option<(usize, &'t str)> {
        if let Some(k) = f.key.as_deref()
            && let Some(i) = self.namespace_of_key(k)
        {
            return Some((i, k));
        }
        // The words (between separators) that hold a `:`, in order, found from the colons.
        let text = t.text.as_str();
        let ascii = text.is_ascii();
        let mut from = 0;
        while let Some(colon) = memchr::memchr(b':', &text.as_bytes()[from..]).map(|i| from + i) {
            let (start, end) = if ascii {
                word_around_ascii(text.as_bytes(), colon)
            } else {
                word_around(text, colon)
            };
            let w = text[start..end].trim_matches(|c: char| matches!(c, ':' | '.' | ',' | ';' | '\'' | '"'));
            if w.len() > 2
                && w.contains(':')
                && let Some(i) = self.namespace_of_key(w)
            {
                return Some((i, w));
            }
            from = end;
        }
        None
    }

    /// The namespace whose `log_phrases` appears first in the text.
    fn namespace_of_phrase(&self, t: &Text) -> Option<usize> {
        self.namespaces
            .iter()
            .enumerate()
            .filter_map(|(i, n)| {
                n.phrases
                    .iter()
                    .filter_map(|p| p.find(t.lowered.as_bytes()))
                    .min()
                    .map(|at| (at, i))
            })
            .min()
            .map(|(_, i)| i)
    }
}

const NUL: &str = "binary data (NUL bytes)";

/// The trace context of a record read, when its ids are usable.
fn origin_of(f: &Fields<'_>) -> Option<Box<Origin>> {
    let o = Origin::of(f.pid.as_deref(), f.host.as_deref(), f.instance.as_deref());
    (!o.is_empty()).then(|| Box::new(o))
}

fn trace_of(f: &Fields<'_>) -> Option<TraceContext> {
    TraceContext::new(f.trace_id.as_deref()?, f.span_id.as_deref())
}

/// The record as text, or why it is malformed.
fn readable(record: &[u8]) -> Result<&str, Verdict> {
    if memchr::memchr(0, record).is_some() {
        return Err(Verdict::Malformed(NUL));
    }
    std::str::from_utf8(record).map_err(|_| Verdict::Malformed("invalid UTF-8"))
}

/// A record's first line (without its `\r`) and the lines after it.
fn first_and_rest<'a>(record: &[u8], text: &'a str) -> (&'a str, &'a str) {
    match memchr::memchr(b'\n', record) {
        Some(nl) => (text[..nl].strip_suffix('\r').unwrap_or(&text[..nl]), &text[nl + 1..]),
        None => (text, ""),
    }
}

/// A record's text as the built-in rules read it: the message, then the error and the
/// lines after the first; and the same lowercased (`phrases::normalize`).
struct Text {
    text: String,
    lowered: String,
}

impl Text {
    fn of(f: &Fields<'_>, rest: &str) -> Self {
        let mut text =
            String::with_capacity(f.message.len() + f.error.as_ref().map_or(0, |e| e.len() + 3) + rest.len() + 1);
        text.push_str(&f.message);
        if let Some(e) = &f.error {
            text.push_str(" | ");
            text.push_str(e);
        }
        if !rest.is_empty() {
            text.push('\n');
            text.push_str(rest);
        }
        Text {
            lowered: phrases::normalize(&text),
            text,
        }
    }
}

#[cfg(test)]
#[path = "classify_tests.rs"]
mod tests;
