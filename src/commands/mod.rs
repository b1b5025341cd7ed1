//! The subcommands, one file each: each turns its parsed arguments into work done by the
//! library's parts and answers with an exit status. `CommandError` is the one error type
//! of the edge, and `exit_code` the one place where outcomes become 0, 1 or 2.

mod advise;
mod check_config;
mod check_grants;
mod check_nodes;
mod check_notify;
mod classify;
mod demo;
mod discover;
mod drill;
mod drill_io;
mod freeze;
mod inspect;
mod rules;
mod serve;

use std::process::ExitCode;

use crate::cli::{Command, LogFormat};
use crate::config::{Config, ConfigError};

/// How a command that ran went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// 0: done, or the thing checked is healthy.
    Fine,
    /// 1: the thing checked is unhealthy (a drill deviation, a missing key, a failed check).
    Unhealthy,
    /// 3: a freeze drill could not confirm the thaw: something may still be frozen.
    LeftFrozen,
}

/// Why a command could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// 2: the request cannot be served as asked (a flag, a name, a missing terminal).
    #[error("{0}")]
    Usage(String),
    /// 2: the config file is not valid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// 1: the work itself failed (Redis unreachable, a file not writable…).
    #[error(transparent)]
    Failed(#[from] anyhow::Error),
    /// 3: a freeze drill failed and could not thaw what it froze.
    #[error("{0}")]
    LeftFrozen(String),
}

/// The exit status of a command's result: 0 fine, 1 unhealthy or failed, 2 usage or config,
/// 3 something a freeze drill froze may still be frozen.
pub fn exit_code(result: &Result<Status, CommandError>) -> ExitCode {
    match result {
        Ok(Status::Fine) => ExitCode::SUCCESS,
        // A config error found on the way (the demo's own config…) is still a config error.
        Err(CommandError::Failed(e)) if e.chain().any(|c| c.is::<ConfigError>()) => ExitCode::from(2),
        Ok(Status::Unhealthy) | Err(CommandError::Failed(_)) => ExitCode::from(1),
        Err(CommandError::Usage(_) | CommandError::Config(_)) => ExitCode::from(2),
        Ok(Status::LeftFrozen) | Err(CommandError::LeftFrozen(_)) => ExitCode::from(3),
    }
}

/// The error as one line: its message, then each cause after a colon.
pub fn describe(e: &CommandError) -> String {
    let mut out = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        // Some errors repeat their cause's words in their own message: say them once.
        let text = c.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        cause = c.source();
    }
    out
}

/// Run `command` to its end.
pub async fn run(command: Command) -> Result<Status, CommandError> {
    match command {
        Command::Serve(args) => serve::run(args).await,
        Command::CheckConfig(args) => check_config::command(args).await,
        Command::Inspect(args) => inspect::run(args).await,
        Command::Classify(args) => classify::run(args),
        Command::Rules(args) => rules::run(args),
        Command::Advise(args) => advise::run(args).await,
        Command::Discover(args) => discover::run(args).await,
        Command::Drill(args) => drill::run(*args).await,
        Command::DrillWorker(args) => drill::worker(args).await,
        Command::DrillWatchdog(args) => freeze::watchdog(args).await,
        Command::Demo(args) => demo::run(args).await,
    }
}

/// Set up logging to stderr: text (coloured only at a terminal) or JSON lines.
pub fn init_tracing(format: LogFormat, level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_new(level).unwrap_or_else(|e| {
        eprintln!("lockwatch: bad --log-level `{level}` ({e}); using info");
        tracing_subscriber::EnvFilter::new("info")
    });
    // Colours only for a person at a terminal: never in files, pipes or journald.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr()) && std::env::var_os("NO_COLOR").is_none();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}

/// Load the config named by a command's `-c` and overrides.
fn load(args: &crate::cli::ConfigArgs, listen: Option<String>) -> Result<Config, CommandError> {
    Ok(Config::load(config_path(args)?, &args.overrides(listen))?)
}

/// The `-c` path, which every command but `drill --thaw` needs.
fn config_path(args: &crate::cli::ConfigArgs) -> Result<&std::path::Path, CommandError> {
    args.config
        .as_deref()
        .ok_or_else(|| CommandError::Usage("--config (-c, or LOCKWATCH_CONFIG) is required: the config file".into()))
}

/// Load the config as `serve` runs it: with `--web.config.file` too (`serve`, `check-config`).
fn load_served(
    args: &crate::cli::ConfigArgs,
    listen: Option<String>,
    web_config_file: Option<std::path::PathBuf>,
) -> Result<Config, CommandError> {
    let mut overrides = args.overrides(listen);
    overrides.web_config_file = web_config_file;
    Ok(Config::load(config_path(args)?, &overrides)?)
}
