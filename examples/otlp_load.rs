//! The OTLP side of `make bench`'s shippers section: the first LINES lines of the generated
//! log (`gen_log`), each one OTLP log record with the line as its string body, encoded as
//! protobuf `ExportLogsServiceRequest`s of BATCH records before the clock starts, then
//! POSTed to `/v1/logs` with IN_FLIGHT requests at a time until `/metrics` counts every
//! record under `source="otlp"`. Prints the seconds from the first request to that.
//!
//! Usage: cargo run --release --example otlp_load -- ADDR LOG LINES [BATCH] [IN_FLIGHT]

use std::io::BufRead;
use std::time::{Duration, Instant};

use prost::Message;

#[derive(Clone, PartialEq, prost::Message)]
struct Request {
    #[prost(message, repeated, tag = "1")]
    resource_logs: Vec<ResourceLogs>,
}
#[derive(Clone, PartialEq, prost::Message)]
struct ResourceLogs {
    #[prost(message, repeated, tag = "2")]
    scope_logs: Vec<ScopeLogs>,
}
#[derive(Clone, PartialEq, prost::Message)]
struct ScopeLogs {
    #[prost(message, repeated, tag = "2")]
    log_records: Vec<LogRecord>,
}
#[derive(Clone, PartialEq, prost::Message)]
struct LogRecord {
    #[prost(fixed64, tag = "1")]
    time_unix_nano: u64,
    #[prost(int32, tag = "2")]
    severity_number: i32,
    #[prost(message, optional, tag = "5")]
    body: Option<AnyValue>,
}
#[derive(Clone, PartialEq, prost::Message)]
struct AnyValue {
    #[prost(string, tag = "1")]
    string_value: String,
}

fn counted(m: &str) -> u64 {
    m.lines()
        .filter(|l| l.starts_with("lockwatch_log_lines_total{") && l.contains("source=\"otlp\""))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum::<f64>() as u64
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [addr, log, lines, rest @ ..] = &args[..] else {
        eprintln!("usage: otlp_load ADDR LOG LINES [BATCH] [IN_FLIGHT]");
        std::process::exit(2);
    };
    let lines: usize = lines.parse()?;
    let batch: usize = rest.first().map_or(Ok(512), |b| b.parse())?;
    let in_flight: usize = rest.get(1).map_or(Ok(4), |b| b.parse())?;
    let file = std::io::BufReader::new(std::fs::File::open(log)?);
    let mut bodies = Vec::new();
    let mut records = Vec::with_capacity(batch);
    let mut flush = |records: &mut Vec<LogRecord>| {
        let req = Request {
            resource_logs: vec![ResourceLogs {
                scope_logs: vec![ScopeLogs {
                    log_records: std::mem::take(records),
                }],
            }],
        };
        bodies.push(req.encode_to_vec());
    };
    for (i, line) in file.lines().take(lines).enumerate() {
        records.push(LogRecord {
            time_unix_nano: 1_763_719_200_000_000_000 + i as u64,
            severity_number: 9,
            body: Some(AnyValue { string_value: line? }),
        });
        if records.len() == batch {
            flush(&mut records);
        }
    }
    if !records.is_empty() {
        flush(&mut records);
    }
    let client = reqwest::Client::new();
    let url = format!("http://{addr}/v1/logs");
    let started = Instant::now();
    let mut queue = bodies.into_iter();
    let mut running = tokio::task::JoinSet::new();
    loop {
        while running.len() < in_flight {
            let Some(body) = queue.next() else { break };
            let req = client
                .post(&url)
                .header("content-type", "application/x-protobuf")
                .body(body);
            running.spawn(async move { req.send().await.map(|r| r.status()) });
        }
        match running.join_next().await {
            Some(done) => {
                let status = done??;
                if !status.is_success() {
                    return Err(format!("/v1/logs answered {status}").into());
                }
            }
            None => break,
        }
    }
    let metrics = format!("http://{addr}/metrics");
    loop {
        if counted(&client.get(&metrics).send().await?.text().await?) >= lines as u64 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    println!("{:.3}", started.elapsed().as_secs_f64());
    Ok(())
}
