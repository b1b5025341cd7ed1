//! `discover` output: text (what was walked, the lock patterns, their fencing counters,
//! what is not a lock and why, then the config), `toml` (only the `[[namespace]]` entries)
//! or `json` (the whole report, the config under `toml`).

use std::io::{self, Write};

use super::judge::{Pattern, Verdict, show_ms};
use super::{Report, Walked};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Toml,
    Json,
}

pub fn render(r: &Report, format: Format, out: &mut impl Write) -> io::Result<()> {
    match format {
        Format::Toml => out.write_all(config(r).as_bytes()),
        Format::Json => {
            #[derive(serde::Serialize)]
            struct WithToml<'a> {
                #[serde(flatten)]
                report: &'a Report,
                toml: String,
            }
            let body = WithToml {
                report: r,
                toml: config(r),
            };
            serde_json::to_writer_pretty(&mut *out, &body).map_err(io::Error::other)?;
            writeln!(out)
        }
        Format::Text => text(r, out),
    }
}

fn text(r: &Report, out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "target {} ({})", r.target, r.url)?;
    writeln!(out, "{}", walked(&r.walked))?;
    let section = |v: Verdict| r.patterns.iter().filter(move |p| p.verdict == v);
    writeln!(out, "\nLocks")?;
    if section(Verdict::Lock).next().is_none() {
        writeln!(out, "  none found in the keys sampled")?;
    }
    for p in section(Verdict::Lock) {
        line(p, out)?;
    }
    if section(Verdict::FenceCounter).next().is_some() {
        writeln!(out, "\nFencing counters")?;
        for p in section(Verdict::FenceCounter) {
            line(p, out)?;
        }
    }
    if section(Verdict::NotALock).next().is_some() {
        writeln!(out, "\nNot locks")?;
        for p in section(Verdict::NotALock) {
            line(p, out)?;
        }
    }
    writeln!(out, "\nConfig (values never printed: patterns and TTLs only)\n")?;
    out.write_all(config(r).as_bytes())
}

fn walked(w: &Walked) -> String {
    let of = if w.complete {
        "the whole keyspace".to_string()
    } else {
        format!("a sample: the walk stopped at the budget of {} keys", w.max_keys)
    };
    format!(
        "walked {} keys of {} on {} primar{} in {} at most {} keys/s ({of})",
        w.keys_scanned,
        w.keys_in_db,
        w.primaries,
        if w.primaries == 1 { "y" } else { "ies" },
        show_ms(i64::try_from(w.elapsed_ms).unwrap_or(i64::MAX)),
        w.rate
    )
}

fn line(p: &Pattern, out: &mut impl Write) -> io::Result<()> {
    let shapes: Vec<String> = p
        .shapes
        .iter()
        .map(|s| format!("{} {}", s.shape.describe(), s.keys))
        .collect();
    let ttl = match &p.ttl {
        Some(t) => format!(
            "TTL {}..{} (p50 {}, p90 {}) on {} of {}",
            show_ms(t.min_ms),
            show_ms(t.max_ms),
            show_ms(t.p50_ms),
            show_ms(t.p90_ms),
            p.with_ttl,
            p.keys
        ),
        None => "no TTL".to_string(),
    };
    writeln!(out, "  {}  {} keys  {}  {ttl}", p.pattern, p.keys, shapes.join(", "))?;
    writeln!(out, "      {}", p.reason)
}

/// The `[[namespace]]` entries of the lock patterns.
pub(super) fn config(r: &Report) -> String {
    let mut s = format!(
        "# lockwatch discover: {} lock pattern(s) in {} keys read of {}; ttl is the longest\n\
         # PTTL seen, rounded up: set it to what the application sets, and add renew_every\n\
         # when holders renew.\n",
        r.patterns.iter().filter(|p| p.namespace.is_some()).count(),
        r.walked.keys_read,
        r.walked.keys_in_db
    );
    for ns in r.patterns.iter().filter_map(|p| p.namespace.as_ref()) {
        s.push_str(&format!(
            "\n[[namespace]]\nname = {}\npattern = {}\nttl = {}\n",
            quote(&ns.name),
            quote(&ns.pattern),
            quote(&ns.ttl)
        ));
        if let Some(v) = ns.value {
            s.push_str(&format!("value = {}\n", quote(v)));
        }
        if let Some(f) = &ns.fence_pattern {
            s.push_str(&format!("fence_pattern = {}\n", quote(f)));
        }
    }
    s
}

/// `s` as a TOML basic string.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
