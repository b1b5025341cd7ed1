//! `lockwatch rules`: render the recording and alerting rules with this config's
//! thresholds, to a directory (two files) or stdout (one).

use std::io::Write;

use anyhow::Context;

use super::{CommandError, Status};
use crate::cli::RulesArgs;
use crate::rules;

pub(super) fn run(args: RulesArgs) -> Result<Status, CommandError> {
    let config = super::load(&args.config, None)?;
    let files = rules::render(&config);
    match &args.out {
        Some(dir) => {
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
        None => std::io::stdout()
            .lock()
            .write_all(files.combined.as_bytes())
            .context("cannot write to stdout")?,
    }
    Ok(Status::Fine)
}
