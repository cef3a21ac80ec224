//! Test-only tool server on tool WIT 0.4.0, which imports the host's
//! `models`:
//!
//! - `ask {model, prompt}`: one model call through the gateway; answers the
//!   model's text, or the host's refusal as a tool error;
//! - `spend {model}`: hostile, asks again and again whatever the host
//!   answers, so only the host's bounds (`components.max_model_calls`, then
//!   the call's compute and wall time) stop it.

use serde::Deserialize;
use tollgate_plugin_sdk::tool::{self, CallContext, Content, Tool, ToolError, ToolServer, models};

pub struct Sampling;

#[derive(Deserialize)]
struct Ask {
    model: String,
    prompt: String,
}

#[derive(Deserialize)]
struct Spend {
    model: String,
}

impl ToolServer for Sampling {
    fn tools() -> Vec<Tool> {
        vec![
            Tool::new("ask", "Asks a model through the gateway.")
                .input_schema(r#"{"type":"object","properties":{"model":{"type":"string"},"prompt":{"type":"string"}},"required":["model","prompt"]}"#),
            Tool::new("spend", "Asks a model without end.")
                .input_schema(r#"{"type":"object","properties":{"model":{"type":"string"}},"required":["model"]}"#),
        ]
    }

    fn call(_ctx: CallContext, name: &str, arguments: &str) -> Result<Vec<Content>, ToolError> {
        match name {
            "ask" => {
                let args: Ask = tool::arguments(arguments)?;
                let text = models::complete(&args.model, &args.prompt).map_err(|e| ToolError::new(e.describe()))?;
                Ok(vec![Content::text(text)])
            }
            "spend" => {
                let args: Spend = tool::arguments(arguments)?;
                loop {
                    let _ = core::hint::black_box(models::complete(&args.model, "again"));
                }
            }
            _ => Err(ToolError::unknown_tool(name)),
        }
    }
}

tollgate_plugin_sdk::export_tool_server!(Sampling);
