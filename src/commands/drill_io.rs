//! What the drill commands share at the terminal and on disk: the question before a run
//! (`confirm`), the signals that cancel it (`cancel_on_signals`), and its report printed in
//! the asked format and recorded by the file's extension (`Record`, `output`). Running the
//! drills is left to `drill` and `freeze`.

use std::io::{IsTerminal, Write};

use anyhow::Context;
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

use super::CommandError;
use crate::cli::{DrillArgs, DrillFormat};
use crate::document::Document;
use crate::drill;

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
    fn document(&self) -> Document;
}

impl Record for drill::Report {
    fn document(&self) -> Document {
        drill::Report::document(self)
    }
}

impl Record for drill::freeze::FreezeReport {
    fn document(&self) -> Document {
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

/// The name the result is recorded under, checked before anything runs; `None` when it is
/// not recorded (no --exporter, or --no-record).
pub(super) fn record_name(args: &DrillArgs) -> Result<Option<String>, CommandError> {
    if args.exporter.is_none() || args.no_record {
        return Ok(None);
    }
    let name = args.name.clone().unwrap_or_else(|| args.namespace.clone());
    match crate::drills::results::valid_name(&name) {
        true => Ok(Some(name)),
        false => Err(CommandError::Usage(format!(
            "--name `{name}` is not a drill's name: use 1-64 characters from A-Z a-z 0-9 _ - . :, the first a letter or a digit"
        ))),
    }
}

/// Record the result at --exporter under `name` (`None`: not recorded), with the push token
/// of --push-token-file, else the config's, else the URL's credentials; and say where it
/// is. Whether it was recorded (a failure is said).
pub(super) async fn record(
    args: &DrillArgs,
    config: &crate::config::Config,
    name: Option<&str>,
    make: impl FnOnce(&str, u64) -> Result<crate::drills::results::Record, drill::result::NotRecorded>,
) -> bool {
    let (Some(name), Some(exporter)) = (name, &args.exporter) else {
        return true;
    };
    let ended = u64::try_from(crate::locks::recent::wall_ms()).unwrap_or(0);
    let sent = match make(name, ended) {
        Ok(record) => {
            let token = config.server.push_token.as_ref().map(|t| t.expose());
            drill::result::send(exporter, args.push_token_file.as_deref(), token, &record).await
        }
        Err(e) => Err(e),
    };
    match sent {
        Ok(at) => {
            eprintln!("recorded: {at}");
            true
        }
        Err(e) => {
            eprintln!("lockwatch: {e}");
            false
        }
    }
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
