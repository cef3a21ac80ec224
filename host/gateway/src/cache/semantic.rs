//! Semantic matching: a request's texts embedded through the gateway's own
//! metered embeddings (billed to the caller like any embeddings request),
//! compared by cosine similarity with the kept requests of the same shape
//! (same workspace, model, parameters and roles; only the texts differ).
//! A match at or above the threshold serves that request's exact entry.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::Key;

/// `[cache.semantic]`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct SemanticConfig {
    /// The embeddings model (`<provider>/<model>`); semantic matching is off
    /// without one.
    pub model: Option<String>,
    /// The vectors' length, for models that take `dimensions` (smaller is
    /// cheaper to keep and compare); the model's own when unset.
    pub dimensions: Option<u32>,
    /// The cosine similarity at or above which a kept answer is served.
    pub threshold: f64,
    /// Kept requests per shape; the oldest go first.
    pub max_per_shape: usize,
    /// Shapes kept in all; past it the index starts over.
    pub max_shapes: usize,
}

impl Default for SemanticConfig {
    fn default() -> Self {
        SemanticConfig {
            model: None,
            dimensions: None,
            threshold: 0.95,
            max_per_shape: 256,
            max_shapes: 10_000,
        }
    }
}

impl SemanticConfig {
    pub fn check(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.threshold > 0.0 && self.threshold <= 1.0,
            "cache.semantic.threshold must be in (0, 1]"
        );
        anyhow::ensure!(
            self.max_per_shape >= 1,
            "cache.semantic.max_per_shape must be at least 1"
        );
        Ok(())
    }
}

struct Kept {
    vector: Vec<f32>,
    key: Key,
    stored: Instant,
}

/// The kept requests' vectors, by shape.
pub struct Index {
    by_shape: Mutex<HashMap<Key, VecDeque<Kept>>>,
    max_per_shape: usize,
    max_shapes: usize,
}

impl Index {
    pub fn new(config: &SemanticConfig) -> Self {
        Index {
            by_shape: Mutex::new(HashMap::new()),
            max_per_shape: config.max_per_shape,
            max_shapes: config.max_shapes,
        }
    }

    /// The exact key of the most similar kept request of `shape` younger
    /// than `ttl`, with its similarity, when it reaches `threshold`.
    pub fn nearest(&self, shape: &Key, vector: &[f32], threshold: f64, ttl: Duration) -> Option<(Key, f64)> {
        let mut by_shape = self.by_shape.lock().expect("semantic index lock");
        let kept = by_shape.get_mut(shape)?;
        kept.retain(|entry| entry.stored.elapsed() <= ttl);
        kept.iter()
            .map(|entry| (entry.key, cosine(&entry.vector, vector)))
            .filter(|(_, similarity)| *similarity >= threshold)
            .max_by(|a, b| a.1.total_cmp(&b.1))
    }

    pub fn insert(&self, shape: Key, vector: Vec<f32>, key: Key) {
        let mut by_shape = self.by_shape.lock().expect("semantic index lock");
        if by_shape.len() >= self.max_shapes && !by_shape.contains_key(&shape) {
            by_shape.clear();
        }
        let kept = by_shape.entry(shape).or_default();
        if kept.len() >= self.max_per_shape {
            kept.pop_front();
        }
        kept.push_back(Kept {
            vector,
            key,
            stored: Instant::now(),
        });
    }
}

/// Cosine similarity; 0 for vectors of different lengths or zero norm.
pub fn cosine(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() || a.is_empty() {
        return 0.0;
    }
    let (mut dot, mut norm_a, mut norm_b) = (0.0f64, 0.0f64, 0.0f64);
    for (x, y) in a.iter().zip(b) {
        let (x, y) = (f64::from(*x), f64::from(*y));
        dot += x * y;
        norm_a += x * x;
        norm_b += y * y;
    }
    if norm_a == 0.0 || norm_b == 0.0 {
        return 0.0;
    }
    dot / (norm_a.sqrt() * norm_b.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_match_above_the_threshold_is_found() {
        let index = Index::new(&SemanticConfig::default());
        index.insert([1; 32], vec![1.0, 0.0], [7; 32]);
        index.insert([1; 32], vec![0.0, 1.0], [8; 32]);
        let ttl = Duration::from_secs(60);
        let (key, similarity) = index.nearest(&[1; 32], &[0.9, 0.1], 0.95, ttl).unwrap();
        assert_eq!(key, [7; 32]);
        assert!(similarity > 0.99);
        assert!(index.nearest(&[1; 32], &[0.7, 0.7], 0.95, ttl).is_none());
        assert!(index.nearest(&[2; 32], &[1.0, 0.0], 0.95, ttl).is_none());
    }
}
