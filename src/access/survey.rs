//! The reads of `discover`: a SCAN page of every key, the server's key count, and for each
//! key its type, PTTL and a bounded look at its value (a string's first bytes, a
//! small hash's first fields) — read-only commands, two pipelines a page. What is read stays
//! in memory for its shape; deciding what it looks like is `discover`'s job.

use redis::aio::ConnectionLike;
use redis::{RedisResult, Value};

/// Bytes of a string value looked at.
pub(crate) const HEAD: usize = 128;
/// Fields of a hash looked at (a Redisson lock has one per holding thread).
const FIELDS: usize = 8;

/// One key as sampled: never printed, only shaped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sampled {
    pub key: Vec<u8>,
    pub kind: Kind,
    /// Milliseconds left; -1 without an expiry.
    pub pttl_ms: i64,
}

/// A key's type and what was seen of its value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `head`: the first bytes (at most [`HEAD`]); `len`: their number, or one more when the
    /// value is longer.
    String { len: usize, head: Vec<u8> },
    /// `len` fields, of which `fields` are some (at most [`FIELDS`] when the hash is small).
    Hash {
        len: usize,
        fields: Vec<(Vec<u8>, Vec<u8>)>,
    },
    /// Another type (`list`, `set`, `zset`, `stream`…), by its name.
    Other(String),
}

/// `DBSIZE`: keys on this node.
pub(crate) async fn dbsize(conn: &mut impl ConnectionLike) -> RedisResult<u64> {
    redis::cmd("DBSIZE").query_async(conn).await
}

/// One `SCAN cursor COUNT count` page (no `MATCH`: every key is a candidate).
pub(crate) async fn page(
    conn: &mut impl ConnectionLike,
    cursor: u64,
    count: usize,
) -> RedisResult<(u64, Vec<Vec<u8>>)> {
    redis::cmd("SCAN")
        .arg(cursor)
        .arg("COUNT")
        .arg(count)
        .query_async(conn)
        .await
}

/// Type, PTTL and a look at the value of each key; keys gone meanwhile (or moved away, on
/// a cluster) are left out.
pub(crate) async fn sample(conn: &mut impl ConnectionLike, keys: Vec<Vec<u8>>) -> RedisResult<Vec<Sampled>> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let mut first = redis::pipe();
    first.ignore_errors();
    for k in &keys {
        first.cmd("TYPE").arg(k).cmd("PTTL").arg(k);
    }
    let replies: Vec<Value> = first.query_async(conn).await?;
    let mut typed = Vec::with_capacity(keys.len());
    for (key, pair) in keys.into_iter().zip(replies.chunks(2)) {
        let (Some(Value::SimpleString(t)), Some(Value::Int(pttl))) = (pair.first(), pair.get(1)) else {
            continue;
        };
        if *pttl == -2 || t == "none" {
            continue;
        }
        typed.push((key, t.clone(), *pttl));
    }
    let mut second = redis::pipe();
    second.ignore_errors();
    for (k, t, _) in &typed {
        match t.as_str() {
            // One byte past the head tells a longer value.
            "string" => second.cmd("GETRANGE").arg(k).arg(0).arg(HEAD),
            "hash" => second
                .cmd("HLEN")
                .arg(k)
                .cmd("HSCAN")
                .arg(k)
                .arg(0)
                .arg("COUNT")
                .arg(FIELDS),
            _ => second.cmd("EXISTS").arg(k),
        };
    }
    let replies: Vec<Value> = second.query_async(conn).await?;
    let mut replies = replies.into_iter();
    let mut out = Vec::with_capacity(typed.len());
    for (key, t, pttl_ms) in typed {
        let n = if t == "hash" { 2 } else { 1 };
        let pair: Vec<Value> = replies.by_ref().take(n).collect();
        let kind = match (t.as_str(), pair.first(), pair.get(1)) {
            ("string", Some(Value::BulkString(head)), _) if !head.is_empty() => Kind::String {
                len: head.len(),
                head: head[..head.len().min(HEAD)].to_vec(),
            },
            ("hash", Some(Value::Int(len)), Some(Value::Array(scan))) if *len > 0 => Kind::Hash {
                len: usize::try_from(*len).unwrap_or(0),
                fields: hash_fields(scan),
            },
            ("string" | "hash", _, _) => continue,
            (_, Some(Value::Int(1)), _) => Kind::Other(t),
            _ => continue,
        };
        out.push(Sampled { key, kind, pttl_ms });
    }
    Ok(out)
}

/// The field–value pairs of an `HSCAN` reply (`[cursor, [f, v, f, v…]]`), at most [`FIELDS`].
fn hash_fields(scan: &[Value]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let Some(Value::Array(flat)) = scan.get(1) else {
        return Vec::new();
    };
    flat.chunks(2)
        .filter_map(|p| match p {
            [Value::BulkString(f), Value::BulkString(v)] => Some((f.clone(), v.clone())),
            _ => None,
        })
        .take(FIELDS)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_fields_of_an_hscan_reply() {
        let reply = vec![
            Value::BulkString(b"0".to_vec()),
            Value::Array(vec![Value::BulkString(b"f".to_vec()), Value::BulkString(b"1".to_vec())]),
        ];
        assert_eq!(hash_fields(&reply), vec![(b"f".to_vec(), b"1".to_vec())]);
        assert!(hash_fields(&[]).is_empty());
    }
}
