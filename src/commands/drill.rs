//! `lockwatch drill`: ask before running against a target (unless `--yes` or
//! `--interactive`), run the drill — rolled back on SIGINT, SIGTERM, SIGHUP and SIGQUIT
//! alike —, print the report in the asked format and write the record (HTML for a `.html`
//! or `.htm` file, else markdown), record the result at `--exporter` (unless
//! `--no-record`); exit 1 on any deviation or interruption, or a result not recorded. `--cleanup` removes what interrupted runs left. Also the
//! hidden `drill-worker` (worker A). `--freeze` is `freeze`'s.

use std::io::{IsTerminal, Write};

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::drill_io::{cancel_on_signals, confirm, output, record, record_name};
use super::{CommandError, Status};
use crate::cli::{DrillArgs, DrillFormat, DrillWorkerArgs};
use crate::drill::{self, DrillError};

pub(super) async fn run(args: DrillArgs) -> Result<Status, CommandError> {
    if let Some(spec) = &args.thaw {
        return super::freeze::thaw_left(spec, &args).await;
    }
    let config = super::load(&args.config, None)?;
    if args.cleanup {
        return cleanup(&config, &args).await;
    }
    if args.freeze.is_some() || args.freeze_cmd.is_some() {
        return super::freeze::run(&config, &args).await;
    }
    let sustain = match &args.sustain {
        None => None,
        Some(s) => Some(crate::duration::parse(s).map_err(|e| CommandError::Usage(format!("--sustain `{s}`: {e}")))?),
    };
    let name = record_name(&args)?;
    if !args.yes && !args.interactive {
        confirm(
            "run the drill against the config's target?",
            "pass --yes to run the drill without a terminal, or --interactive",
        )?;
    }
    let opts = options(&args, sustain);
    let mut narrator = drill::narrator::console(args.interactive, std::io::stderr().is_terminal());
    // Any of the usual signals stops the scenario; the drill still rolls back and reports.
    let cancel = CancellationToken::new();
    cancel_on_signals(&cancel)?;
    let report = drill::run(&config, &opts, narrator.as_mut(), cancel)
        .await
        .map_err(command_error)?;
    let written = output(&report, args.format, args.report.as_deref());
    let recorded = record(&args, &config, name.as_deref(), |name, ended| {
        drill::result::staged(&report, name, ended)
    })
    .await;
    written?;
    Ok(if report.passed() && recorded {
        Status::Fine
    } else {
        Status::Unhealthy
    })
}

fn options(args: &DrillArgs, sustain: Option<std::time::Duration>) -> drill::Options {
    drill::Options {
        config_path: args.config.config.clone().unwrap_or_default(),
        namespace: args.namespace.clone(),
        scenario: args.scenario,
        target: args.target.clone(),
        exporter: args.exporter.clone(),
        prometheus: args.prometheus.clone(),
        release_script: args.release_script.clone(),
        renew_script: args.renew_script.clone(),
        sustain,
        rate: args.rate.unwrap_or(6),
        allow_production: args.allow_production,
        worker_program: None,
    }
}

fn command_error(e: DrillError) -> CommandError {
    match e {
        DrillError::Usage(m) => CommandError::Usage(m),
        other => CommandError::Failed(other.into()),
    }
}

/// `--cleanup`: the keys of interrupted runs removed, and said.
async fn cleanup(config: &crate::config::Config, args: &DrillArgs) -> Result<Status, CommandError> {
    let opts = options(args, None);
    let done = drill::cleanup(config, &opts, args.run.as_deref())
        .await
        .map_err(command_error)?;
    let rendered = match args.format {
        DrillFormat::Json => serde_json::to_string_pretty(&done).context("cannot render the cleanup")? + "\n",
        DrillFormat::Text | DrillFormat::Markdown | DrillFormat::Html => done.text(),
    };
    let _ = std::io::stdout().write_all(rendered.as_bytes());
    Ok(Status::Fine)
}

/// Worker A of a drill, started by `lockwatch drill` as a child process.
pub(super) async fn worker(args: DrillWorkerArgs) -> Result<Status, CommandError> {
    let config = super::load(&args.config, None)?;
    drill::worker_main(
        &config,
        &args.target,
        args.namespace,
        args.exporter,
        args.key,
        args.via,
        args.parent,
    )
    .await
    .map_err(anyhow::Error::from)?;
    Ok(Status::Fine)
}
