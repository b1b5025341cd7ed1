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

/// The staged drill's record: safe when it passed, unsafe on a deviation (even when it was
/// interrupted after it), else interrupted.
pub fn staged(r: &Report, name: &str, ended_ms: u64) -> Result<Record, NotRecorded> {
    // A deviation seen before an interruption is still one.
    let verdict = match (r.deviations() > 0, r.interrupted) {
        (true, _) => Verdict::Unsafe,
        (false, true) => Verdict::Interrupted,
        (false, false) => Verdict::Safe,
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
        report: serde_json::value::to_raw_value(r).map_err(|e| NotRecorded(e.to_string()))?,
        document: r.document(),
    })
}

/// The freeze drill's record: its verdict (unsafe even when interrupted after the harm was
/// seen; else interrupted when it was), the worst lock's
/// exposure, and that lock's finding in a sentence (the report's result when it held none).
pub fn freeze(r: &FreezeReport, name: &str, ended_ms: u64) -> Result<Record, NotRecorded> {
    // Harm seen before an interruption is still harm.
    let verdict = match (r.verdict, r.interrupted) {
        (FreezeVerdict::Unsafe, _) => Verdict::Unsafe,
        (_, true) => Verdict::Interrupted,
        (FreezeVerdict::Safe, false) => Verdict::Safe,
        (FreezeVerdict::NotExercised, false) => Verdict::NotExercised,
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
        // Unique per run (two hosts may freeze `pid:4242` in one second), the same for each
        // retry of its record.
        run: format!(
            "{}/{:08x}/{}",
            r.started_at,
            crate::drill::plan::rand_id(),
            r.frozen.chars().take(64).collect::<String>()
        ),
        verdict,
        ended_ms,
        exposure_ms: worst
            .and_then(|l| l.exposure_ms)
            .map_or(0, |ms| u64::try_from(ms).unwrap_or(0)),
        summary: summary
            .chars()
            .take(crate::drills::results::record::MAX_SUMMARY)
            .collect(),
        report: serde_json::value::to_raw_value(r).map_err(|e| NotRecorded(e.to_string()))?,
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::drill::freeze::golden_tests::{frozen, staged as staged_report};

    #[test]
    fn harm_seen_before_an_interruption_is_recorded_unsafe() {
        let mut r = frozen();
        assert_eq!(r.verdict, FreezeVerdict::Unsafe);
        r.interrupted = true;
        let rec = freeze(&r, "payouts", 1).unwrap();
        assert_eq!(rec.verdict, Verdict::Unsafe);
        assert!(rec.exposure_ms > 0, "{}", rec.exposure_ms);
        assert!(rec.summary.starts_with(&r.locks[0].key), "{}", rec.summary);
        let mut s = staged_report();
        s.interrupted = true;
        let failed = s.deviations() > 0;
        let v = staged_verdict(&s);
        assert_eq!(v, if failed { Verdict::Unsafe } else { Verdict::Interrupted });
        s.steps.iter_mut().for_each(|x| x.ok = true);
        s.counters.iter_mut().for_each(|x| x.ok = true);
        assert_eq!(staged_verdict(&s), Verdict::Interrupted);
        s.interrupted = false;
        assert_eq!(staged_verdict(&s), Verdict::Safe);
    }

    fn staged_verdict(r: &Report) -> Verdict {
        staged(r, "drill", 1).unwrap().verdict
    }

    #[test]
    fn each_record_a_drill_sends_is_one_the_exporter_takes() {
        for rec in [
            freeze(&frozen(), "payouts", 1).unwrap(),
            staged(&staged_report(), "drill", 1).unwrap(),
        ] {
            let body = serde_json::to_vec(&rec).unwrap();
            let back = Record::parse(&body).unwrap();
            assert_eq!((back.verdict, back.run.as_str()), (rec.verdict, rec.run.as_str()));
        }
        // Two runs of one second and one process are two runs.
        let (a, b) = (freeze(&frozen(), "p", 1).unwrap(), freeze(&frozen(), "p", 1).unwrap());
        assert_ne!(a.run, b.run);
    }
}
