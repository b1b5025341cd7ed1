//! One record a drill or its watchdog sends about a freeze, read from its JSON and checked
//! field by field before anything is kept: each refusal names the field and what it must be.
//! Whether the target and namespace are configured is the store's question (`Freezes`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::super::Refused;
use crate::vocab::DrillRefused;

/// The largest body taken (`413` past it).
pub const MAX_BODY: usize = 16 * 1024;
/// The longest id, of `A-Z a-z 0-9 . _ : -`.
pub const MAX_ID: usize = 64;
/// The longest `frozen` and `thaw_by_hand`, in characters.
pub const MAX_COMMAND: usize = 1024;
/// The longest `what`, in characters.
pub const MAX_WHAT: usize = 512;
/// The largest time in ms taken (2^53 − 1: exact as a JSON number everywhere, and as the
/// gauge's float).
pub const MAX_MS: u64 = (1 << 53) - 1;

/// What the record says of the freeze.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reported {
    /// The freeze landed: the worker is stopped.
    Frozen,
    /// The worker was thawed: the freeze is over.
    Thawed,
    /// The thaw was tried and failed: the worker may still be stopped.
    ThawFailed,
}

impl Reported {
    pub fn as_str(self) -> &'static str {
        match self {
            Reported::Frozen => "frozen",
            Reported::Thawed => "thawed",
            Reported::ThawFailed => "thaw_failed",
        }
    }
}

/// Who sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum By {
    Drill,
    Watchdog,
}

impl By {
    pub fn as_str(self) -> &'static str {
        match self {
            By::Drill => "drill",
            By::Watchdog => "watchdog",
        }
    }
}

/// A record, every field checked (names not yet against the config); as kept, the latest
/// record of a live freeze (`Freeze`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub id: String,
    pub target: String,
    pub namespace: String,
    pub state: Reported,
    /// What was frozen as the drill names it: `pid:N`, `cgroup:PATH` or `cmd`; empty in a
    /// `thawed` record that left it out.
    pub frozen: String,
    pub what: String,
    /// Wall-clock ms when the freeze landed.
    pub since_ms: u64,
    /// The planned freeze length.
    pub for_ms: u64,
    /// Wall-clock ms of this record's event.
    pub at_ms: u64,
    pub by: By,
    /// The command that thaws it, as the drill gave it; may be empty.
    pub thaw_by_hand: String,
}

fn invalid(message: impl Into<String>) -> Refused {
    Refused::new(DrillRefused::Invalid, message)
}

