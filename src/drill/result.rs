//! A drill's result recorded at the exporter (`POST /api/v1/drills`): each report made a
//! `drills::results::Record` — its verdict, the worst lock's exposure and finding in a
//! sentence, the JSON report and the document — and sent with the `--exporter` URL's
//! credentials or the push token.

use std::path::Path;
use std::time::Duration;

use crate::drill::exporter::Endpoint;
use crate::drill::freeze::{FreezeReport, Verdict as FreezeVerdict};
use crate::drill::report::Report;
use crate::drills::results::{Kind, Record, Verdict};

/// Why a result was not recorded.
#[derive(Debug, thiserror::Error)]
#[error("the drill's result was not recorded at the exporter: {0}")]
pub struct NotRecorded(String);

/// The staged drill's record: safe when it passed, unsafe on a deviation.
pub fn staged(r: &Report, name: &str, ended_ms: u64) -> Result<Record, NotRecorded> {
    let verdict = match (r.interrupted, r.passed()) {
        (true, _) => Verdict::Interrupted,
        (false, true) => Verdict::Safe,
        (false, false) => Verdict::Unsafe,
    };
    Ok(Record {
        name: name.into(),
        kind: Kind::Staged,
        target: r.target.clone(),
        namespace: r.namespace.clone(),
        run: r.run_id.clone(),
        verdict,
        ended_ms,
        exposure_ms: 0,
        summary: r.result.clone(),
        report: serde_json::to_value(r).map_err(|e| NotRecorded(e.to_string()))?,
        document: r.document(),
    })
}

/// The freeze drill's record: its verdict (interrupted when it was), the worst lock's
/// exposure, and that lock's finding in a sentence (the report's result when it held none).
pub fn freeze(r: &FreezeReport, name: &str, ended_ms: u64) -> Result<Record, NotRecorded> {
    let verdict = match (r.interrupted, r.verdict) {
        (true, _) => Verdict::Interrupted,
        (false, FreezeVerdict::Safe) => Verdict::Safe,
        (false, FreezeVerdict::Unsafe) => Verdict::Unsafe,
        (false, FreezeVerdict::NotExercised) => Verdict::NotExercised,
    };
    let worst = r.locks.iter().max_by_key(|l| (l.verdict, l.exposure_ms.unwrap_or(0)));
    let summary = match worst {
        Some(l) => {
            let exposure = l.exposure_words().map_or_else(String::new, |w| format!(" ({w})"));
            format!("{}: {}{exposure}", l.key, l.finding.words())
        }
        None => r.result.clone(),
    };
    Ok(Record {
        name: name.into(),
        kind: Kind::Freeze,
        target: r.target.clone(),
        namespace: r.namespace.clone(),
        run: format!("{}/{}", r.started_at, r.frozen.chars().take(96).collect::<String>()),
        verdict,
        ended_ms,
        exposure_ms: worst
            .and_then(|l| l.exposure_ms)
            .map_or(0, |ms| u64::try_from(ms).unwrap_or(0)),
        summary: summary
            .chars()
            .take(crate::drills::results::record::MAX_SUMMARY)
            .collect(),
        report: serde_json::to_value(r).map_err(|e| NotRecorded(e.to_string()))?,
        document: r.document(),
    })
}

/// Send `record` to `exporter` with the push token in `token_file`, else `token` (the
/// config's), else the URL's credentials: where the exporter shows the report
/// (`/drills/NAME?target=…&namespace=…`).
pub async fn send(
    exporter: &str,
    token_file: Option<&Path>,
    token: Option<&str>,
    record: &Record,
) -> Result<String, NotRecorded> {
    let at = Endpoint::new(exporter, crate::vocab::DRILLS_PATH, Duration::from_secs(10)).map_err(NotRecorded)?;
    let from_file = token_file
        .map(crate::drill::exporter::token)
        .transpose()
        .map_err(NotRecorded)?;
    let answer = at
        .post(record, from_file.as_deref().or(token))
        .await
        .map_err(NotRecorded)?;
    let report = serde_json::from_str::<serde_json::Value>(&answer)
        .ok()
        .and_then(|v| v.get("report").and_then(|r| r.as_str()).map(str::to_string))
        .unwrap_or_default();
    let mut url = at.url.clone();
    url.set_path("");
    Ok(format!("{}{}", url.as_str().trim_end_matches('/'), report))
}
