//! A JSON record's fields, read in one pass of the parser over its members: the members
//! named by the lists (flat, `"dd.trace_id"`, or the outer object of a dotted name, `"dd"`)
//! are kept, strings borrowed from the line where they hold no escape; every other member
//! is checked as a `serde_json::Value` would be (escapes, number range, depth) and skipped.
//! No map of the record is built.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::LazyLock;

use foldhash::fast::FixedState;

use serde::Deserialize;
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::{ERROR, Fields, HOST_FIELDS, INSTANCE_FIELDS, KEY, MESSAGE, NAMESPACE, PID_FIELDS, SPAN_ID, TRACE_ID};
use crate::config::LogFormat;

/// The lists of names `fields` reads, in the order of `Fields`' members after `format`.
pub(super) const LISTS: [&[&str]; 9] = [
    MESSAGE,
    ERROR,
    KEY,
    NAMESPACE,
    TRACE_ID,
    SPAN_ID,
    PID_FIELDS,
    HOST_FIELDS,
    INSTANCE_FIELDS,
];

/// How many names the lists hold together.
pub(super) const NAMES: usize = {
    let (mut n, mut i) = (0, 0);
    while i < LISTS.len() {
        n += LISTS[i].len();
        i += 1;
    }
    n
};

/// What a member's name is to the lists: the names it is (numbered in the lists' order,
/// flat) and the dotted names it is the outer object of (with their inner name).
type Uses = Vec<(usize, Option<&'static str>)>;

/// Every name the lists read, flat or as a dotted name's outer object, and its uses.
pub(super) fn uses(key: &str) -> Option<&'static Uses> {
    static USES: LazyLock<HashMap<&'static str, Uses, FixedState>> = LazyLock::new(|| {
        let mut uses: HashMap<&'static str, Uses, FixedState> = HashMap::default();
        for (i, name) in LISTS.iter().flat_map(|l| l.iter()).enumerate() {
            uses.entry(name).or_default().push((i, None));
            if let Some((outer, inner)) = name.split_once('.') {
                uses.entry(outer).or_default().push((i, Some(inner)));
            }
        }
        uses
    });
    USES.get(key)
}

/// The fields of `line`, a JSON object; `None` when it is not one. A name's value is its
/// flat member's (the last, where a name is written twice; a `null` reads as absent and
/// stands), else, for a dotted name, the member inside the last member of its outer name
/// when that is an object. A string reads as itself, anything else as its JSON.
pub(super) fn fields(line: &str) -> Option<Fields<'_>> {
    let mut de = serde_json::Deserializer::from_str(line);
    let kept = de.deserialize_map(Members).ok()?;
    de.end().ok()?;
    // Per name, the last kept member that is it (flat) and that is its outer object.
    let (mut flat, mut outer) = ([None::<usize>; NAMES], [None::<(usize, &str)>; NAMES]);
    for (j, (uses, _)) in kept.iter().enumerate() {
        for &(i, inner) in uses.iter() {
            match inner {
                None => flat[i] = Some(j),
                Some(inner) => outer[i] = Some((j, inner)),
            }
        }
    }
    let value = |i: usize| -> Option<Cow<'_, str>> {
        if let Some(j) = flat[i] {
            return kept[j].1.text();
        }
        let (j, inner) = outer[i]?;
        match &kept[j].1 {
            Kept::Value(Value::Object(m)) => match m.get(inner)? {
                Value::String(s) => Some(Cow::Owned(s.clone())),
                Value::Null => None,
                other => Some(Cow::Owned(other.to_string())),
            },
            _ => None,
        }
    };
    Some(by_number(LogFormat::Json, value))
}

/// A record's fields read as `format`, each name by its number in the lists
/// (`value(number)`): a list's first name that has a value, and every error name's, joined.
pub(super) fn by_number<'a>(format: LogFormat, value: impl Fn(usize) -> Option<Cow<'a, str>>) -> Fields<'a> {
    // The names of list `l`, by their numbers.
    let names = |l: usize| {
        let start: usize = LISTS[..l].iter().map(|l| l.len()).sum();
        start..start + LISTS[l].len()
    };
    let get = |l: usize| names(l).find_map(&value);
    Fields {
        format: Some(format),
        message: get(0).unwrap_or_default(),
        error: super::joined(names(1).filter_map(&value)),
        key: get(2),
        namespace: get(3),
        trace_id: get(4),
        span_id: get(5),
        pid: get(6),
        host: get(7),
        instance: get(8),
    }
}

/// A kept member's value: a string as written (borrowed without escapes), else parsed.
#[derive(Debug)]
enum Kept<'de> {
    Str(Cow<'de, str>),
    Value(Value),
}

impl<'de> Kept<'de> {
    /// What a field reads: a string itself, `null` nothing, anything else its JSON.
    fn text(&self) -> Option<Cow<'de, str>> {
        match self {
            Kept::Str(s) => Some(s.clone()),
            Kept::Value(Value::Null) => None,
            Kept::Value(v) => Some(Cow::Owned(v.to_string())),
        }
    }
}

/// The object's kept members, in order.
struct Members;

impl<'de> Visitor<'de> for Members {
    type Value = Vec<(&'static Uses, Kept<'de>)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut kept = Vec::new();
        while let Some(key) = map.next_key_seed(Text)? {
            match uses(&key) {
                Some(uses) => kept.push((uses, map.next_value_seed(KeptSeed)?)),
                None => {
                    map.next_value_seed(Skip)?;
                }
            }
        }
        Ok(kept)
    }
}

/// A member that is not kept, checked as parsing it into a `Value` would check it (a lone
/// surrogate escape, a number out of range, nesting past the parser's depth are errors;
/// serde's `IgnoredAny` lets them pass) and dropped.
struct Skip;

impl<'de> DeserializeSeed<'de> for Skip {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Skip {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Skip)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key_seed(Skip)?.is_some() {
            map.next_value_seed(Skip)?;
        }
        Ok(())
    }
}

/// A string, borrowed from the line when it holds no escape.
struct Text;

impl<'de> DeserializeSeed<'de> for Text {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(TextVisitor)
    }
}

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

/// A kept member's value.
struct KeptSeed;

impl<'de> DeserializeSeed<'de> for KeptSeed {
    type Value = Kept<'de>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for KeptSeed {
    type Value = Kept<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Kept::Str(Cow::Borrowed(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Kept::Str(Cow::Owned(v.to_owned())))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Kept::Str(Cow::Owned(v)))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Kept::Value(Value::Null))
    }

    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Kept::Value(Value::Bool(v)))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Kept::Value(Value::from(v)))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Kept::Value(Value::from(v)))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Kept::Value(Value::from(v)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Value::deserialize(SeqAccessDeserializer::new(seq)).map(Kept::Value)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Value::deserialize(MapAccessDeserializer::new(map)).map(Kept::Value)
    }
}

#[cfg(test)]
#[path = "fields_json_tests.rs"]
mod tests;
