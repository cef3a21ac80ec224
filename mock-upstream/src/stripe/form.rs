//! Stripe's request bodies: `application/x-www-form-urlencoded` with nested
//! keys in brackets, as Stripe's SDKs encode them
//! (`line_items[0][price_data][currency]=usd`). Decoded into JSON whose leaves
//! are strings, because that is all the wire carries; handlers parse numbers
//! where they read a parameter, so `unit_amount=abc` is their error to report.
//!
//! Rules: a key is a name followed by `[segment]`s; a branch whose keys are
//! all decimal numbers becomes an array ordered by index (the indices must be
//! 0..n, as Stripe refuses gaps); `[]` appends (`expand[]=a&expand[]=b`); a
//! repeated scalar key keeps its last value; a key used both as a scalar and as
//! a branch (`a=1&a[b]=2`) is an error.

use serde_json::{Map, Value};

/// Decodes a form body into a JSON object.
pub(crate) fn decode(body: &[u8]) -> Result<Map<String, Value>, String> {
    let pairs: Vec<(String, String)> =
        serde_urlencoded::from_bytes(body).map_err(|e| format!("Invalid form-encoded body: {e}"))?;
    let mut root = Map::new();
    for (key, value) in pairs {
        let path = split_key(&key)?;
        insert(&mut root, &path, value, &key)?;
    }
    match arrays(Value::Object(root), "")? {
        Value::Object(map) => Ok(map),
        // The top level has names, never indices, so it stays an object.
        _ => Err("Invalid request: the body must name its parameters".to_owned()),
    }
}

/// `a[b][0]` → `["a", "b", "0"]`.
fn split_key(key: &str) -> Result<Vec<String>, String> {
    let invalid = || format!("Invalid parameter name: {key}");
    let (name, mut rest) = key.find('[').map_or((key, ""), |i| key.split_at(i));
    if name.is_empty() {
        return Err(invalid());
    }
    let mut path = vec![name.to_owned()];
    while !rest.is_empty() {
        let inner = rest.strip_prefix('[').ok_or_else(invalid)?;
        let close = inner.find(']').ok_or_else(invalid)?;
        path.push(inner[..close].to_owned());
        rest = &inner[close + 1..];
    }
    Ok(path)
}

fn insert(root: &mut Map<String, Value>, path: &[String], value: String, key: &str) -> Result<(), String> {
    let conflict = || format!("Invalid parameter: {key} is given both as a value and as a hash");
    let (last, parents) = path.split_last().expect("split_key yields a name");
    let mut node = root;
    for segment in parents {
        let segment = appended(node, segment);
        let child = node.entry(segment).or_insert_with(|| Value::Object(Map::new()));
        node = child.as_object_mut().ok_or_else(conflict)?;
    }
    let last = appended(node, last);
    if node.get(&last).is_some_and(Value::is_object) {
        return Err(conflict());
    }
    node.insert(last, Value::String(value));
    Ok(())
}

/// `[]` names the next index of the branch.
fn appended(node: &Map<String, Value>, segment: &str) -> String {
    if segment.is_empty() {
        node.len().to_string()
    } else {
        segment.to_owned()
    }
}

/// Turns branches keyed `0..n` into arrays, depth first.
fn arrays(value: Value, at: &str) -> Result<Value, String> {
    let Value::Object(map) = value else {
        return Ok(value);
    };
    let numeric = !map.is_empty()
        && map
            .keys()
            .all(|k| !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()));
    if !numeric {
        let mut out = Map::new();
        for (key, child) in map {
            let here = if at.is_empty() {
                key.clone()
            } else {
                format!("{at}[{key}]")
            };
            out.insert(key, arrays(child, &here)?);
        }
        return Ok(Value::Object(out));
    }
    let mut indexed = Vec::with_capacity(map.len());
    for (key, child) in map {
        let index: usize = key.parse().map_err(|_| format!("Invalid array index in {at}[{key}]"))?;
        indexed.push((index, arrays(child, &format!("{at}[{key}]"))?));
    }
    indexed.sort_by_key(|(index, _)| *index);
    if indexed
        .iter()
        .enumerate()
        .any(|(expected, (index, _))| expected != *index)
    {
        return Err(format!(
            "Invalid array: the indices of {at} must run from 0 without gaps"
        ));
    }
    Ok(Value::Array(indexed.into_iter().map(|(_, v)| v).collect()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::decode;

    #[test]
    fn nested_brackets_and_arrays() {
        let body = "mode=subscription&metadata[workspace_id]=ws_1\
            &line_items[0][price_data][currency]=usd\
            &line_items[0][price_data][unit_amount]=1000\
            &line_items[0][price_data][product_data][name]=Top-up\
            &line_items[0][price_data][recurring][interval]=month\
            &line_items[0][quantity]=1\
            &line_items[1][quantity]=2\
            &subscription_data[metadata][plan]=pro";
        let decoded = decode(body.as_bytes()).unwrap();
        assert_eq!(
            serde_json::Value::Object(decoded),
            json!({
                "mode": "subscription",
                "metadata": {"workspace_id": "ws_1"},
                "line_items": [
                    {"price_data": {"currency": "usd", "unit_amount": "1000",
                        "product_data": {"name": "Top-up"}, "recurring": {"interval": "month"}},
                     "quantity": "1"},
                    {"quantity": "2"}
                ],
                "subscription_data": {"metadata": {"plan": "pro"}}
            })
        );
    }

    #[test]
    fn indices_are_ordered_numerically_and_need_no_gaps() {
        let decoded = decode(b"a[10]=k&a[2]=c&a[0]=a&a[1]=b&a[3]=d&a[4]=e&a[5]=f&a[6]=g&a[7]=h&a[8]=i&a[9]=j").unwrap();
        assert_eq!(
            decoded["a"],
            json!(["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"])
        );
        assert!(decode(b"a[0]=x&a[2]=y").unwrap_err().contains("without gaps"));
    }

    #[test]
    fn url_decoding_of_keys_and_values() {
        // Python's urlencode escapes the brackets; `+` is a space.
        let decoded = decode(b"metadata%5Bnote%5D=a+b%26c%3D%C3%A9&success_url=http%3A%2F%2Fx%2Fok%3Fs%3D1").unwrap();
        assert_eq!(decoded["metadata"], json!({"note": "a b&c=é"}));
        assert_eq!(decoded["success_url"], "http://x/ok?s=1");
    }

    #[test]
    fn repeated_keys() {
        let decoded = decode(b"mode=payment&mode=subscription&expand[]=a&expand[]=b").unwrap();
        assert_eq!(
            decoded["mode"], "subscription",
            "a repeated scalar keeps its last value"
        );
        assert_eq!(decoded["expand"], json!(["a", "b"]), "[] appends");
    }

    #[test]
    fn malformed_keys_and_conflicts_are_errors() {
        assert!(decode(b"a[b=1").is_err());
        assert!(decode(b"[a]=1").is_err());
        assert!(decode(b"a=1&a[b]=2").is_err());
        assert!(decode(b"a[b]=2&a=1").is_err());
        assert!(decode(b"").unwrap().is_empty());
    }
}
