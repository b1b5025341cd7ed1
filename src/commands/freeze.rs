//! `lockwatch drill --freeze` / `--freeze-cmd`: the target checked, the question asked
//! (unless `--yes`: it names the process or the cgroup's processes), the drill run — thawed
//! at once on SIGINT, SIGTERM, SIGHUP and SIGQUIT —, the report printed and recorded. Exit 0
//! safe, 1 unsafe, not exercised or interrupted, 2 refused. Also the hidden `drill-watchdog`.

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::drill::{cancel_on_signals, confirm, output};
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
    let mut say = |line: String| eprintln!("{line}");
    let report = freeze::run(plan, &mut say, cancel).await.map_err(command_error)?;
    output(&report, args.format, args.report.as_deref())?;
    Ok(match (report.verdict, report.interrupted) {
        (Verdict::Safe, false) => Status::Fine,
        _ => Status::Unhealthy,
    })
}

fn command_error(e: FreezeError) -> CommandError {
    match e {
        FreezeError::Usage(m) => CommandError::Usage(m),
        FreezeError::Failed(m) => CommandError::Failed(anyhow::anyhow!(m)),
    }
}

/// The watchdog of a freeze drill, until the drill says it thawed or the watchdog did.
pub(super) async fn watchdog(args: DrillWatchdogArgs) -> Result<Status, CommandError> {
    let args = freeze::WatchdogArgs {
        thaw: args.thaw,
        thaw_cmd: args.thaw_cmd,
        hold: std::time::Duration::from_millis(args.hold_ms),
    };
    freeze::watchdog_main(args).await.context("the watchdog failed")?;
    Ok(Status::Fine)
}