impl Report {
    /// Read and check a JSON body. A `thawed` record needs only `id`, `target`,
    /// `namespace`, `state`, `at_ms` and `by`; the others, when given, are checked all the same.
    pub fn parse(body: &[u8]) -> Result<Report, Refused> {
        let value: Value = serde_json::from_slice(body).map_err(|e| invalid(format!("the body is not JSON: {e}")))?;
        let Value::Object(o) = value else {
            return Err(invalid("the body must be one JSON object"));
        };
        let state = match text(&o, "state", 16, Need::Required)?.as_str() {
            "frozen" => Reported::Frozen,
            "thawed" => Reported::Thawed,
            "thaw_failed" => Reported::ThawFailed,
            other => {
                return Err(invalid(format!(
                    "field `state`: `{other}` is not one of frozen, thawed, thaw_failed"
                )));
            }
        };
        let by = match text(&o, "by", 16, Need::Required)?.as_str() {
            "drill" => By::Drill,
            "watchdog" => By::Watchdog,
            other => return Err(invalid(format!("field `by`: `{other}` is not one of drill, watchdog"))),
        };
        let need = match state {
            Reported::Thawed => Need::Optional,
            _ => Need::Required,
        };
        let id = text(&o, "id", MAX_ID, Need::Required)?;
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b"._:-".contains(&b)) {
            return Err(invalid(format!(
                "field `id`: `{id}` is not 1 to {MAX_ID} characters of A-Z a-z 0-9 . _ : -"
            )));
        }
        let frozen = text(&o, "frozen", MAX_COMMAND, need)?;
        let left_out = frozen.is_empty() && need == Need::Optional;
        if !left_out && !frozen_shape(&frozen) {
            return Err(invalid(format!(
                "field `frozen`: `{frozen}` is not pid:N, cgroup:PATH or cmd"
            )));
        }
        let since_ms = ms(&o, "since_ms", need)?;
        let for_ms = ms(&o, "for_ms", need)?;
        if since_ms.saturating_add(for_ms) > MAX_MS {
            return Err(invalid(format!(
                "fields `since_ms` + `for_ms`: the planned end is past {MAX_MS} ms"
            )));
        }
        Ok(Report {
            target: text(&o, "target", 64, Need::Required)?,
            namespace: text(&o, "namespace", 64, Need::Required)?,
            what: text(&o, "what", MAX_WHAT, need)?,
            thaw_by_hand: text(&o, "thaw_by_hand", MAX_COMMAND, need)?,
            at_ms: ms(&o, "at_ms", Need::Required)?,
            id,
            state,
            frozen,
            since_ms,
            for_ms,
            by,
        })
    }

    /// The planned end of the freeze, in wall-clock ms.
    pub fn due_ms(&self) -> u64 {
        self.since_ms.saturating_add(self.for_ms)
    }
}

/// Whether a field must be there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    Required,
    /// Absent reads as empty (or 0).
    Optional,
}

/// `pid:N` (N ≥ 1), `cgroup:PATH` (PATH not empty) or `cmd`.
fn frozen_shape(s: &str) -> bool {
    if let Some(n) = s.strip_prefix("pid:") {
        return n.parse::<u32>().is_ok_and(|p| p > 0) && n.bytes().all(|b| b.is_ascii_digit());
    }
    s.strip_prefix("cgroup:").is_some_and(|p| !p.is_empty()) || s == "cmd"
}

/// A string field of at most `max` characters, none a control character.
fn text(o: &Map<String, Value>, key: &str, max: usize, need: Need) -> Result<String, Refused> {
    let s = match (o.get(key), need) {
        (None | Some(Value::Null), Need::Optional) => return Ok(String::new()),
        (None | Some(Value::Null), Need::Required) => return Err(invalid(format!("field `{key}` is missing"))),
        (Some(Value::String(s)), _) => s,
        (Some(other), _) => {
            return Err(invalid(format!("field `{key}` must be a string, not {}", kind(other))));
        }
    };
    let n = s.chars().count();
    if n > max {
        return Err(invalid(format!(
            "field `{key}` is too long: {n} characters, at most {max}"
        )));
    }
    if s.chars().any(char::is_control) {
        return Err(invalid(format!("field `{key}` holds a control character")));
    }
    Ok(s.clone())
}

