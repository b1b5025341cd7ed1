//! Reading the owner out of a lock key's value, per the namespace's `value` setting.
//!
//! `token`: the string value is the owner. `json:<path>`: the value is a JSON object and the
//! dotted path names the owner field. `redisson`: a hash whose field `<uuid>:<threadId>` is
//! the owner (its value is the re-entry count).

use std::borrow::Cow;

use crate::config::ValueKind;
use crate::vocab::Unreadable;

/// The owner from a string value (`token` and `json:` namespaces).
pub fn from_string<'a>(kind: &ValueKind, value: &'a [u8]) -> Result<Cow<'a, [u8]>, Unreadable> {
    match kind {
        ValueKind::Token => Ok(Cow::Borrowed(value)),
        ValueKind::Json(path) => {
            let doc: serde_json::Value = serde_json::from_slice(value).map_err(|_| Unreadable::BadValue)?;
            let mut at = &doc;
            for part in path {
                at = at.get(part.as_str()).ok_or(Unreadable::BadValue)?;
            }
            match at {
                serde_json::Value::String(s) => Ok(Cow::Owned(s.as_bytes().to_vec())),
                serde_json::Value::Number(n) => Ok(Cow::Owned(n.to_string().into_bytes())),
                _ => Err(Unreadable::BadValue),
            }
        }
        ValueKind::Redisson => Err(Unreadable::WrongType),
    }
}

/// The owner of a Redisson lock hash, given its field names. A Redisson lock has exactly
/// one field; an empty hash does not exist in Redis, so `None` means the key is gone.
pub fn from_hash_fields<'a>(mut fields: impl Iterator<Item = &'a [u8]>) -> Option<&'a [u8]> {
    fields.next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_is_the_whole_value() {
        assert_eq!(from_string(&ValueKind::Token, b"w-1:abc").unwrap().as_ref(), b"w-1:abc");
    }

    #[test]
    fn json_path_reads_strings_and_numbers() {
        let kind = ValueKind::Json(vec!["owner".into(), "id".into()]);
        let v = br#"{"owner":{"id":"worker-7","host":"h"},"fence":3}"#;
        assert_eq!(from_string(&kind, v).unwrap().as_ref(), b"worker-7");
        let v = br#"{"owner":{"id":42}}"#;
        assert_eq!(from_string(&kind, v).unwrap().as_ref(), b"42");
        assert_eq!(from_string(&kind, br#"{"owner":{}}"#), Err(Unreadable::BadValue));
        assert_eq!(from_string(&kind, b"not json"), Err(Unreadable::BadValue));
        assert_eq!(
            from_string(&kind, br#"{"owner":{"id":null}}"#),
            Err(Unreadable::BadValue)
        );
    }

    #[test]
    fn redisson_owner_is_the_first_field() {
        let fields: [&[u8]; 1] = [b"8f1c0f9e-uuid:57"];
        assert_eq!(from_hash_fields(fields.into_iter()), Some(&b"8f1c0f9e-uuid:57"[..]));
        assert_eq!(from_hash_fields(std::iter::empty()), None);
    }
}
