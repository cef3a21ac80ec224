//! Where a request's and an answer's texts are, so a guard can read and
//! replace them without touching anything else: the host keeps the request's
//! model, parameters and structure, and the answer's, whatever a guard says.

use serde_json::{Map, Value};

use super::GuardText;

/// Where one text sits in a request body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// `messages[i].content`, a string.
    Message(usize),
    /// `messages[i].content[j].text`.
    Part(usize, usize),
    /// `input`, a string.
    Input,
    /// `input[i]`.
    InputItem(usize),
}

/// A request body's texts and where each came from.
pub struct RequestTexts {
    places: Vec<Place>,
    pub texts: Vec<GuardText>,
}

impl RequestTexts {
    /// A chat-completions body's message texts: each string content, and
    /// each `text` part of a multi-part content.
    pub fn chat(body: &Value) -> Self {
        let mut found = RequestTexts {
            places: Vec::new(),
            texts: Vec::new(),
        };
        let Some(messages) = body.get("messages").and_then(Value::as_array) else {
            return found;
        };
        for (i, message) in messages.iter().enumerate() {
            let role = message.get("role").and_then(Value::as_str).unwrap_or_default();
            match message.get("content") {
                Some(Value::String(content)) => found.push(Place::Message(i), role, content),
                Some(Value::Array(parts)) => {
                    for (j, part) in parts.iter().enumerate() {
                        if let Some(text) = part.get("text").and_then(Value::as_str) {
                            found.push(Place::Part(i, j), role, text);
                        }
                    }
                }
                _ => {}
            }
        }
        found
    }

    /// An embeddings body's inputs: one string, or a list of strings (token
    /// arrays carry no text a guard could read).
    pub fn embeddings(body: &Value) -> Self {
        let mut found = RequestTexts {
            places: Vec::new(),
            texts: Vec::new(),
        };
        match body.get("input") {
            Some(Value::String(input)) => found.push(Place::Input, "input", input),
            Some(Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    if let Some(text) = item.as_str() {
                        found.push(Place::InputItem(i), "input", text);
                    }
                }
            }
            _ => {}
        }
        found
    }

    fn push(&mut self, place: Place, role: &str, content: &str) {
        self.places.push(place);
        self.texts.push(GuardText {
            role: role.to_string(),
            content: content.to_string(),
        });
    }

    /// Writes `texts` (one per text found, in order) back where they came from.
    pub fn apply(&self, body: &mut Value, texts: &[GuardText]) {
        for (place, text) in self.places.iter().zip(texts) {
            let content = Value::String(text.content.clone());
            let slot = match *place {
                Place::Message(i) => body.pointer_mut(&format!("/messages/{i}/content")),
                Place::Part(i, j) => body.pointer_mut(&format!("/messages/{i}/content/{j}/text")),
                Place::Input => body.pointer_mut("/input"),
                Place::InputItem(i) => body.pointer_mut(&format!("/input/{i}")),
            };
            if let Some(slot) = slot {
                *slot = content;
            }
        }
    }
}

/// A whole answer's texts: each choice's message content (chat), or each
/// text block (a native Anthropic message).
pub fn answer_texts(object: &Map<String, Value>, native: bool) -> Vec<String> {
    answer_slots(object, native)
        .into_iter()
        .map(|pointer| {
            object_pointer(object, &pointer)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

/// Writes an answer's texts back, one for one.
pub fn apply_answer(object: &mut Map<String, Value>, native: bool, texts: Vec<String>) {
    let slots = answer_slots(object, native);
    let mut whole = Value::Object(std::mem::take(object));
    for (pointer, text) in slots.into_iter().zip(texts) {
        if let Some(slot) = whole.pointer_mut(&pointer) {
            *slot = Value::String(text);
        }
    }
    if let Value::Object(back) = whole {
        *object = back;
    }
}

fn answer_slots(object: &Map<String, Value>, native: bool) -> Vec<String> {
    if native {
        let Some(blocks) = object.get("content").and_then(Value::as_array) else {
            return Vec::new();
        };
        return blocks
            .iter()
            .enumerate()
            .filter(|(_, block)| block.get("text").is_some_and(Value::is_string))
            .map(|(i, _)| format!("/content/{i}/text"))
            .collect();
    }
    let Some(choices) = object.get("choices").and_then(Value::as_array) else {
        return Vec::new();
    };
    choices
        .iter()
        .enumerate()
        .filter(|(_, choice)| choice.pointer("/message/content").is_some_and(Value::is_string))
        .map(|(i, _)| format!("/choices/{i}/message/content"))
        .collect()
}

fn object_pointer<'a>(object: &'a Map<String, Value>, pointer: &str) -> Option<&'a Value> {
    let mut parts = pointer.trim_start_matches('/').splitn(2, '/');
    let first = object.get(parts.next()?)?;
    match parts.next() {
        Some(rest) => first.pointer(&format!("/{rest}")),
        None => Some(first),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn chat_texts_are_found_and_replaced_in_place() {
        let mut body = json!({"model": "a/b", "temperature": 0.5, "messages": [
            {"role": "system", "content": "be kind"},
            {"role": "user", "content": [{"type": "text", "text": "mail bob@x.io"}, {"type": "image_url", "image_url": {"url": "u"}}]},
            {"role": "assistant", "content": null, "tool_calls": []},
        ]});
        let found = RequestTexts::chat(&body);
        assert_eq!(found.texts.len(), 2);
        assert_eq!(found.texts[1].role, "user");
        let mut texts = found.texts.clone();
        texts[1].content = "mail [EMAIL_1]".into();
        found.apply(&mut body, &texts);
        assert_eq!(body["messages"][1]["content"][0]["text"], "mail [EMAIL_1]");
        assert_eq!(body["messages"][1]["content"][1]["image_url"]["url"], "u");
        assert_eq!(body["temperature"], 0.5);
    }

    #[test]
    fn embeddings_inputs_are_texts() {
        let mut body = json!({"model": "a/b", "input": ["one", "two"]});
        let found = RequestTexts::embeddings(&body);
        let mut texts = found.texts.clone();
        texts[1].content = "deux".into();
        found.apply(&mut body, &texts);
        assert_eq!(body["input"], json!(["one", "deux"]));
    }

    #[test]
    fn answer_texts_round_trip() {
        let mut object =
            json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi [EMAIL_1]"}}]})
                .as_object()
                .unwrap()
                .clone();
        assert_eq!(answer_texts(&object, false), ["hi [EMAIL_1]"]);
        apply_answer(&mut object, false, vec!["hi bob@x.io".into()]);
        assert_eq!(object["choices"][0]["message"]["content"], "hi bob@x.io");
        let native = json!({"content": [{"type": "text", "text": "a"}, {"type": "tool_use"}]})
            .as_object()
            .unwrap()
            .clone();
        assert_eq!(answer_texts(&native, true), ["a"]);
    }
}
