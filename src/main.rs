//! The `lockwatch` binary: parse arguments, set up logging, dispatch, map errors to exit
//! codes (0 fine, 1 unhealthy or failed, 2 usage or config error).

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use lockwatch::cli::{Cli, Command, LogFormat};
use lockwatch::config::{Config, ConfigError};
use lockwatch::{check_config, demo, drill, inspect, intake, rules, serve};

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing(cli.log_format, &cli.log_level);
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("lockwatch: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(dispatch(cli.command)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("lockwatch: {e:#}");
            if e.chain().any(|c| c.is::<ConfigError>() || c.is::<UsageError>()) {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

async fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Serve(args) => {
            let config = Config::load(&args.config.config, &args.config.overrides(args.listen.clone()))?;
            let listen = config.server.listen;
            let listener = tokio::net::TcpListener::bind(listen)
                .await
                .with_context(|| format!("cannot listen on {listen}"))?;
            serve::run(listener, config, serve::shutdown_on_signals()).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::CheckConfig(args) => {
            let config = Config::load(&args.config.config, &args.config.overrides(None))?;
            let healthy = check_config::run(&config, args.connect, &mut std::io::stdout()).await?;
            Ok(if healthy { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        Command::Inspect(args) => {
            let config = Config::load(&args.config.config, &args.config.overrides(None))?;
            let report = inspect::run(
                &config,
                &inspect::Request {
                    key: args.key.clone(),
                    namespace: args.namespace.clone(),
                    target: args.target.clone(),
                    show_owner: args.show_owner,
                    exporter: args.exporter.clone(),
                    limit: args.limit,
                },
            )
            .await
            .map_err(|e| match e {
                inspect::InspectError::Redis { .. } | inspect::InspectError::Timeout { .. } => anyhow::Error::new(e),
                usage => anyhow::Error::new(UsageError(usage.to_string())),
            })?;
            let mut out = std::io::stdout().lock();
            match &report {
                inspect::Report::Key(k) => inspect::render_key(k, args.format, &mut out)?,
                inspect::Report::Namespace(n) => inspect::render_namespace(n, args.format, &mut out)?,
            }
            Ok(if report.healthy() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Classify(args) => {
            let config = Config::load(&args.config.config, &args.config.overrides(None))?;
            let format = parse_log_format(&args.input_format)?;
            let classifier = intake::Classifier::new(&config)?;
            let mut out = std::io::stdout().lock();
            if args.summary {
                let input: Box<dyn std::io::Read> = if args.file.as_os_str() == "-" {
                    Box::new(std::io::stdin().lock())
                } else {
                    Box::new(
                        std::fs::File::open(&args.file)
                            .with_context(|| format!("cannot read {}", args.file.display()))?,
                    )
                };
                let tally = intake::print::tally(&classifier, input, format)?;
                intake::print::summary(&classifier, &tally, &mut out)?;
                let [matched, ignored, malformed] = tally.lines;
                eprintln!(
                    "{} lines: {matched} lock events, {ignored} ignored, {malformed} malformed",
                    tally.total()
                );
                return Ok(ExitCode::SUCCESS);
            }
            let totals = if args.file.as_os_str() == "-" {
                intake::print::run(&classifier, std::io::stdin().lock(), format, &mut out)?
            } else {
                let file =
                    std::fs::File::open(&args.file).with_context(|| format!("cannot read {}", args.file.display()))?;
                intake::print::run(&classifier, std::io::BufReader::new(file), format, &mut out)?
            };
            eprintln!(
                "{} lines: {} lock events, {} ignored, {} malformed",
                totals.lines, totals.events, totals.ignored, totals.malformed
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Rules(args) => {
            let config = Config::load(&args.config.config, &args.config.overrides(None))?;
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
                None => {
                    use std::io::Write;
                    std::io::stdout().lock().write_all(files.combined.as_bytes())?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Drill(args) => run_drill(args).await,
        Command::DrillWorker(args) => {
            let config = Config::load(&args.config.config, &args.config.overrides(None))?;
            drill::worker_main(&config, &args.target, args.namespace, args.exporter).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Demo(args) => {
            demo::run(&args, serve::shutdown_on_signals()).await?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

async fn run_drill(args: lockwatch::cli::DrillArgs) -> anyhow::Result<ExitCode> {
    use std::io::IsTerminal;
    let config = Config::load(&args.config.config, &args.config.overrides(None))?;
    let sustain = match &args.sustain {
        None => None,
        Some(s) => Some(lockwatch::duration::parse(s).map_err(|e| UsageError(format!("--sustain `{s}`: {e}")))?),
    };
    if !args.yes && !args.interactive {
        if !std::io::stdin().is_terminal() {
            return Err(UsageError("pass --yes to run the drill without a terminal, or --interactive".into()).into());
        }
        eprint!("run the drill against the config's target? [y/N] ");
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer)?;
        if !answer.trim().eq_ignore_ascii_case("y") {
            eprintln!("not run");
            return Ok(ExitCode::from(2));
        }
    }
    let opts = drill::Options {
        config_path: args.config.config.clone(),
        namespace: args.namespace.clone(),
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
            drill::DrillError::Usage(m) => anyhow::Error::new(UsageError(m)),
            other => anyhow::Error::new(other),
        })?;
    let rendered = match args.format {
        lockwatch::cli::DrillFormat::Text => report.text(),
        lockwatch::cli::DrillFormat::Json => serde_json::to_string_pretty(&report)? + "\n",
        lockwatch::cli::DrillFormat::Markdown => report.markdown(),
    };
    print!("{rendered}");
    if let Some(path) = &args.report {
        std::fs::write(path, report.markdown()).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn parse_log_format(s: &str) -> Result<lockwatch::config::LogFormat, UsageError> {
    use lockwatch::config::LogFormat;
    Ok(match s {
        "auto" => LogFormat::Auto,
        "json" => LogFormat::Json,
        "logfmt" => LogFormat::Logfmt,
        "text" => LogFormat::Text,
        other => {
            return Err(UsageError(format!(
                "--as `{other}`: expected auto, json, logfmt or text"
            )));
        }
    })
}

/// A request that cannot be served as asked: exit 2, like a config error.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct UsageError(String);

fn init_tracing(format: LogFormat, level: &str) {
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
