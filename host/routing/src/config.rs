//! Provider configuration as written under `[providers.<id>]`: overrides of a
//! built-in catalog entry, or a bring-your-own endpoint.

use serde::{Deserialize, Serialize};

/// A provider entry. Every field is optional so that a few lines can override one
/// field of a built-in provider; a new (bring-your-own) provider needs `base_url`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProviderConfig {
    pub name: Option<String>,
    pub adapter: Option<String>,
    pub base_url: Option<String>,
    pub api_key: Option<tollgate_core::secret::Secret>,
    pub api_key_env: Option<String>,
    /// Where the key goes: `none`, `bearer`, `header` (with `auth_header`),
    /// `query` (with `auth_query`) or `aws-sigv4` (with `aws_service`). Adapters
    /// may ask only for this slot.
    pub auth: Option<crate::catalog::AuthStyle>,
    pub auth_header: Option<String>,
    pub auth_query: Option<String>,
    pub aws_service: Option<String>,
    pub aws_region: Option<String>,
    /// Origins besides `base_url`'s that the provider's adapter may send to.
    pub allowed_origins: Option<Vec<String>>,
    pub models: Vec<ModelConfig>,
}

impl ProviderConfig {
    /// Applies the credential-slot and egress settings given here over a
    /// catalog entry's.
    pub fn overlay_auth(&self, entry: &mut crate::catalog::CatalogProvider) {
        if let Some(auth) = self.auth {
            entry.auth = auth;
        }
        let fields = [
            (&self.auth_header, &mut entry.auth_header),
            (&self.auth_query, &mut entry.auth_query),
            (&self.aws_service, &mut entry.aws_service),
            (&self.aws_region, &mut entry.aws_region),
        ];
        for (configured, field) in fields {
            if configured.is_some() {
                field.clone_from(configured);
            }
        }
        if let Some(origins) = &self.allowed_origins {
            entry.allowed_origins.clone_from(origins);
        }
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// Served as `<provider>/<id>`.
    pub id: String,
    /// The provider's own model name, when it differs from `id`.
    pub upstream: Option<String>,
    /// USD per million input tokens, as a decimal string. Omit both prices to
    /// list a model whose price is not known: it cannot be served while the
    /// wallet ledger is on, because nothing could be billed for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_price_per_mtok: Option<String>,
    /// USD per million output tokens, as a decimal string.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_price_per_mtok: Option<String>,
    /// USD per million prompt tokens read from the provider's prompt cache;
    /// by default the price table's, else the input price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_price_per_mtok: Option<String>,
    /// USD per million prompt tokens written to the provider's prompt cache;
    /// by default the price table's, else the input price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_price_per_mtok: Option<String>,
    /// USD per million reasoning tokens, when priced apart from output; by
    /// default the price table's, else the output price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_price_per_mtok: Option<String>,
    /// USD per request, on top of the tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_price: Option<String>,
    pub context_length: Option<u64>,
    /// The most output tokens the model writes in one answer: the limit sent
    /// when a request sets none, and the most a request may ask for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// The adapter that serves this model when it is not its provider's,
    /// with the provider's URL and key: `openai-responses` for a model an
    /// OpenAI-compatible provider serves only through its Responses API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter: Option<String>,
    /// The operations the model serves, from [`crate::catalog::OPERATIONS`]
    /// (`["embeddings"]` for an embedding model); by default the price
    /// table's, else `["chat"]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operations: Option<Vec<String>>,
    /// USD per image, by `quality/size` (`"hd/1024x1792"`), size, quality
    /// or `*` (any): an image model's price (docs/endpoints.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_prices: Option<std::collections::BTreeMap<String, String>>,
    /// USD per million characters of text turned into speech.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speech_price_per_mchars: Option<String>,
    /// USD per second of audio transcribed or translated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio_price_per_second: Option<String>,
    /// USD per search (a rerank call, as Cohere bills it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub search_price: Option<String>,
}

impl ModelConfig {
    /// A model known by name only: its price and facts come from elsewhere
    /// (the price table).
    pub fn named(id: &str) -> Self {
        ModelConfig {
            id: id.to_string(),
            upstream: None,
            input_price_per_mtok: None,
            output_price_per_mtok: None,
            cache_read_price_per_mtok: None,
            cache_write_price_per_mtok: None,
            reasoning_price_per_mtok: None,
            request_price: None,
            context_length: None,
            max_output_tokens: None,
            adapter: None,
            operations: None,
            image_prices: None,
            speech_price_per_mchars: None,
            audio_price_per_second: None,
            search_price: None,
        }
    }
}
