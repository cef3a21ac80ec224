//! Built-in tool server `tollgate/http-fetch`: one tool, `fetch`, that GETs a
//! URL and answers its body as text. It can reach only the origins approved
//! when it was installed (the host checks, not this code), follows no
//! redirects, and answers at most `max_chars` characters (install setting,
//! default 20000) of the body.

use serde::Deserialize;
use tollgate_plugin_sdk::tool::{self, CallContext, Content, Tool, ToolError, ToolServer, config, http};

pub struct HttpFetch;

/// Characters of the body answered when the install sets no `max_chars`.
const DEFAULT_MAX_CHARS: usize = 20_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Arguments {
    url: String,
}

const INPUT_SCHEMA: &str = r#"{
  "type": "object",
  "properties": {
    "url": {"type": "string", "description": "An http(s) URL on an origin approved for this install"}
  },
  "required": ["url"],
  "additionalProperties": false
}"#;

impl ToolServer for HttpFetch {
    fn tools() -> Vec<Tool> {
        vec![
            Tool::new(
                "fetch",
                "GETs a URL (on an origin approved for this install) and answers the body as text. \
                 Redirects are not followed; long bodies are cut.",
            )
            .input_schema(INPUT_SCHEMA)
            .read_only()
            .open_world(true),
        ]
    }

    fn call(_ctx: CallContext, name: &str, arguments: &str) -> Result<Vec<Content>, ToolError> {
        if name != "fetch" {
            return Err(ToolError::unknown_tool(name));
        }
        let arguments: Arguments = tool::arguments(arguments)?;
        let response =
            http::get(&arguments.url).map_err(|e| ToolError::new(format!("GET {}: {}", arguments.url, e.message())))?;
        if !(200..300).contains(&response.status) {
            return Err(ToolError::new(format!(
                "GET {} answered HTTP {}",
                arguments.url, response.status
            )));
        }
        let max_chars = config::get("max_chars")
            .and_then(|v| v.parse().ok())
            .unwrap_or(DEFAULT_MAX_CHARS);
        Ok(vec![Content::text(cut(
            &String::from_utf8_lossy(&response.body),
            max_chars,
        ))])
    }
}

/// The first `max_chars` characters of `text`, with a note when cut.
fn cut(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => format!("{}\n[cut at {max_chars} characters]", &text[..end]),
        None => text.to_string(),
    }
}

tollgate_plugin_sdk::export_tool_server!(HttpFetch);

#[cfg(test)]
mod tests {
    use super::cut;

    #[test]
    fn cuts_on_character_boundaries() {
        assert_eq!(cut("héllo", 10), "héllo");
        assert_eq!(cut("héllo", 2), "hé\n[cut at 2 characters]");
    }
}
