//! One drill's result as the drill sends it to `POST /api/v1/drills`: who it is (target,
//! namespace, name), its run and verdict, the worst lock's exposure and finding, the JSON
//! report, and the report as a document for the exporter to draw. Checked field by field
//! before anything is kept; each refusal names the field and what it must be. Whether the
//! target and namespace are configured is the store's question (`Drills`).

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::super::Refused;
use crate::document::Document;
use crate::vocab::DrillRefused;

/// The largest body taken (`413` past it): a report and its document are some tens of KiB.
pub const MAX_BODY: usize = 256 * 1024;
/// The longest name of a drill, of `A-Z a-z 0-9 _ - . :` (as the config's names).
pub const MAX_NAME: usize = 64;
/// The longest run id.
pub const MAX_RUN: usize = 128;
/// The longest summary sentence, in characters.
pub const MAX_SUMMARY: usize = 1024;
/// The largest time in ms taken (2^53 − 1: exact as a JSON number and as a gauge's float).
pub const MAX_MS: u64 = (1 << 53) - 1;

/// What a run found, the values of `lockwatch_drill_verdict`'s `verdict` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The worker stopped or was fenced (freeze); Redis refused every stale operation and
    /// lockwatch saw what it must (staged).
    Safe,
    /// The woken worker went on under a lock it no longer held (freeze); a deviation
    /// (staged).
    Unsafe,
    /// The frozen worker held no lock whose TTL ran out: nothing was tested.
    NotExercised,
    /// The run was stopped before it could judge.
    Interrupted,
}

impl Verdict {
    pub const ALL: [Verdict; 4] = [
        Verdict::Safe,
        Verdict::Unsafe,
        Verdict::NotExercised,
        Verdict::Interrupted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Safe => "safe",
            Verdict::Unsafe => "unsafe",
            Verdict::NotExercised => "not_exercised",
            Verdict::Interrupted => "interrupted",
        }
    }
}

/// Which drill sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// `lockwatch drill`: a scenario played by lockwatch's own workers.
    Staged,
    /// `lockwatch drill --freeze`: the team's own worker frozen.
    Freeze,
}

/// A drill's result, as sent and as kept (the latest of each drill).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Record {
    /// The drill's name (`--name`, the namespace by default): a label value, so checked.
    pub name: String,
    pub kind: Kind,
    pub target: String,
    pub namespace: String,
    /// The run's id: a record sent again (a retry) is taken once.
    pub run: String,
    pub verdict: Verdict,
    /// Wall-clock ms when the run ended.
    pub ended_ms: u64,
    /// The worst lock's exposure: how long the woken worker went on under a lock it no
    /// longer held; 0 when none did.
    pub exposure_ms: u64,
    /// The worst lock's finding (or the staged drill's result), in one sentence.
    pub summary: String,
    /// The drill's JSON report, as `--format json` prints it.
    pub report: Box<RawValue>,
    /// The report as a document, drawn by the exporter at `/drills/NAME`.
    pub document: Document,
}

/// What the record's report must agree on with the record.
#[derive(Deserialize)]
struct Names {
    target: Option<String>,
    namespace: Option<String>,
}

fn invalid(message: impl Into<String>) -> Refused {
    Refused::new(DrillRefused::Invalid, message)
}

/// Whether `s` may be a drill's name: as the config's names, beginning with a letter or a
/// digit (so that `.` and `..` never become a path of `/drills/`).
pub fn valid_name(s: &str) -> bool {
    s.len() <= MAX_NAME
        && s.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.:".contains(&b))
}

impl Record {
    /// Read and check a JSON body (names not yet against the config).
    pub fn parse(body: &[u8]) -> Result<Record, Refused> {
        let r: Record =
            serde_json::from_slice(body).map_err(|e| invalid(format!("the body is not a drill record: {e}")))?;
        r.check()?;
        Ok(r)
    }

