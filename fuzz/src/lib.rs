//! Helpers the fuzz targets share: cutting a body into chunks the way a network
//! might deliver it, and reading a JSON object's fields without losing
//! duplicates.

use std::fmt;

use serde::Deserialize;
use serde::de::{MapAccess, Visitor};
use serde_json::value::RawValue;

/// Reads the cut points from the front of a fuzz input: one byte `n` (at most
/// 15 cuts), then `n` little-endian `u16` offsets into the rest, which is the
/// body. Returns the body and its chunks in order (empty chunks included: a
/// network read can return nothing).
pub fn chunked(data: &[u8]) -> (&[u8], Vec<&[u8]>) {
    let Some((&count, rest)) = data.split_first() else {
        return (data, vec![data]);
    };
    let count = usize::from(count % 16);
    if rest.len() < count * 2 {
        return (rest, vec![rest]);
    }
    let (cuts, body) = rest.split_at(count * 2);
    let mut offsets: Vec<usize> = cuts
        .chunks_exact(2)
        .map(|pair| usize::from(u16::from_le_bytes([pair[0], pair[1]])) % (body.len() + 1))
        .collect();
    offsets.sort_unstable();
    let mut chunks = Vec::with_capacity(offsets.len() + 1);
    let mut start = 0;
    for end in offsets {
        chunks.push(&body[start..end]);
        start = end;
    }
    chunks.push(&body[start..]);
    (body, chunks)
}

/// A JSON object's top-level fields in order, duplicates kept, values raw.
pub struct Pairs(pub Vec<(String, Box<RawValue>)>);

impl<'de> Deserialize<'de> for Pairs {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PairsVisitor;
        impl<'de> Visitor<'de> for PairsVisitor {
            type Value = Pairs;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Pairs, A::Error> {
                let mut pairs = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    pairs.push((key, map.next_value::<Box<RawValue>>()?));
                }
                Ok(Pairs(pairs))
            }
        }
        deserializer.deserialize_map(PairsVisitor)
    }
}

impl Pairs {
    pub fn parse(json: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(json)
    }

    pub fn values<'a>(&'a self, key: &'a str) -> impl Iterator<Item = &'a RawValue> + 'a {
        self.0.iter().filter(move |(k, _)| k == key).map(|(_, v)| &**v)
    }
}
