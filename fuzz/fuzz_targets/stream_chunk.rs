//! `write_chunk` on any adapter chunk and provider id. When it accepts, the
//! frame is exactly one SSE event: `data: ` + one JSON object + `\n\n`, with no
//! other line break, whose only `provider` and `model` are the given ones, with
//! no `service` and no `usage.cost`, and whose other fields are the chunk's.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};
use tollgate_gateway::fuzzing::write_chunk;
use tollgate_fuzz::Pairs;

fuzz_target!(|data: &[u8]| {
    // The provider id comes from config, but test its quoting too: the first
    // byte gives its length.
    let Some((&len, rest)) = data.split_first() else {
        return;
    };
    let len = usize::from(len % 16).min(rest.len());
    let (provider, chunk) = rest.split_at(len);
    let provider = String::from_utf8_lossy(provider);
    let mut frame = BytesMut::new();
    if write_chunk(&mut frame, &provider, "fuzz/model", chunk).is_err() {
        return;
    }
    let payload = frame
        .strip_prefix(b"data: ")
        .and_then(|f| f.strip_suffix(b"\n\n"))
        .unwrap_or_else(|| panic!("not one data: frame: {:?}", String::from_utf8_lossy(&frame)));
    assert!(
        !payload.iter().any(|b| matches!(b, b'\n' | b'\r')),
        "a line break inside the frame: {:?}",
        String::from_utf8_lossy(&frame)
    );
    let pairs = Pairs::parse(payload).unwrap_or_else(|e| {
        panic!(
            "payload is not one JSON object ({e}): {:?}",
            String::from_utf8_lossy(payload)
        )
    });
    let providers: Vec<&str> = pairs.values("provider").map(|v| v.get()).collect();
    assert_eq!(providers, [serde_json::to_string(&*provider).unwrap()], "provider");
    let models: Vec<&str> = pairs.values("model").map(|v| v.get()).collect();
    assert_eq!(models, [r#""fuzz/model""#], "model");
    assert_eq!(pairs.values("service").count(), 0, "service survived");
    for usage in pairs.values("usage") {
        if let Ok(usage) = Pairs::parse(usage.get().as_bytes()) {
            assert_eq!(usage.values("cost").count(), 0, "usage.cost survived");
        }
    }
    // Everything else is the chunk's, where a full parse can compare them (it
    // refuses numbers beyond f64 and nesting past 128, which the fast path keeps raw).
    let (Ok(mut written), Ok(mut original)) = (
        serde_json::from_slice::<Map<String, Value>>(payload),
        serde_json::from_slice::<Map<String, Value>>(chunk),
    ) else {
        return;
    };
    written.remove("provider");
    written.remove("model");
    original.remove("provider");
    original.remove("model");
    original.remove("service");
    if let Some(Value::Object(usage)) = original.get_mut("usage") {
        usage.remove("cost");
    }
    assert_eq!(written, original, "fields other than the host's changed");
});
