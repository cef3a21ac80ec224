//! Built-in tool server `tollgate/calculator`: one tool, `evaluate`, that
//! computes an arithmetic expression in exact decimal arithmetic (28
//! significant digits, no binary floating point: `0.1 + 0.2` is `0.3`).

mod expression;

use serde::Deserialize;
use tollgate_plugin_sdk::tool::{self, CallContext, Content, Tool, ToolError, ToolServer};

pub struct Calculator;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Arguments {
    expression: String,
}

const INPUT_SCHEMA: &str = r#"{
  "type": "object",
  "properties": {
    "expression": {
      "type": "string",
      "description": "Numbers, + - * / % ^ (integer powers) and parentheses, e.g. 2*(3+4)",
      "examples": ["2*(3+4)"],
      "maxLength": 4096
    }
  },
  "required": ["expression"],
  "additionalProperties": false
}"#;

impl ToolServer for Calculator {
    fn tools() -> Vec<Tool> {
        vec![
            Tool::new(
                "evaluate",
                "Evaluates an arithmetic expression exactly, in decimal (not floating point). \
                 Operators: + - * / % and ^ with an integer exponent; parentheses; unary minus. \
                 Answers the value as text, e.g. 14 for 2*(3+4).",
            )
            .input_schema(INPUT_SCHEMA)
            .read_only()
            .open_world(false),
        ]
    }

    fn call(_ctx: CallContext, name: &str, arguments: &str) -> Result<Vec<Content>, ToolError> {
        match name {
            "evaluate" => {
                let arguments: Arguments = tool::arguments(arguments)?;
                let value = expression::evaluate(&arguments.expression).map_err(ToolError::new)?;
                Ok(vec![Content::text(value.normalize().to_string())])
            }
            _ => Err(ToolError::unknown_tool(name)),
        }
    }
}

tollgate_plugin_sdk::export_tool_server!(Calculator);
