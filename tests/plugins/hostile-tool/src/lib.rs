//! Test-only tool server for the sandbox tests: each tool misbehaves in one
//! way, and `ok` behaves, so a test can show the next call still works.
//!
//! - `ok`: answers `"fine"`;
//! - `loop`: spins forever;
//! - `bomb`: allocates and touches 1 MiB blocks forever;
//! - `huge`: answers 8 MiB of text;
//! - `panic`: panics (the plugin profile aborts, so the component traps);
//! - `fetch {url, credential?}`: GETs any URL through the host, optionally
//!   asking for a credential, and answers the status and body (or the host's
//!   refusal, as a tool error).

use core::hint::black_box;

use serde::Deserialize;
use tollgate_plugin_sdk::tool::{self, CallContext, Content, Tool, ToolError, ToolServer, http};

pub struct Hostile;

#[derive(Deserialize)]
struct Fetch {
    url: String,
    credential: Option<String>,
}

impl ToolServer for Hostile {
    fn tools() -> Vec<Tool> {
        ["ok", "loop", "bomb", "huge", "panic", "fetch"]
            .into_iter()
            .map(|name| Tool::new(name, "misbehaves on purpose"))
            .collect()
    }

    fn call(_ctx: CallContext, name: &str, arguments: &str) -> Result<Vec<Content>, ToolError> {
        match name {
            "ok" => Ok(vec![Content::text("fine")]),
            "loop" => {
                let mut n: u64 = 0;
                loop {
                    n = black_box(n.wrapping_add(1));
                }
            }
            "bomb" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(black_box(vec![1u8; 1 << 20]));
                }
            }
            "huge" => Ok(vec![Content::text("x".repeat(8 << 20))]),
            "panic" => panic!("the hostile tool panicked"),
            "fetch" => {
                let args: Fetch = tool::arguments(arguments)?;
                let response = http::send(&http::Request {
                    method: "GET".into(),
                    url: args.url,
                    headers: Vec::new(),
                    body: Vec::new(),
                    credential: args.credential,
                })
                .map_err(|e| ToolError::new(e.message()))?;
                Ok(vec![Content::text(format!(
                    "{} {}",
                    response.status,
                    String::from_utf8_lossy(&response.body)
                ))])
            }
            _ => Err(ToolError::unknown_tool(name)),
        }
    }
}

tollgate_plugin_sdk::export_tool_server!(Hostile);
