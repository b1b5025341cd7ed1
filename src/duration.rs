//! Human durations as the config writes them: `250ms`, `5s`, `15m`, `1h30m`, `2d`.
//!
//! Parsing and formatting only; what a duration means (TTL, interval, budget) is the
//! config module's business.

use std::time::Duration;

/// Why a duration string was refused; the message is shown to the operator as is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DurationError {
    #[error("empty duration")]
    Empty,
    #[error("`{0}` is not a duration: write a number followed by a unit (ms, s, m, h, d), e.g. \"30s\" or \"1m30s\"")]
    Invalid(String),
    #[error("`{0}` is too large")]
    Overflow(String),
}

/// Parse a duration such as `30s`, `1m30s`, `250ms` or `2h`. A bare number is refused:
/// a TTL of "30" could mean seconds or milliseconds, and guessing wrong hides incidents.
pub(crate) fn parse(text: &str) -> Result<Duration, DurationError> {
    let s = text.trim();
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    let invalid = || DurationError::Invalid(text.to_string());
    let bytes = s.as_bytes();
    let mut i = 0;
    let mut total_ms: u128 = 0;
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
            i += 1;
        }
        if start == i {
            return Err(invalid());
        }
        let number: f64 = s[start..i].parse().map_err(|_| invalid())?;
        let unit_start = i;
        while i < bytes.len() && bytes[i].is_ascii_alphabetic() {
            i += 1;
        }
        let unit_ms: f64 = match &s[unit_start..i] {
            "ms" => 1.0,
            "s" => 1_000.0,
            "m" => 60_000.0,
            "h" => 3_600_000.0,
            "d" => 86_400_000.0,
            _ => return Err(invalid()),
        };
        let part = number * unit_ms;
        if !part.is_finite() || part > 1e15 {
            return Err(DurationError::Overflow(text.to_string()));
        }
        total_ms += part.round() as u128;
    }
    let ms = u64::try_from(total_ms).map_err(|_| DurationError::Overflow(text.to_string()))?;
    Ok(Duration::from_millis(ms))
}

/// Format a duration the way `parse` reads it, shortest exact form first (`1m30s`, `250ms`).
pub(crate) fn format(d: Duration) -> String {
    let mut ms = d.as_millis();
    if ms == 0 {
        return "0s".to_string();
    }
    let mut out = String::new();
    for (unit, size) in [("d", 86_400_000u128), ("h", 3_600_000), ("m", 60_000), ("s", 1_000)] {
        if ms >= size {
            out.push_str(&format!("{}{unit}", ms / size));
            ms %= size;
        }
    }
    if ms > 0 {
        out.push_str(&format!("{ms}ms"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_compounds() {
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse(" 2d "), Ok(Duration::from_secs(172_800)));
    }

    #[test]
    fn refuses_bare_numbers_and_unknown_units() {
        assert!(matches!(parse("30"), Err(DurationError::Invalid(_))));
        assert!(matches!(parse("30sec"), Err(DurationError::Invalid(_))));
        assert!(matches!(parse("s"), Err(DurationError::Invalid(_))));
        assert!(matches!(parse("-1s"), Err(DurationError::Invalid(_))));
        assert_eq!(parse(""), Err(DurationError::Empty));
        assert!(matches!(parse("99999999999999d"), Err(DurationError::Overflow(_))));
    }

    #[test]
    fn format_round_trips() {
        for s in ["1m30s", "250ms", "2h", "1d1h1m1s1ms", "0s"] {
            assert_eq!(format(parse(s).unwrap()), s);
        }
    }
}
