//! `MONITOR`, for the freeze drill's witness: a stream of the commands a node runs, each
//! with the client that sent it, parsed from the lines Redis writes
//! (`1700000000.123456 [0 127.0.0.1:50012] "DEL" "lock:7"`; a script's own calls come as
//! `[0 lua]`). Nothing else in lockwatch uses it: it costs the server every command twice.

use futures_util::{Stream, StreamExt};

use super::connect::Link;

/// One command as `MONITOR` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Server time, microseconds since the Unix epoch.
    pub at_us: i64,
    /// The client as Redis sees it (`ip:port`, `[::1]:port`, `unix:/path`), or `lua` for a
    /// command a script ran.
    pub client: String,
    /// The command name and its arguments, unescaped.
    pub args: Vec<Vec<u8>>,
}

impl Link {
    /// A `MONITOR` stream on this link's node, each line parsed (`Err`: the line, unread):
    /// `Err` when the server refuses it (an ACL without `+monitor`, a renamed command, a
    /// provider that disables it).
    pub async fn monitor(&self) -> redis::RedisResult<impl Stream<Item = Result<Seen, String>> + Send + Unpin + use<>> {
        let m = self.client().get_async_monitor().await?;
        Ok(m.into_on_message::<String>()
            .filter(|l| std::future::ready(l != "OK"))
            .map(|l| parse(&l).ok_or(l)))
    }
}

/// A `MONITOR` line, or `None` for anything else.
pub fn parse(line: &str) -> Option<Seen> {
    let (ts, rest) = line.split_once(' ')?;
    let (secs, micros) = ts.split_once('.')?;
    let at_us = secs.parse::<i64>().ok()? * 1_000_000 + micros.parse::<i64>().ok()?;
    let rest = rest.strip_prefix('[')?;
    // The client may hold brackets itself (`[::1]:50012`): it ends at the first `] `.
    let close = rest.find("] ")?;
    let (_db, client) = rest[..close].split_once(' ')?;
    let args = quoted(&rest[close + 1..])?;
    Some(Seen {
        at_us,
        client: client.to_string(),
        args,
    })
}

/// The `"…"` arguments of a line, with Redis's escapes (`\"`, `\\`, `\n`, `\xHH`…) undone.
fn quoted(s: &str) -> Option<Vec<Vec<u8>>> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b' ' => i += 1,
            b'"' => {
                i += 1;
                let mut arg = Vec::new();
                loop {
                    match *b.get(i)? {
                        b'"' => break,
                        b'\\' => {
                            let c = *b.get(i + 1)?;
                            i += 2;
                            arg.push(match c {
                                b'n' => b'\n',
                                b'r' => b'\r',
                                b't' => b'\t',
                                b'a' => 7,
                                b'b' => 8,
                                b'x' => {
                                    let hex = std::str::from_utf8(b.get(i..i + 2)?).ok()?;
                                    i += 2;
                                    u8::from_str_radix(hex, 16).ok()?
                                }
                                other => other,
                            });
                        }
                        c => {
                            arg.push(c);
                            i += 1;
                        }
                    }
                }
                i += 1;
                out.push(arg);
            }
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_with_their_client_and_escapes() {
        let s = parse(r#"1700000000.123456 [0 127.0.0.1:50012] "SET" "lock:\"7\"" "a\x00b" "NX""#);
        let s = s.unwrap_or_else(|| panic!("not parsed"));
        assert_eq!(s.at_us, 1_700_000_000_123_456);
        assert_eq!(s.client, "127.0.0.1:50012");
        assert_eq!(
            s.args,
            vec![
                b"SET".to_vec(),
                b"lock:\"7\"".to_vec(),
                b"a\0b".to_vec(),
                b"NX".to_vec()
            ]
        );
        let lua = parse(r#"1700000000.000001 [3 lua] "del" "k""#).unwrap_or_else(|| panic!("not parsed"));
        assert_eq!((lua.client.as_str(), lua.args.len()), ("lua", 2));
        assert_eq!(parse("OK"), None);
        let v6 = parse(r#"1700000000.000001 [0 [::1]:50012] "DEL" "lock:] x""#).unwrap_or_else(|| panic!("not parsed"));
        assert_eq!((v6.client.as_str(), v6.args.len()), ("[::1]:50012", 2));
        assert_eq!(v6.args[1], b"lock:] x");
        assert_eq!(parse(r#"1.2 [0 x] "unterminated"#), None);
    }
}
