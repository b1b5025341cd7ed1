//! `lockwatch drill`: ask before running against a target (unless `--yes` or
//! `--interactive`), run the drill, print the report in the asked format and write the
//! record; exit 1 on any deviation. Also the hidden `drill-worker` (worker A).

use std::io::IsTerminal;

use anyhow::Context;

use super::{CommandError, Status};
use crate::cli::{DrillArgs, DrillFormat, DrillWorkerArgs};
use crate::drill::{self, DrillError};

pub(super) async fn run(args: DrillArgs) -> Result<Status, CommandError> {
    let config = super::load(&args.config, None)?;
    let sustain = match &args.sustain {
        None => None,
        Some(s) => Some(crate::duration::parse(s).map_err(|e| CommandError::Usage(format!("--sustain `{s}`: {e}")))?),
    };
    if !args.yes && !args.interactive {
        if !std::io::stdin().is_terminal() {
            return Err(CommandError::Usage(
                "pass --yes to run the drill without a terminal, or --interactive".into(),
            ));
        }
        eprint!("run the drill against the config's target? [y/N] ");
        let mut answer = String::new();
        std::io::stdin()
            .read_line(&mut answer)
            .context("cannot read the answer")?;
        if !answer.trim().eq_ignore_ascii_case("y") {
            return Err(CommandError::Usage("not run: the drill was not confirmed".into()));
        }
    }
    let opts = drill::Options {
        config_path: args.config.config.clone(),
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
    };
    let mut narrator = drill::narrator::console(args.interactive, std::io::stderr().is_terminal());
    // Ctrl-C stops the scenario; the drill still rolls back and reports.
    let cancel = tokio_util::sync::CancellationToken::new();
    let on_ctrl_c = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_ctrl_c.cancel();
        }
    });
    let report = drill::run(&config, &opts, narrator.as_mut(), cancel)
        .await
        .map_err(|e| match e {
            DrillError::Usage(m) => CommandError::Usage(m),
            other => CommandError::Failed(other.into()),
        })?;
    let rendered = match args.format {
        DrillFormat::Text => report.text(),
        DrillFormat::Json => serde_json::to_string_pretty(&report).context("cannot render the report")? + "\n",
        DrillFormat::Markdown => report.markdown(),
    };
    print!("{rendered}");
    if let Some(path) = &args.report {
        std::fs::write(path, report.markdown()).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(if report.passed() {
        Status::Fine
    } else {
        Status::Unhealthy
    })
}

/// Worker A of a drill, started by `lockwatch drill` as a child process.
pub(super) async fn worker(args: DrillWorkerArgs) -> Result<Status, CommandError> {
    let config = super::load(&args.config, None)?;
    drill::worker_main(&config, &args.target, args.namespace, args.exporter, args.key, args.via)
        .await
        .map_err(anyhow::Error::from)?;
    Ok(Status::Fine)
}
