//! Answer checks on a stream, window by window. Each choice's text deltas
//! are held back until a window has gathered (`window_chars`, cut at the last
//! whitespace so a word or a placeholder such as `[EMAIL_1]` is never split),
//! then checked and sent on as one content chunk. A chunk that finishes a
//! choice, and the stream's end, release what is held (the last window is
//! checked with `done`). Everything else a chunk carries (the role, tool
//! calls, the finish reason) passes as it came.
//!
//! A denial mid-stream sends nothing more of the answer: the rest of the
//! upstream's stream is read and billed as usual, and the closing chunk ends
//! with `finish_reason: "content_filter"` and the `guardrail_denied` error.

use std::collections::BTreeMap;

use axum::body::Bytes;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tollgate_web::error::ApiError;

use super::{AnswerOutcome, Checks};
use crate::pipeline::{ChatStream, StreamEvent};

/// A window longer than this many times the window size is cut even
/// without whitespace, so a text without spaces cannot be held back whole.
const HOLD_LIMIT: usize = 4;

/// The guarded stream: `inner`'s events, with every text delta checked.
pub fn guard(mut inner: ChatStream, mut checks: Checks, window_chars: usize) -> ChatStream {
    let (tx, events) = mpsc::channel(16);
    tokio::spawn(async move {
        let mut held = Held::new(window_chars);
        let mut denied: Option<ApiError> = None;
        while let Some(event) = inner.next().await {
            let out = match event {
                StreamEvent::Chunks(_) if denied.is_some() => continue,
                StreamEvent::Chunks(chunks) => {
                    let mut out = Vec::new();
                    for chunk in chunks {
                        if let Err(error) = held.take(&chunk, &mut checks, &mut out).await {
                            denied = Some(error);
                            break;
                        }
                    }
                    if out.is_empty() {
                        continue;
                    }
                    StreamEvent::Chunks(out)
                }
                StreamEvent::End(mut ending) => {
                    if denied.is_none() {
                        let mut out = Vec::new();
                        match held.release(true, &mut checks, &mut out).await {
                            Ok(()) if !out.is_empty() => {
                                if tx.send(StreamEvent::Chunks(out)).await.is_err() {
                                    return;
                                }
                            }
                            Ok(()) => {}
                            Err(error) => denied = Some(error),
                        }
                    }
                    if let Some(chunk) = ending.chunk.as_mut() {
                        if let Some(Value::Object(service)) = chunk.get_mut("service") {
                            service.insert("guardrails".into(), checks.to_json());
                        }
                        if let Some(error) = &denied {
                            filtered(chunk, error);
                        }
                    }
                    if let Some(error) = denied.take() {
                        ending.error = Some(error);
                    }
                    StreamEvent::End(ending)
                }
                other => other,
            };
            if tx.send(out).await.is_err() {
                // The caller left: dropping `inner` abandons the upstream.
                return;
            }
        }
    });
    ChatStream { events, native: false }
}

/// The closing chunk of a stream a guard stopped.
fn filtered(chunk: &mut Map<String, Value>, error: &ApiError) {
    if let Some(Value::Array(choices)) = chunk.get_mut("choices") {
        for choice in choices {
            choice["finish_reason"] = json!("content_filter");
        }
    }
    chunk.insert("error".into(), error.error_object());
}

/// The text held back per choice, and the fields every chunk the guard
/// writes copies from the last chunk seen (`id`, `created`, `model`, …).
struct Held {
    window_chars: usize,
    texts: BTreeMap<u64, String>,
    skeleton: Map<String, Value>,
}

impl Held {
    fn new(window_chars: usize) -> Self {
        Held {
            window_chars: window_chars.max(1),
            texts: BTreeMap::new(),
            skeleton: Map::new(),
        }
    }

