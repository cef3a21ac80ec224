//! AWS event-stream framing of a streamed body (`frame_chunks` with
//! `Framing::AwsEventStream`): it never panics, and any split of the body into
//! chunks gives the same events as the whole body.
//!
//! Random bytes rarely pass the prelude and message CRCs, so half the inputs
//! are read as a list of messages instead (header bytes and payload as given,
//! both CRCs computed), which reaches the header decoder and `to_event`; there
//! every decoded event must carry its message's payload.
#![no_main]

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use tollgate_gateway::fuzzing::{Event, Framing, frame_chunks};
use tollgate_fuzz::chunked;

type Outcome = Vec<Option<(Option<String>, Vec<u8>)>>;

fn frame(chunks: Vec<Bytes>) -> Outcome {
    frame_chunks(Framing::AwsEventStream, chunks)
        .into_iter()
        .map(|item| item.ok().map(|Event { name, data }| (name, data)))
        .collect()
}

/// Messages from `spec`: per message, a header length byte, a payload length
/// byte, then that many header bytes and payload bytes (cut short at the end).
fn messages(mut spec: &[u8]) -> (Vec<u8>, Vec<Vec<u8>>) {
    let mut body = Vec::new();
    let mut payloads = Vec::new();
    while let [headers_len, payload_len, rest @ ..] = spec {
        let headers_len = usize::from(*headers_len).min(rest.len());
        let (headers, rest) = rest.split_at(headers_len);
        let payload_len = usize::from(*payload_len).min(rest.len());
        let (payload, rest) = rest.split_at(payload_len);
        spec = rest;
        let total = 12 + headers.len() + payload.len() + 4;
        let mut message = Vec::with_capacity(total);
        message.extend_from_slice(&(total as u32).to_be_bytes());
        message.extend_from_slice(&(headers.len() as u32).to_be_bytes());
        let prelude_crc = crc32fast::hash(&message);
        message.extend_from_slice(&prelude_crc.to_be_bytes());
        message.extend_from_slice(headers);
        message.extend_from_slice(payload);
        let message_crc = crc32fast::hash(&message);
        message.extend_from_slice(&message_crc.to_be_bytes());
        body.extend_from_slice(&message);
        payloads.push(payload.to_vec());
    }
    (body, payloads)
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, data)) = data.split_first() else {
        return;
    };
    let (body, cuts): (Vec<u8>, Vec<usize>) = if mode & 1 == 0 {
        let (body, chunks) = chunked(data);
        (body.to_vec(), chunks.iter().map(|c| c.len()).collect())
    } else {
        let (body, payloads) = messages(data);
        let whole = frame(vec![Bytes::from(body.clone())]);
        for (event, payload) in whole.iter().zip(&payloads) {
            if let Some((_, data)) = event {
                assert_eq!(data, payload, "an event lost its message's payload");
            }
        }
        if whole.iter().all(Option::is_some) {
            assert_eq!(whole.len(), payloads.len(), "a valid message was dropped");
        }
        let step = usize::from(mode >> 1) + 1;
        let cuts = vec![step; body.len() / step + 1];
        (body, cuts)
    };
    let whole = frame(vec![Bytes::from(body.clone())]);
    let mut split = Vec::new();
    let mut rest = &body[..];
    for len in cuts {
        if rest.is_empty() {
            break;
        }
        let (chunk, tail) = rest.split_at(len.min(rest.len()));
        split.push(Bytes::copy_from_slice(chunk));
        rest = tail;
    }
    split.push(Bytes::copy_from_slice(rest));
    assert_eq!(whole, frame(split), "a different split gave different events");
    let bytewise = frame(body.chunks(1).map(Bytes::copy_from_slice).collect());
    assert_eq!(whole, bytewise, "byte-at-a-time chunks gave different events");
});
