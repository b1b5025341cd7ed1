//! RESP frames as a subscribed connection receives them, parsed in place: a `pmessage`
//! (RESP2 array or RESP3 push) as three slices of the buffer, the confirmations of
//! `PSUBSCRIBE` / `PUNSUBSCRIBE`, the answer of `PING`, errors, and anything else skipped
//! whole (a `HELLO` map, an attribute). Garbage is an error, never a panic; nesting and
//! lengths are bounded by the buffer, not by what a frame claims.

/// One frame, borrowing from the buffer it was parsed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Frame<'a> {
    /// A message published to a channel matching a pattern of ours.
    PMessage {
        pattern: &'a [u8],
        channel: &'a [u8],
        payload: &'a [u8],
    },
    /// A message of a channel subscribed by name (`SUBSCRIBE`, never sent here: skipped).
    Message,
    /// A `psubscribe` / `punsubscribe` / `subscribe` / `unsubscribe` confirmation: the
    /// pattern or channel (`None`: an unsubscribe with nothing left) and the count after it.
    Subscription {
        kind: &'a [u8],
        name: Option<&'a [u8]>,
        count: i64,
    },
    /// `PING`'s answer: `pong` in RESP2's subscribed array, `+PONG` in RESP3.
    Pong,
    /// An error reply (`-…` or RESP3's blob error `!…`), its text.
    Error(&'a [u8]),
    /// A simple string (`+OK` to `AUTH`).
    Simple(&'a [u8]),
    /// Any other complete frame, skipped (a `HELLO` map, a number, an attribute…).
    Other,
}

/// The bytes are no RESP.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a RESP frame at byte {at}: {what}")]
pub struct FrameError {
    pub at: usize,
    pub what: &'static str,
}

/// The type bytes of RESP2 and RESP3.
const TYPES: &[u8] = b"+-:$*_,#(!=%~|>";

/// Elements a skipped frame may hold, nested included (a `HELLO` map has about 16).
const MAX_SKIPPED: u64 = 1 << 20;

/// Parse the frame at the start of `buf`: the frame and the bytes it took, `Ok(None)` when
/// `buf` holds only part of it.
pub(crate) fn parse(buf: &[u8]) -> Result<Option<(Frame<'_>, usize)>, FrameError> {
    let Some((&kind, _)) = buf.split_first() else {
        return Ok(None);
    };
    if !TYPES.contains(&kind) {
        return Err(FrameError {
            at: 0,
            what: "an unknown frame type",
        });
    }
    let Some((line, mut at)) = line(buf, 1)? else {
        return Ok(None);
    };
    match kind {
        b'*' | b'>' => {
            let n = integer(line, 1)?;
            if n <= 0 {
                return Ok(Some((Frame::Other, at))); // a nil or empty array
            }
            if buf.get(at).is_some_and(|&b| b != b'$') {
                // Not a pub/sub frame (they begin with their kind): skipped whole.
                return Ok(skip(buf, at, n as u64)?.map(|end| (Frame::Other, end)));
            }
            // A pub/sub frame: a kind, then bulk strings and at most one integer.
            let Some((head, after)) = bulk(buf, at)? else {
                return Ok(None);
            };
            let frame = match (head, n) {
                (Some(k), 4) if k.eq_ignore_ascii_case(b"pmessage") => {
                    let Some((pattern, a)) = bulk(buf, after)? else {
                        return Ok(None);
                    };
                    let Some((channel, b)) = bulk(buf, a)? else {
                        return Ok(None);
                    };
                    let Some((payload, c)) = bulk(buf, b)? else {
                        return Ok(None);
                    };
                    at = c;
                    match (pattern, channel, payload) {
                        (Some(pattern), Some(channel), Some(payload)) => Frame::PMessage {
                            pattern,
                            channel,
                            payload,
                        },
                        _ => {
                            return Err(FrameError {
                                at,
                                what: "a pmessage with a nil part",
                            });
                        }
                    }
                }
                (Some(k), 3) if is_subscription(k) => {
                    let Some((name, a)) = bulk(buf, after)? else {
                        return Ok(None);
                    };
                    let Some((count, b)) = int_frame(buf, a)? else {
                        return Ok(None);
                    };
                    at = b;
                    Frame::Subscription { kind: k, name, count }
                }
                (Some(k), 2) if k.eq_ignore_ascii_case(b"pong") => {
                    let Some((_, a)) = bulk(buf, after)? else {
                        return Ok(None);
                    };
                    at = a;
                    Frame::Pong
                }
                _ => {
                    // Not one of ours: skip the rest of the elements whatever they are.
                    let Some(end) = skip(buf, after, n as u64 - 1)? else {
                        return Ok(None);
                    };
                    at = end;
                    if head.is_some_and(|k| k.eq_ignore_ascii_case(b"message")) {
                        Frame::Message
                    } else {
                        Frame::Other
                    }
                }
            };
            Ok(Some((frame, at)))
        }
        b'+' if line.eq_ignore_ascii_case(b"pong") => Ok(Some((Frame::Pong, at))),
        b'+' => Ok(Some((Frame::Simple(line), at))),
        b'-' => Ok(Some((Frame::Error(line), at))),
        b'!' => match blob(buf, line, at)? {
            Some((text, end)) => Ok(Some((Frame::Error(text), end))),
            None => Ok(None),
        },
        _ => {
            // Scalars and aggregates of no interest: skipped whole.
            match skip(buf, 0, 1)? {
                Some(end) => Ok(Some((Frame::Other, end))),
                None => Ok(None),
            }
        }
    }
}

fn is_subscription(kind: &[u8]) -> bool {
    [
        &b"psubscribe"[..],
        b"punsubscribe",
        b"subscribe",
        b"unsubscribe",
        b"ssubscribe",
        b"sunsubscribe",
    ]
    .iter()
    .any(|k| kind.eq_ignore_ascii_case(k))
}

/// The line from `from` (after its type byte) up to `\r\n`, and where the next begins.
fn line(buf: &[u8], from: usize) -> Result<Option<(&[u8], usize)>, FrameError> {
    let rest = buf.get(from..).unwrap_or_default();
    match memchr::memchr(b'\n', rest) {
        None => Ok(None),
        Some(0) => Err(FrameError {
            at: from,
            what: "a line without \\r\\n",
        }),
        Some(i) if rest[i - 1] != b'\r' => Err(FrameError {
            at: from + i,
            what: "a line without \\r\\n",
        }),
        Some(i) => Ok(Some((&rest[..i - 1], from + i + 1))),
    }
}

/// A decimal integer (`at`: where its line began, for the error).
fn integer(digits: &[u8], at: usize) -> Result<i64, FrameError> {
    let bad = FrameError {
        at,
        what: "a bad integer",
    };
    let (neg, digits) = match digits.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, digits),
    };
    if digits.is_empty() || digits.len() > 18 {
        return Err(bad);
    }
    let mut n: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return Err(bad);
        }
        n = n * 10 + i64::from(d - b'0');
    }
    Ok(if neg { -n } else { n })
}