    /// Takes one chunk: its content deltas are held, full windows checked
    /// and written to `out`, and the rest of the chunk passed on.
    async fn take(&mut self, chunk: &Bytes, checks: &mut Checks, out: &mut Vec<Bytes>) -> Result<(), ApiError> {
        let Ok(mut object) = serde_json::from_slice::<Map<String, Value>>(chunk) else {
            out.push(chunk.clone());
            return Ok(());
        };
        for (key, value) in &object {
            if key != "choices" && key != "usage" {
                self.skeleton.insert(key.clone(), value.clone());
            }
        }
        let mut finishing = false;
        if let Some(Value::Array(choices)) = object.get_mut("choices") {
            for choice in choices.iter_mut() {
                let index = choice.get("index").and_then(Value::as_u64).unwrap_or(0);
                if let Some(Value::String(content)) = choice.pointer_mut("/delta/content").map(Value::take) {
                    self.texts.entry(index).or_default().push_str(&content);
                    if let Some(Value::Object(delta)) = choice.get_mut("delta") {
                        delta.remove("content");
                    }
                }
                finishing |= choice.get("finish_reason").is_some_and(|reason| !reason.is_null());
            }
            choices.retain(|choice| carries_more_than_an_empty_delta(choice));
        }
        if finishing {
            self.release(true, checks, out).await?;
        } else if self
            .texts
            .values()
            .any(|text| text.chars().count() >= self.window_chars)
        {
            self.release(false, checks, out).await?;
        }
        let keep = object
            .get("choices")
            .and_then(Value::as_array)
            .is_some_and(|c| !c.is_empty())
            || object.get("usage").is_some_and(|usage| !usage.is_null());
        if keep {
            out.push(Bytes::from(serde_json::to_vec(&object).expect("a JSON map serialises")));
        }
        Ok(())
    }

    /// Checks what is held (all of it when `done`, else up to each choice's
    /// last whitespace) and writes it as content chunks.
    async fn release(&mut self, done: bool, checks: &mut Checks, out: &mut Vec<Bytes>) -> Result<(), ApiError> {
        let mut indexes = Vec::new();
        let mut window = Vec::new();
        for (index, text) in self.texts.iter_mut() {
            let cut = if done {
                text.len()
            } else {
                cut_point(text, self.window_chars)
            };
            if cut == 0 {
                continue;
            }
            indexes.push(*index);
            window.push(text.drain(..cut).collect::<String>());
        }
        if window.is_empty() {
            return Ok(());
        }
        let texts = match checks.answer(window, done, false).await? {
            AnswerOutcome::Pass(texts) => texts,
            // Not asked for a stream (`retry_left` is false).
            AnswerOutcome::Retry(reason) => return Err(super::denied("guardrail", "answer", &reason)),
        };
        for (index, text) in indexes.into_iter().zip(texts) {
            if text.is_empty() {
                continue;
            }
            let mut chunk = self.skeleton.clone();
            chunk.insert(
                "choices".into(),
                json!([{"index": index, "delta": {"content": text}, "finish_reason": null}]),
            );
            out.push(Bytes::from(serde_json::to_vec(&chunk).expect("a JSON map serialises")));
        }
        Ok(())
    }
}

/// Where to cut a held text: after its last whitespace once a window has
/// gathered; anywhere (at a char boundary) once it is far past the window.
fn cut_point(text: &str, window_chars: usize) -> usize {
    let chars = text.chars().count();
    if chars < window_chars {
        return 0;
    }
    match text.rfind(char::is_whitespace) {
        Some(at) => at + text[at..].chars().next().map_or(1, char::len_utf8),
        None if chars >= window_chars * HOLD_LIMIT => text.len(),
        None => 0,
    }
}

fn carries_more_than_an_empty_delta(choice: &Value) -> bool {
    let Some(object) = choice.as_object() else { return true };
    object.iter().any(|(key, value)| match key.as_str() {
        "index" => false,
        "delta" => value.as_object().is_some_and(|delta| !delta.is_empty()),
        _ => !value.is_null(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_cut_after_whitespace_and_never_inside_a_word() {
        assert_eq!(cut_point("short", 10), 0);
        let text = "mail [EMAIL_1] now";
        let cut = cut_point(text, 8);
        assert_eq!(&text[..cut], "mail [EMAIL_1] ");
        assert_eq!(cut_point("nowhitespaceatall", 4), "nowhitespaceatall".len());
        assert_eq!(cut_point("nowhitespace", 4), 0);
    }

    #[test]
    fn an_emptied_delta_is_dropped_but_a_finish_reason_stays() {
        assert!(!carries_more_than_an_empty_delta(&json!({"index": 0, "delta": {}})));
        assert!(carries_more_than_an_empty_delta(
            &json!({"index": 0, "delta": {"role": "assistant"}})
        ));
        assert!(carries_more_than_an_empty_delta(
            &json!({"index": 0, "delta": {}, "finish_reason": "stop"})
        ));
    }
}
