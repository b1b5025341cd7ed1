//! `lockwatch classify`: read log lines from a file or stdin and print, per line, the lock
//! event it maps to or why it was ignored; with `--summary`, only the counts.

use std::io::Read;

use anyhow::Context;

use super::{CommandError, Status};
use crate::cli::ClassifyArgs;
use crate::intake::{self, Classifier};

pub(super) fn run(args: ClassifyArgs) -> Result<Status, CommandError> {
    let config = super::load(&args.config, None)?;
    let format = args.input_format;
    let classifier = Classifier::new(&config).map_err(anyhow::Error::from)?;
    let mut out = std::io::stdout().lock();
    let input: Box<dyn Read> = if args.file.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::fs::File::open(&args.file).with_context(|| format!("cannot read {}", args.file.display()))?)
    };
    if args.summary {
        let tally = intake::print::tally(&classifier, input, format).map_err(anyhow::Error::from)?;
        intake::print::summary(&classifier, &tally, &mut out).map_err(anyhow::Error::from)?;
        let [matched, ignored, malformed] = tally.lines;
        eprintln!(
            "{} lines: {matched} lock events, {ignored} ignored, {malformed} malformed",
            tally.total()
        );
        return Ok(Status::Fine);
    }
    let totals = intake::print::run(&classifier, std::io::BufReader::new(input), format, &mut out)
        .map_err(anyhow::Error::from)?;
    eprintln!(
        "{} lines: {} lock events, {} ignored, {} malformed",
        totals.lines, totals.events, totals.ignored, totals.malformed
    );
    Ok(Status::Fine)
}
