//! `lockwatch rules`: render the recording and alerting rules with this config's
//! thresholds, as rule files (to a directory, or both groups as one file on stdout) or as
//! one Prometheus Operator `PrometheusRule`.

use std::io::Write;
use std::path::Path;

use anyhow::Context;

use super::{CommandError, Status};
use crate::cli::RulesArgs;
use crate::rules::{self, Format};

pub(super) fn run(args: RulesArgs) -> Result<Status, CommandError> {
    let config = super::load(&args.config, None)?;
    let files = rules::render(&config);
    match (&args.out, args.format) {
        (Some(dir), Format::Prometheus) => {
            files
                .write(dir)
                .with_context(|| format!("cannot write rule files to {}", dir.display()))?;
            eprintln!(
                "wrote {} and {} in {}",
                rules::RECORDING_FILE,
                rules::ALERTS_FILE,
                dir.display()
            );
        }
        (Some(dir), Format::PrometheusOperator) => {
            write_one(dir, rules::PROMETHEUS_RULE_FILE, &files.prometheus_rule)?;
            eprintln!("wrote {} in {}", rules::PROMETHEUS_RULE_FILE, dir.display());
        }
        (None, format) => {
            let text = match format {
                Format::Prometheus => &files.combined,
                Format::PrometheusOperator => &files.prometheus_rule,
            };
            std::io::stdout()
                .lock()
                .write_all(text.as_bytes())
                .context("cannot write to stdout")?
        }
    }
    Ok(Status::Fine)
}

fn write_one(dir: &Path, name: &str, text: &str) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(dir.join(name), text))
        .with_context(|| format!("cannot write {name} to {}", dir.display()))
}