/// A time or length in ms: a whole number from 0 to [`MAX_MS`].
fn ms(o: &Map<String, Value>, key: &str, need: Need) -> Result<u64, Refused> {
    match (o.get(key), need) {
        (None | Some(Value::Null), Need::Optional) => Ok(0),
        (None | Some(Value::Null), Need::Required) => Err(invalid(format!("field `{key}` is missing"))),
        (Some(v), _) => v.as_u64().filter(|n| *n <= MAX_MS).ok_or_else(|| {
            invalid(format!(
                "field `{key}` must be a whole number of milliseconds from 0 to {MAX_MS}, not {v}"
            ))
        }),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const FROZEN: &str = r#"{"id":"d-4242-1732825267000","target":"staging","namespace":"payouts","state":"frozen",
        "frozen":"pid:4242","what":"process 4242 (python3 worker.py)","since_ms":1732825267000,"for_ms":8000,
        "at_ms":1732825267010,"by":"drill","thaw_by_hand":"lockwatch drill --thaw pid:4242"}"#;

    fn with(key: &str, value: Value) -> Vec<u8> {
        let mut v: Value = serde_json::from_str(FROZEN).unwrap();
        match value {
            Value::Null => v.as_object_mut().unwrap().remove(key),
            value => v.as_object_mut().unwrap().insert(key.to_string(), value),
        };
        serde_json::to_vec(&v).unwrap()
    }

    fn refusal(body: &[u8]) -> String {
        Report::parse(body).unwrap_err().message
    }

    #[test]
    fn a_whole_record_is_read() {
        let r = Report::parse(FROZEN.as_bytes()).unwrap();
        assert_eq!(
            (r.id.as_str(), r.state, r.by),
            ("d-4242-1732825267000", Reported::Frozen, By::Drill)
        );
        assert_eq!((r.since_ms, r.for_ms, r.due_ms()), (1732825267000, 8000, 1732825275000));
        for frozen in ["pid:1", "cgroup:/sys/fs/cgroup/x", "cgroup:x", "cmd"] {
            assert!(Report::parse(&with("frozen", frozen.into())).is_ok(), "{frozen}");
        }
    }

    #[test]
    fn each_problem_is_named() {
        assert!(refusal(b"{").starts_with("the body is not JSON"));
        assert_eq!(refusal(b"[]"), "the body must be one JSON object");
        assert_eq!(refusal(&with("for_ms", Value::Null)), "field `for_ms` is missing");
        assert!(refusal(&with("for_ms", "8s".into())).starts_with("field `for_ms` must be a whole number"));
        assert!(refusal(&with("since_ms", (-1).into())).starts_with("field `since_ms` must be"));
        assert!(refusal(&with("id", "a b".into())).starts_with("field `id`: `a b` is not 1 to 64"));
        assert!(refusal(&with("id", "".into())).starts_with("field `id`"));
        assert!(refusal(&with("id", "x".repeat(65).into())).starts_with("field `id` is too long: 65"));
        assert!(refusal(&with("what", "w".repeat(513).into())).starts_with("field `what` is too long"));
        assert!(
            refusal(&with("thaw_by_hand", "t".repeat(1025).into())).starts_with("field `thaw_by_hand` is too long")
        );
        assert!(refusal(&with("state", "melted".into())).contains("not one of frozen, thawed, thaw_failed"));
        assert!(refusal(&with("by", "cron".into())).contains("not one of drill, watchdog"));
        assert!(refusal(&with("target", 3.into())).starts_with("field `target` must be a string, not a number"));
        assert!(refusal(&with("what", "a\nb".into())).contains("control character"));
        for frozen in ["pid:0", "pid:x", "pid:+4", "cgroup:", "4242", "cmd:x"] {
            assert!(
                refusal(&with("frozen", frozen.into())).starts_with("field `frozen`"),
                "{frozen}"
            );
        }
        assert!(refusal(&with("for_ms", MAX_MS.into())).contains("planned end"));
        assert_eq!(Report::parse(b"{}").unwrap_err().reason, DrillRefused::Invalid);
    }

    #[test]
    fn a_thaw_needs_only_what_names_the_freeze() {
        let body =
            br#"{"id":"d-1","target":"staging","namespace":"payouts","state":"thawed","at_ms":5,"by":"watchdog"}"#;
        let r = Report::parse(body).unwrap();
        assert_eq!((r.state, r.frozen.as_str(), r.for_ms), (Reported::Thawed, "", 0));
        let body = br#"{"id":"d-1","target":"staging","namespace":"payouts","state":"thawed","at_ms":5,"by":"watchdog","frozen":"x"}"#;
        assert!(refusal(body).starts_with("field `frozen`"));
        let body =
            br#"{"id":"d-1","target":"staging","namespace":"payouts","state":"thaw_failed","at_ms":5,"by":"watchdog"}"#;
        assert_eq!(refusal(body), "field `frozen` is missing");
    }
}