    fn check(&self) -> Result<(), Refused> {
        if !valid_name(&self.name) {
            return Err(invalid(format!(
                "field `name`: `{}` is not a drill's name: use 1-{MAX_NAME} characters from A-Z a-z 0-9 _ - . :, the first a letter or a digit",
                self.name
            )));
        }
        for (field, v) in [("target", &self.target), ("namespace", &self.namespace)] {
            if v.is_empty() || v.len() > MAX_NAME {
                return Err(invalid(format!("field `{field}` must be a configured {field}'s name")));
            }
        }
        if self.run.is_empty() || self.run.chars().count() > MAX_RUN || self.run.chars().any(char::is_control) {
            return Err(invalid(format!(
                "field `run` must be 1-{MAX_RUN} characters, no control characters"
            )));
        }
        if self.ended_ms == 0 || self.ended_ms > MAX_MS {
            return Err(invalid(format!("field `ended_ms` must be Unix ms, 1 to {MAX_MS}")));
        }
        if self.exposure_ms > MAX_MS {
            return Err(invalid(format!("field `exposure_ms` must be at most {MAX_MS}")));
        }
        if self.summary.chars().count() > MAX_SUMMARY {
            return Err(invalid(format!(
                "field `summary` must be at most {MAX_SUMMARY} characters"
            )));
        }
        let names = match self.report.get().trim_start().starts_with('{') {
            true => serde_json::from_str::<Names>(self.report.get()).ok(),
            false => None,
        };
        let Some(names) = names else {
            return Err(invalid("field `report` must be the drill's JSON report, an object"));
        };
        for (field, theirs, ours) in [
            ("target", &names.target, &self.target),
            ("namespace", &names.namespace, &self.namespace),
        ] {
            if theirs.as_ref() != Some(ours) {
                return Err(invalid(format!(
                    "field `report`: its `{field}` is not the record's `{ours}`"
                )));
            }
        }
        self.document
            .check()
            .map_err(|e| invalid(format!("field `document`: {e}")))
    }

    /// The drill as its key: target, namespace, name.
    pub fn key(&self) -> (String, String, String) {
        (self.target.clone(), self.namespace.clone(), self.name.clone())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    pub(crate) fn body(name: &str, verdict: &str) -> serde_json::Value {
        serde_json::json!({
            "name": name, "kind": "freeze", "target": "main", "namespace": "payouts",
            "run": "r1", "verdict": verdict, "ended_ms": 1_764_000_000_000u64, "exposure_ms": 3200,
            "summary": "lock:payouts:1: noticed late",
            "report": {"target": "main", "namespace": "payouts", "verdict": verdict},
            "document": {"title": "Freeze drill", "badge": {"word": "UNSAFE", "class": "unsafe"},
                "lead": "x", "facts": [], "sections": [], "tab": "t"},
        })
    }

    fn parse(v: &serde_json::Value) -> Result<Record, Refused> {
        Record::parse(&serde_json::to_vec(v).unwrap())
    }

    #[test]
    fn a_whole_record_is_taken() {
        let r = parse(&body("payouts", "unsafe")).unwrap();
        assert_eq!(
            (r.verdict, r.kind, r.exposure_ms),
            (Verdict::Unsafe, Kind::Freeze, 3200)
        );
    }

    #[test]
    fn each_bad_field_is_named() {
        let cases: [(&str, serde_json::Value, &str); 7] = [
            ("name", serde_json::json!("pay outs"), "`name`"),
            ("name", serde_json::json!(".."), "`name`"),
            ("verdict", serde_json::json!("fine"), "unknown variant"),
            ("ended_ms", serde_json::json!(0), "`ended_ms`"),
            ("run", serde_json::json!("a\nb"), "`run`"),
            (
                "report",
                serde_json::json!({"target": "other", "namespace": "payouts"}),
                "its `target`",
            ),
            ("report", serde_json::json!([1]), "an object"),
        ];
        for (field, value, says) in cases {
            let mut b = body("payouts", "safe");
            b[field] = value;
            let e = parse(&b).unwrap_err();
            assert_eq!(e.reason, DrillRefused::Invalid);
            assert!(e.message.contains(says), "{field}: {}", e.message);
        }
        let e = Record::parse(b"{not json").unwrap_err();
        assert!(e.message.contains("not a drill record"), "{}", e.message);
    }
}
