//! `lockwatch drill`: ask before running against a target (unless `--yes` or
//! `--interactive`), run the drill — rolled back on SIGINT, SIGTERM, SIGHUP and SIGQUIT
//! alike —, print the report in the asked format and write the record (HTML for a `.html`
//! or `.htm` file, else markdown); exit 1 on any
//! deviation or interruption. `--cleanup` removes what interrupted runs left. Also the
//! hidden `drill-worker` (worker A). `--freeze` is `freeze`'s.

use std::io::{IsTerminal, Write};

use anyhow::Context;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

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
    output(&report, args.format, args.report.as_deref())?;
    Ok(if report.passed() {
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

/// Ask `question` at the terminal; anything but `y` (or no terminal: `without`) is a usage error.
pub(super) fn confirm(question: &str, without: &str) -> Result<(), CommandError> {
    if !std::io::stdin().is_terminal() {
        return Err(CommandError::Usage(without.into()));
    }
    eprint!("{question} [y/N] ");
    let mut answer = String::new();
    std::io::stdin()
        .read_line(&mut answer)
        .context("cannot read the answer")?;
    if !answer.trim().eq_ignore_ascii_case("y") {
        return Err(CommandError::Usage("not run: the drill was not confirmed".into()));
    }
    Ok(())
}

/// A drill's record: its facts (JSON) and its document (text, markdown, HTML).
pub(super) trait Record: serde::Serialize {
    fn document(&self) -> crate::document::Document;
}

impl Record for drill::Report {
    fn document(&self) -> crate::document::Document {
        drill::Report::document(self)
    }
}

impl Record for drill::freeze::FreezeReport {
    fn document(&self) -> crate::document::Document {
        drill::freeze::FreezeReport::document(self)
    }
}

/// Print the report in `format` (a closed stdout is no error) and write the record to
/// `path`: HTML for a name ending in `.html` / `.htm`, text for `.txt`, else markdown.
pub(super) fn output(report: &impl Record, format: DrillFormat, path: Option<&std::path::Path>) -> anyhow::Result<()> {
    let doc = report.document();
    let rendered = match format {
        DrillFormat::Text => doc.text(),
        DrillFormat::Json => serde_json::to_string_pretty(report).context("cannot render the report")? + "\n",
        DrillFormat::Markdown => doc.markdown(),
        DrillFormat::Html => doc.html(),
    };
    // A closed stdout (the terminal hung up) must not turn a rolled-back run into a panic.
    let _ = std::io::stdout().write_all(rendered.as_bytes());
    if let Some(path) = path {
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("")
            .to_ascii_lowercase();
        let record = match ext.as_str() {
            "html" | "htm" => doc.html(),
            "txt" | "text" => doc.text(),
            _ => doc.markdown(),
        };
        std::fs::write(path, record).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// Cancel `token` on SIGINT, SIGTERM, SIGHUP or SIGQUIT, saying which: each ends the run the
/// same way, with its rollback. Later signals are taken and ignored, so the rollback ends.
pub(super) fn cancel_on_signals(token: &CancellationToken) -> anyhow::Result<()> {
    let kinds = [
        (SignalKind::interrupt(), "SIGINT"),
        (SignalKind::terminate(), "SIGTERM"),
        (SignalKind::hangup(), "SIGHUP"),
        (SignalKind::quit(), "SIGQUIT"),
    ];
    for (kind, name) in kinds {
        let mut signals = signal(kind).with_context(|| format!("cannot handle {name}"))?;
        let token = token.clone();
        tokio::spawn(async move {
            while signals.recv().await.is_some() {
                if !token.is_cancelled() {
                    let _ = writeln!(std::io::stderr(), "\n{name} received");
                    token.cancel();
                }
            }
        });
    }
    Ok(())
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
