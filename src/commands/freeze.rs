//! `lockwatch drill --freeze` / `--freeze-cmd`: the target checked, the question asked
//! (unless `--yes`: it names the process or the cgroup's processes), the drill run — thawed
//! at once on SIGINT, SIGTERM, SIGHUP and SIGQUIT —, the report printed, written and recorded
//! at the exporter (unless `--no-record`). Exit 0 safe, 1 unsafe, not exercised, interrupted
//! or not recorded, 2 refused, 3 the thaw failed. Also the hidden `drill-watchdog`.

use std::io::IsTerminal;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::drill_io::{cancel_on_signals, confirm, output, record, record_name};
use super::{CommandError, Status};
use crate::cli::{DrillArgs, DrillWatchdogArgs};
use crate::config::Config;
use crate::drill::freeze::{self, FreezeError, Frozen, Verdict};

pub(super) async fn run(config: &Config, args: &DrillArgs) -> Result<Status, CommandError> {
    let frozen = match (&args.freeze, &args.freeze_cmd, &args.thaw_cmd) {
        (Some(spec), _, _) => Frozen::parse(spec).map_err(|e| CommandError::Usage(e.0))?,
        (None, Some(freeze), Some(thaw)) => Frozen::Commands {
            freeze: freeze.clone(),
            thaw: thaw.clone(),
        },
        _ => return Err(CommandError::Usage("--freeze-cmd needs --thaw-cmd".into())),
    };
    let duration = |flag: &str, v: &Option<String>| -> Result<_, CommandError> {
        v.as_deref()
            .map(|s| crate::duration::parse(s).map_err(|e| CommandError::Usage(format!("{flag} `{s}`: {e}"))))
            .transpose()
    };
    let exporter = args.exporter.clone().ok_or_else(|| {
        CommandError::Usage("--freeze needs --exporter: the running serve that watches the namespace".into())
    })?;
    let name = record_name(args)?;
    let opts = freeze::Options {
        namespace: args.namespace.clone(),
        target: args.target.clone(),
        frozen,
        hold: duration("--for", &args.hold)?,
        observe: duration("--observe", &args.observe)?,
        exporter,
        prometheus: args.prometheus.clone(),
        allow_production: args.allow_production,
        monitor: !args.no_monitor,
        push_token_file: args.push_token_file.clone(),
        program: None,
    };
    let plan = freeze::plan(config, opts).await.map_err(command_error)?;
    if !args.yes {
        confirm(
            &plan.question(),
            "pass --yes to freeze without a terminal to confirm at",
        )?;
    }
    let cancel = CancellationToken::new();
    cancel_on_signals(&cancel)?;
    let mut narrator = crate::drill::narrator::console(false, std::io::stderr().is_terminal());
    let report = freeze::run(plan, narrator.as_mut(), cancel)
        .await
        .map_err(command_error)?;
    let written = output(&report, args.format, args.report.as_deref());
    let recorded = record(args, config, name.as_deref(), |name, ended| {
        crate::drill::result::freeze(&report, name, ended)
    })
    .await;
    if let Some(failed) = &report.thaw.failed {
        // Exit 3 whatever else went wrong: something may still be frozen.
        if let Err(e) = written {
            eprintln!("lockwatch: {e:#}");
        }
        eprintln!("THE THAW FAILED: {failed}; thaw it by hand: {}", report.thaw.by_hand);
        return Ok(Status::LeftFrozen);
    }
    written?;
    Ok(match (report.verdict, report.interrupted, recorded) {
        (Verdict::Safe, false, true) => Status::Fine,
        _ => Status::Unhealthy,
    })
}

/// `lockwatch drill --thaw TARGET`.
pub(super) async fn thaw_left(spec: &str, args: &DrillArgs) -> Result<Status, CommandError> {
    use crate::drill::freeze::leftover::{self, LeftoverError};
    let s = spec.to_string();
    let done = tokio::task::spawn_blocking(move || leftover::thaw(&s))
        .await
        .map_err(|e| CommandError::LeftFrozen(e.to_string()))?;
    match done {
        Ok(done) => {
            eprintln!("{done}");
            if let Some(exporter) = &args.exporter {
                let named = leftover::spec_of(spec);
                match freeze::notice::thawed_by_hand(exporter, &named, args.push_token_file.clone()).await {
                    Ok(n) => eprintln!("told the exporter: {n} freeze(s) of {named} thawed"),
                    Err(e) => eprintln!("{e}"),
                }
            }
            Ok(Status::Fine)
        }
        Err(e @ LeftoverError::Spec(_)) => Err(CommandError::Usage(e.to_string())),
        Err(LeftoverError::Still(m)) => Err(CommandError::LeftFrozen(format!("not thawed: {m}"))),
    }
}

fn command_error(e: FreezeError) -> CommandError {
    match e {
        FreezeError::Usage(m) => CommandError::Usage(m),
        FreezeError::Failed(m) => CommandError::Failed(anyhow::anyhow!(m)),
        FreezeError::LeftFrozen(m) => CommandError::LeftFrozen(m),
    }
}

/// The watchdog of a freeze drill, until the drill says it thawed or the watchdog did.
pub(super) async fn watchdog(args: DrillWatchdogArgs) -> Result<Status, CommandError> {
    let args = freeze::WatchdogArgs {
        thaw: args.thaw,
        freeze_cmd: args.freeze_cmd,
        thaw_cmd: args.thaw_cmd,
        notice: args.notice,
        hold: std::time::Duration::from_millis(args.hold_ms),
    };
    freeze::watchdog_main(args).await.context("the watchdog failed")?;
    Ok(Status::Fine)
}
