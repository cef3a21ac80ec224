//! The source's models priced in the operations' own units: images (per
//! image, by quality and size, from keys like `hd/1024-x-1792/dall-e-3`,
//! per image or per pixel), speech per character, transcription per second
//! of audio, rerank per search (query). Models the source prices only by
//! tokens in these modes (image tokens, audio tokens) are left out: what
//! their answers report cannot be checked against a hold in advance.

use std::collections::BTreeMap;

use super::{Entry, text};
use crate::prices::{TableModel, per_mtok, usd_times};

/// Qualities the source writes as a key's first segment.
const QUALITIES: [&str; 6] = ["low", "medium", "high", "standard", "hd", "auto"];

/// A unit-priced entry: the model it prices (the key without its quality
/// and size), and what it adds to that model.
pub struct UnitEntry {
    pub model: String,
    pub part: Part,
}

#[derive(Clone)]
pub enum Part {
    /// One image price, under its table key (`quality/size`, `size` or `*`).
    Image(String, String),
    Speech(String),
    Transcription(String),
    Search(String),
}

/// `entry` (its key without the provider's prefix) as a unit price, if its
/// mode is priced in units and the source gives such a price.
pub fn unit_entry(model_key: &str, entry: &Entry) -> anyhow::Result<Option<UnitEntry>> {
    let number = |field: &str| entry.get(field).map(|v| v.get().to_string()).filter(|v| v != "null");
    let positive = |value: &Option<String>| value.as_deref().is_some_and(|v| v.trim_start_matches(['0', '.']) != "");
    let found = match text(entry, "mode").as_deref() {
        Some("image_generation") => {
            let Some((quality, size, model)) = image_key(model_key) else {
                return Ok(None);
            };
            let per_image = number("output_cost_per_image")
                .filter(|_| positive(&number("output_cost_per_image")))
                .or_else(|| number("input_cost_per_image").filter(|v| positive(&Some(v.clone()))));
            let price = match (per_image, number("input_cost_per_pixel"), &size) {
                (Some(per_image), _, _) => usd_times(&per_image, 1)?,
                (None, Some(per_pixel), Some(size)) if positive(&Some(per_pixel.clone())) => {
                    let (w, h) = size.split_once('x').expect("image_key checked the size");
                    usd_times(&per_pixel, w.parse::<u64>()? * h.parse::<u64>()?)?
                }
                _ => return Ok(None),
            };
            let key = match (quality, size) {
                (Some(q), Some(s)) => format!("{q}/{s}"),
                (None, Some(s)) => s,
                (Some(q), None) => q,
                (None, None) => "*".to_string(),
            };
            Some((model, Part::Image(key, price)))
        }
        Some("audio_speech") => number("input_cost_per_character")
            .filter(|v| positive(&Some(v.clone())))
            .map(|per_char| per_mtok(&per_char).map(|p| (model_key.to_string(), Part::Speech(p))))
            .transpose()?,
        Some("audio_transcription") => number("input_cost_per_second")
            .filter(|v| positive(&Some(v.clone())))
            .map(|per_second| usd_times(&per_second, 1).map(|p| (model_key.to_string(), Part::Transcription(p))))
            .transpose()?,
        Some("rerank") => number("input_cost_per_query")
            .filter(|v| positive(&Some(v.clone())))
            .map(|per_query| usd_times(&per_query, 1).map(|p| (model_key.to_string(), Part::Search(p))))
            .transpose()?,
        _ => None,
    };
    Ok(found.map(|(model, part)| UnitEntry { model, part }))
}

/// `quality/W-x-H/model`, `W-x-H/model` or `model` → (quality, `WxH`,
/// model); `None` for step-count and `max-x-max` templates.
fn image_key(key: &str) -> Option<(Option<String>, Option<String>, String)> {
    let size_of = |segment: &str| {
        let (w, h) = segment.split_once("-x-")?;
        (w.parse::<u32>().is_ok() && h.parse::<u32>().is_ok()).then(|| format!("{w}x{h}"))
    };
    if key.contains("-steps/") || key.starts_with("max-x-max") {
        return None;
    }
    let mut segments = key.splitn(3, '/');
    let first = segments.next()?;
    if QUALITIES.contains(&first) {
        let size = size_of(segments.next()?)?;
        return Some((Some(first.to_string()), Some(size), segments.next()?.to_string()));
    }
    if let Some(size) = size_of(first) {
        let rest: Vec<&str> = segments.collect();
        return Some((None, Some(size), rest.join("/")));
    }
    Some((None, None, key.to_string()))
}

/// Folds unit parts into table models, one per model name.
pub fn fold(parts: Vec<UnitEntry>, source_key: impl Fn(&str) -> String) -> BTreeMap<String, TableModel> {
    let mut models: BTreeMap<String, TableModel> = BTreeMap::new();
    for UnitEntry { model, part } in parts {
        let entry = models.entry(model.clone()).or_insert_with(|| TableModel {
            key: source_key(&model),
            input: "0".into(),
            output: "0".into(),
            cache_read: None,
            cache_write: None,
            reasoning: None,
            context_length: None,
            max_output_tokens: None,
            capabilities: Some(Vec::new()),
            adapter: None,
            operations: Some(Vec::new()),
            images: None,
            per_mchars: None,
            per_second: None,
            per_search: None,
        });
        let operations = entry.operations.get_or_insert_with(Vec::new);
        let mut serve = |op: &str| {
            if !operations.iter().any(|o| o == op) {
                operations.push(op.to_string());
            }
        };
        match part {
            Part::Image(key, price) => {
                serve("image_generation");
                entry.images.get_or_insert_with(BTreeMap::new).insert(key, price);
            }
            Part::Speech(price) => {
                serve("speech");
                entry.per_mchars = Some(price);
            }
            Part::Transcription(price) => {
                serve("transcription");
                entry.per_second = Some(price);
            }
            Part::Search(price) => {
                serve("rerank");
                entry.per_search = Some(price);
            }
        }
    }
    models
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_keys_name_quality_size_and_model() {
        assert_eq!(
            image_key("hd/1024-x-1792/dall-e-3"),
            Some((Some("hd".into()), Some("1024x1792".into()), "dall-e-3".into()))
        );
        assert_eq!(
            image_key("256-x-256/dall-e-2"),
            Some((None, Some("256x256".into()), "dall-e-2".into()))
        );
        assert_eq!(
            image_key("imagen-3.0-generate-001"),
            Some((None, None, "imagen-3.0-generate-001".into()))
        );
        assert_eq!(image_key("1024-x-1024/50-steps/stability.sd"), None);
        assert_eq!(image_key("max-x-max/max-steps/x"), None);
    }
}