/// A bulk string at `at` (`None` for a nil one), and where the next frame begins.
#[allow(clippy::type_complexity)]
fn bulk(buf: &[u8], at: usize) -> Result<Option<(Option<&[u8]>, usize)>, FrameError> {
    let Some((len, start)) = typed_line(buf, at, b'$', "a bulk string expected")? else {
        return Ok(None);
    };
    if integer(len, at)? < 0 {
        return Ok(Some((None, start)));
    }
    Ok(blob(buf, len, start)?.map(|(b, end)| (Some(b), end)))
}

/// The `len` bytes from `start` followed by `\r\n`, and where the next frame begins.
fn blob<'a>(buf: &'a [u8], len: &[u8], start: usize) -> Result<Option<(&'a [u8], usize)>, FrameError> {
    let n = integer(len, start)?;
    let n = usize::try_from(n).map_err(|_| FrameError {
        at: start,
        what: "a negative length",
    })?;
    let end = start.checked_add(n).ok_or(FrameError {
        at: start,
        what: "a length too large",
    })?;
    match buf.get(end..end + 2) {
        None => Ok(None),
        Some(b"\r\n") => Ok(Some((&buf[start..end], end + 2))),
        Some(_) => Err(FrameError {
            at: end,
            what: "a string not ended by \\r\\n",
        }),
    }
}

/// An integer frame (`:n`) at `at`, and where the next frame begins.
fn int_frame(buf: &[u8], at: usize) -> Result<Option<(i64, usize)>, FrameError> {
    let Some((digits, next)) = typed_line(buf, at, b':', "an integer expected")? else {
        return Ok(None);
    };
    Ok(Some((integer(digits, at)?, next)))
}

/// The line of a frame that must be of type `kind` at `at`, and where the next begins.
fn typed_line<'a>(
    buf: &'a [u8],
    at: usize,
    kind: u8,
    what: &'static str,
) -> Result<Option<(&'a [u8], usize)>, FrameError> {
    match buf.get(at) {
        None => Ok(None),
        Some(&k) if k == kind => line(buf, at + 1),
        Some(_) => Err(FrameError { at, what }),
    }
}

/// Skip `n` whole frames from `at`, nested ones included, without recursion: where the
/// next begins, or `None` when `buf` ends first.
fn skip(buf: &[u8], mut at: usize, mut n: u64) -> Result<Option<usize>, FrameError> {
    let mut seen = 0u64;
    while n > 0 {
        n -= 1;
        seen += 1;
        if seen > MAX_SKIPPED {
            return Err(FrameError {
                at,
                what: "too many elements",
            });
        }
        let Some(&kind) = buf.get(at) else { return Ok(None) };
        if !TYPES.contains(&kind) {
            return Err(FrameError {
                at,
                what: "an unknown frame type",
            });
        }
        let Some((line, next)) = line(buf, at + 1)? else {
            return Ok(None);
        };
        at = match kind {
            b':' => integer(line, at).map(|_| next)?,
            b'+' | b'-' | b'_' | b',' | b'#' | b'(' => next,
            b'$' | b'!' | b'=' => {
                if integer(line, at)? < 0 {
                    next
                } else {
                    match blob(buf, line, next)? {
                        Some((_, end)) => end,
                        None => return Ok(None),
                    }
                }
            }
            b'*' | b'>' | b'~' | b'%' | b'|' => {
                let k = integer(line, at)?;
                if k > 0 {
                    let k = k as u64;
                    // A map's and an attribute's entries are pairs (an attribute is not
                    // counted among the elements around it).
                    let k = if matches!(kind, b'%' | b'|') { k * 2 } else { k };
                    n = n.checked_add(k).ok_or(FrameError {
                        at,
                        what: "a length too large",
                    })?;
                }
                next
            }
            _ => {
                return Err(FrameError {
                    at,
                    what: "an unknown frame type",
                });
            }
        };
    }
    Ok(Some(at))
}

#[cfg(test)]
#[path = "frame_tests.rs"]
mod tests;
