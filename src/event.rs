//! The vocabulary of lock events: which operation (`op`) ended how (`outcome`).
//!
//! These are the only values the `op` and `outcome` labels take; config rules, log
//! classification and pushes all speak in these terms.

use std::fmt;
use std::str::FromStr;

/// What the application tried to do with a lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Acquire,
    Release,
    Renew,
    Write,
}

/// How it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    Ok,
    NotOwned,
    Busy,
    Timeout,
    Error,
    StaleFence,
}

impl Op {
    pub const ALL: [Op; 4] = [Op::Acquire, Op::Release, Op::Renew, Op::Write];
    /// Position in `ALL`.
    pub fn index(self) -> usize {
        self as usize
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Acquire => "acquire",
            Op::Release => "release",
            Op::Renew => "renew",
            Op::Write => "write",
        }
    }
}

impl Outcome {
    pub const ALL: [Outcome; 6] = [
        Outcome::Ok,
        Outcome::NotOwned,
        Outcome::Busy,
        Outcome::Timeout,
        Outcome::Error,
        Outcome::StaleFence,
    ];
    /// Position in `ALL`.
    pub fn index(self) -> usize {
        self as usize
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::NotOwned => "not_owned",
            Outcome::Busy => "busy",
            Outcome::Timeout => "timeout",
            Outcome::Error => "error",
            Outcome::StaleFence => "stale_fence",
        }
    }
}

/// A value outside the vocabulary; the message lists what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{given}` is not one of {allowed}")]
pub struct UnknownValue {
    pub given: String,
    pub allowed: String,
}

fn parse_from<T: Copy>(s: &str, all: &[T], name: impl Fn(T) -> &'static str) -> Result<T, UnknownValue> {
    all.iter().copied().find(|v| name(*v) == s).ok_or_else(|| UnknownValue {
        given: s.to_string(),
        allowed: all.iter().map(|v| name(*v)).collect::<Vec<_>>().join(", "),
    })
}

impl FromStr for Op {
    type Err = UnknownValue;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_from(s, &Op::ALL, Op::as_str)
    }
}

impl FromStr for Outcome {
    type Err = UnknownValue;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_from(s, &Outcome::ALL, Outcome::as_str)
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_lists_allowed_values() {
        for op in Op::ALL {
            assert_eq!(op.as_str().parse::<Op>(), Ok(op));
        }
        for o in Outcome::ALL {
            assert_eq!(o.as_str().parse::<Outcome>(), Ok(o));
        }
        for (i, op) in Op::ALL.iter().enumerate() {
            assert_eq!(op.index(), i);
        }
        for (i, o) in Outcome::ALL.iter().enumerate() {
            assert_eq!(o.index(), i);
        }
        let err = "steal".parse::<Op>().unwrap_err();
        assert_eq!(err.to_string(), "`steal` is not one of acquire, release, renew, write");
    }
}
