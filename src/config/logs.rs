//! `[[logs]]`: the application log files (or stdin) the event intake tails — source name,
//! path glob, line format, whether multi-line records are joined, where to start in a file
//! with no saved offset, where rotated files are looked for and how long one is followed
//! after its last write. Tailing and classifying are `intake`'s job; `LogFormat` is also
//! `classify --input-format`'s type.

use std::path::Path;
use std::time::Duration;

use super::choice::choice_enum;
use super::raw::RawLogs;
use super::{ConfigError, Cx};
use crate::duration;
use crate::vocab::{PUSH_PATHS, PUSH_SOURCES};

choice_enum!(
    /// How the lines of a log source are read (`format`, and `classify --input-format`).
    LogFormat {
        /// Per line: a JSON object, else logfmt, else plain text.
        #[default]
        Auto => "auto",
        Json => "json",
        Logfmt => "logfmt",
        Text => "text",
    }
);

choice_enum!(
    /// Where to start reading a file that has no saved offset (`start_at`).
    StartAt {
        /// Only lines written from now on.
        #[default]
        End => "end",
        /// The whole file.
        Beginning => "beginning",
    }
);

choice_enum!(
    /// Whether the lines of a record (a traceback, a stack trace) are joined (`multiline`).
    Multiline {
        /// Continuation lines (indented, `Traceback`, `Caused by:`, a Go panic's) join the
        /// line that starts their record.
        #[default]
        Auto => "auto",
        /// Every line is a record of its own.
        Off => "off",
    }
);

/// How long a rotated file is followed after it last grew, unless `rotated_grace` says.
pub const DEFAULT_ROTATED_GRACE: Duration = Duration::from_secs(300);
/// The bounds of `rotated_grace`: a second (the old fixed wait was 5 s) to a day.
const ROTATED_GRACE_RANGE: std::ops::RangeInclusive<Duration> = Duration::from_secs(1)..=Duration::from_secs(86_400);

#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    pub name: String,
    /// A file glob, or `-` for stdin.
    pub path: String,
    pub format: LogFormat,
    pub start_at: StartAt,
    pub multiline: Multiline,
    /// A glob of where rotated files may also be (logrotate's `olddir` elsewhere than one
    /// directory below), absolute; the file's directory and those one level below it are
    /// always searched.
    pub rotated: Option<String>,
    /// How long a rotated file is still followed after it last grew: an application that
    /// was not told to reopen its log goes on writing into the rotated file.
    pub rotated_grace: Duration,
}

impl Cx<'_> {
    pub(super) fn logs(&self, raw: Vec<RawLogs>, base: &Path) -> Result<Vec<LogConfig>, ConfigError> {
        let mut out: Vec<LogConfig> = Vec::new();
        for (i, l) in raw.into_iter().enumerate() {
            let k = |field: &str| format!("logs[{i}].{field}");
            let name = self.name(&l.name, &k("name"))?;
            if out.iter().any(|o| o.name == name) {
                return Err(self.err(Some(&l.name.span()), k("name"), format!("duplicate logs name `{name}`")));
            }
            if l.path.get_ref().trim().is_empty() {
                return Err(self.err(Some(&l.path.span()), k("path"), "empty path"));
            }
            if let Some(i) = PUSH_SOURCES.iter().position(|s| *s == name) {
                return Err(self.err(
                    Some(&l.name.span()),
                    k("name"),
                    format!("`{name}` is the source name of POST {}; choose another", PUSH_PATHS[i]),
                ));
            }
            let path = if l.path.get_ref() == "-" {
                if out.iter().any(|o| o.path == "-") {
                    return Err(self.err(
                        Some(&l.path.span()),
                        k("path"),
                        "only one [[logs]] can read stdin (`-`)",
                    ));
                }
                "-".to_string()
            } else {
                let p = base.join(l.path.get_ref()).display().to_string();
                if let Err(e) = glob::Pattern::new(&p) {
                    return Err(self.err(Some(&l.path.span()), k("path"), format!("not a valid glob: {e}")));
                }
                p
            };
            let format = self.choice(l.format.as_ref(), &k("format"))?;
            let start_at = self.choice(l.start_at.as_ref(), &k("start_at"))?;
            let multiline = self.choice(l.multiline.as_ref(), &k("multiline"))?;
            for (key, v) in [("rotated", &l.rotated), ("rotated_grace", &l.rotated_grace)] {
                if let Some(v) = v.as_ref().filter(|_| path == "-") {
                    return Err(self.err(Some(&v.span()), k(key), "stdin (`-`) is never rotated"));
                }
            }
            let rotated = match &l.rotated {
                Some(r) => {
                    let p = base.join(r.get_ref()).display().to_string();
                    if r.get_ref().trim().is_empty() {
                        return Err(self.err(Some(&r.span()), k("rotated"), "empty glob"));
                    }
                    if let Err(e) = glob::Pattern::new(&p) {
                        return Err(self.err(Some(&r.span()), k("rotated"), format!("not a valid glob: {e}")));
                    }
                    Some(p)
                }
                None => None,
            };
            let rotated_grace = match &l.rotated_grace {
                Some(v) => {
                    let d = self.duration(v, &k("rotated_grace"))?;
                    if !ROTATED_GRACE_RANGE.contains(&d) {
                        return Err(self.err(
                            Some(&v.span()),
                            k("rotated_grace"),
                            format!("{} is out of range 1s..=1d", duration::format(d)),
                        ));
                    }
                    d
                }
                None => DEFAULT_ROTATED_GRACE,
            };
            out.push(LogConfig {
                name,
                path,
                format,
                start_at,
                multiline,
                rotated,
                rotated_grace,
            });
        }
        Ok(out)
    }
}
