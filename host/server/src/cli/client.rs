//! The control-plane client: `tollgate signup`, `workspaces …` (with the
//! package policy), `keys …`, `members …`, `namespaces …` (with their
//! signing keys), `wallet`, `plan …`, `budget …`, `usage`, `audit`, `request ID`, and the
//! workspace's installs (`install`, `upgrade`, `uninstall`, `installs`) and remote MCP
//! servers (`mcp-servers …`, in `mcp_servers`). Each command is
//! one JSON-RPC call of an extension method on `POST /a2a`, so the CLI has
//! exactly the permissions of its key. The server URL and key come from flags,
//! then `TOLLGATE_URL` / `TOLLGATE_API_KEY`, then a profile file.
//!
//! The clap definitions are in `commands`, the op and params each command
//! sends in `requests`, and where the URL and key come from in `profile`;
//! this module sends the call and prints the answer.

mod commands;
mod mcp_servers;
mod profile;
mod requests;

use anyhow::Context;
use serde_json::{Value, json};

pub use commands::ClientCommand;
pub use profile::Connection;
use profile::save_profile;

pub async fn run(command: ClientCommand) -> anyhow::Result<()> {
    let connection = command.connection();
    let (url, api_key) = connection.resolve()?;
    let (op, params) = command.op(connection.workspace.as_deref())?;
    let result = call(&url, api_key.as_deref(), op, params).await?;
    if let ClientCommand::Signup { save: true, .. } = &command {
        save_profile(
            &connection.profile,
            &url,
            result["api_key"].as_str().unwrap_or_default(),
        )?;
    }
    if connection.json {
        println!("{}", serde_json::to_string(&result)?);
    } else {
        super::output::print_human(&result);
        if result.get("api_key").is_some() {
            println!("(the key is shown only this once)");
        }
        // An install says who signed what it runs and what it asks for.
        if matches!(op, "installs.create" | "installs.update") {
            println!("{}", super::packages::signed_line(&result["signature"]));
            println!("{}", super::packages::asks_line(&result["capabilities"]));
        }
    }
    Ok(())
}

/// One control-plane op as a JSON-RPC extension method on `POST /a2a`.
pub async fn call(url: &str, api_key: Option<&str>, op: &str, params: Value) -> anyhow::Result<Value> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": op.replacen('.', "/", 1), "params": params});
    let mut request = reqwest::Client::new()
        .post(format!("{url}/a2a"))
        .header("A2A-Version", "1.0")
        .json(&body);
    if let Some(key) = api_key {
        request = request.bearer_auth(key);
    }
    let response = request
        .send()
        .await
        .with_context(|| format!("cannot reach the gateway at {url}"))?;
    let status = response.status();
    let text = response.text().await?;
    let answer: Value = serde_json::from_str(&text)
        .with_context(|| format!("{url}/a2a answered HTTP {status} with something other than JSON-RPC"))?;
    if let Some(error) = answer.get("error") {
        let reason = error["data"][0]["reason"].as_str().unwrap_or("ERROR");
        anyhow::bail!("{reason}: {}", error["message"].as_str().unwrap_or("unknown error"));
    }
    Ok(answer["result"].clone())
}
