//! `lockwatch classify`: read log lines from a file or stdin and print, per record (a line,
//! or a line with its traceback), the lock event it maps to or why it was ignored; with
//! `--summary`, only the counts.

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
        let tally = intake::print::tally(&classifier, input, format, args.multiline).map_err(anyhow::Error::from)?;
        intake::print::summary(&classifier, &tally, &mut out).map_err(anyhow::Error::from)?;
        let [matched, ignored, malformed] = tally.lines;
        let events: u64 = tally.events().map(|(.., n)| n).sum();
        eprintln!(
            "{} lines: {events} lock events ({matched} lines), {ignored} lines ignored, {malformed} malformed",
            tally.total()
        );
        return Ok(Status::Fine);
    }
    let totals =
        intake::print::run(&classifier, input, format, args.multiline, &mut out).map_err(anyhow::Error::from)?;
    eprintln!(
        "{} lines, {} records: {} lock events, {} ignored, {} malformed",
        totals.lines, totals.records, totals.events, totals.ignored, totals.malformed
    );
    Ok(Status::Fine)
}
