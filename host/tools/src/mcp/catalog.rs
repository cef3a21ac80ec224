//! Prompts, resources and completion on `/v1/mcp`: what 0.2.0 tool servers
//! list (`prompts/list`, `resources/list`, `resources/templates/list`) and
//! the calls that read them (`prompts/get`, `resources/read`,
//! `completion/complete`), each a component run in a fresh store under the
//! tool-call caps; prompt-template installs join the prompts ([`templates`]). On `/v1/mcp` prompt and resource names are
//! `<install>__<name>` as tools are; URIs stay as the server gave them, and a
//! URI (or URI template) that two installs both claim must be read on
//! `/v1/mcp/{install}`.

use std::sync::Arc;

use serde_json::{Value, json};
use tollgate_components::{CallError, Catalog, Invocation, Reference, Role, ToolServer, mcp_content, mcp_resource};
use tollgate_web::server::RequestId;

use super::{INVALID_PARAMS, Scope, remote, templates};
use crate::calls::SEPARATOR;
use crate::installs::{Active, Loaded};

/// MCP's code for a resource no server offers.
const RESOURCE_NOT_FOUND: i64 = -32002;
pub(super) const INTERNAL_ERROR: i64 = -32603;
/// Longest URI or argument value taken, in bytes.
const MAX_INPUT: usize = 8 << 10;

pub(super) type Outcome = Result<Value, (i64, String)>;

/// The installs in scope: the workspace's, or the one `/v1/mcp/{install}`
/// names; only those the caller's tool policy lets it use something of.
pub(super) fn in_scope(scope: &Scope) -> impl Iterator<Item = Arc<Active>> + '_ {
    (scope.components.installs.in_workspace(scope.workspace_id()).into_iter())
        .filter(move |active| scope.only.as_deref().is_none_or(|only| only == active.record.name))
        .filter(move |active| scope.policy().sees(&active.record.name))
}

/// The 0.2.0 tool servers in scope whose resources and URI templates the
/// caller may read: those its policy allows whole, since a resource is
/// read by URI and has no name a list could give.
fn readable(scope: &Scope) -> Vec<(Arc<Active>, Arc<ToolServer>)> {
    let mut servers = servers(scope);
    servers.retain(|(active, _)| scope.policy().allows_whole(&active.record.name));
    servers
}

/// The 0.2.0 tool servers in scope, with their install.
fn servers(scope: &Scope) -> Vec<(Arc<Active>, Arc<ToolServer>)> {
    in_scope(scope)
        .filter_map(|active| match &active.component {
            Loaded::Tool(server) if !server.catalog().is_empty() => {
                let server = server.clone();
                Some((active, server))
            }
            _ => None,
        })
        .collect()
}

/// The capabilities the scope's installs serve, for `initialize`: each only
/// when some server (or, for prompts, a prompt template) offers it.
pub(super) fn capabilities(scope: &Scope, capabilities: &mut Value) {
    let servers = servers(scope);
    let any = |has: fn(&Catalog) -> bool| servers.iter().any(|(_, server)| has(server.catalog()));
    let template_prompts = templates::any(scope);
    if template_prompts || any(|c| !c.prompts.is_empty()) {
        capabilities["prompts"] = json!({"listChanged": false});
    }
    if any(|c| !c.resources.is_empty() || !c.templates.is_empty()) {
        capabilities["resources"] = json!({"subscribe": false, "listChanged": false});
    }
    if template_prompts || any(|c| !c.prompts.is_empty() || !c.templates.is_empty()) {
        capabilities["completions"] = json!({});
    }
}

/// `<install>__<name>` on `/v1/mcp`, `<name>` on `/v1/mcp/{install}`.
pub(super) fn named(scope: &Scope, install: &str, name: &str) -> String {
    match scope.only {
        Some(_) => name.to_string(),
        None => format!("{install}{SEPARATOR}{name}"),
    }
}

/// A prompt argument as `prompts/list` shows it.
pub(super) fn argument_entry(name: &str, required: bool, description: Option<&str>) -> Value {
    let mut entry = json!({"name": name, "required": required});
    if let Some(description) = description {
        entry["description"] = json!(description);
    }
    entry
}

pub(super) async fn list_prompts(scope: &Scope) -> Value {
    let mut prompts = Vec::new();
    for (active, server) in servers(scope) {
        let offered = server.catalog().prompts.iter();
        for prompt in offered.filter(|prompt| scope.policy().allows(&active.record.name, &prompt.name)) {
            let arguments: Vec<Value> = (prompt.arguments.iter())
                .map(|argument| argument_entry(&argument.name, argument.required, argument.description.as_deref()))
                .collect();
            prompts.push(json!({
                "name": named(scope, &active.record.name, &prompt.name),
                "description": prompt.description,
                "arguments": arguments,
            }));
        }
    }
    prompts.extend(templates::list(scope));
    prompts.extend(remote::gather(scope, "prompts/list", "prompts").await);
    json!({ "prompts": prompts })
}

pub(super) async fn list_resources(scope: &Scope) -> Value {
    let mut resources = Vec::new();
    for (active, server) in readable(scope) {
        for resource in &server.catalog().resources {
            let mut entry = json!({"uri": resource.uri, "name": named(scope, &active.record.name, &resource.name)});
            if let Some(description) = &resource.description {
                entry["description"] = json!(description);
            }
            if let Some(mime) = &resource.mime_type {
                entry["mimeType"] = json!(mime);
            }
            resources.push(entry);
        }
    }
    resources.extend(remote::gather(scope, "resources/list", "resources").await);
    json!({ "resources": resources })
}

pub(super) async fn list_templates(scope: &Scope) -> Value {
    let mut templates = Vec::new();
    for (active, server) in readable(scope) {
        for template in &server.catalog().templates {
            let mut entry = json!({
                "uriTemplate": template.uri_template,
                "name": named(scope, &active.record.name, &template.name),
            });
            if let Some(description) = &template.description {
                entry["description"] = json!(description);
            }
            if let Some(mime) = &template.mime_type {
                entry["mimeType"] = json!(mime);
            }
            templates.push(entry);
        }
    }
    templates.extend(remote::gather(scope, "resources/templates/list", "resourceTemplates").await);
    json!({ "resourceTemplates": templates })
}

/// A fresh request id and the install's identity for one component run.
fn invocation(scope: &Scope, active: &Active) -> Invocation {
    Invocation {
        request_id: RequestId::new().0.to_string(),
        workspace: scope.workspace_id().to_string(),
        install: active.record.name.clone(),
        depth: 0,
        logs: None,
        progress: None,
        elicit: None,
    }
}

/// The install and prompt a (possibly prefixed) prompt name means.
fn find_prompt(scope: &Scope, name: &str) -> Option<(Arc<Active>, Arc<ToolServer>, String)> {
    let (install, prompt) = match scope.only.as_deref() {
        Some(only) => (only, name),
        None => name.split_once(SEPARATOR)?,
    };
    if !scope.policy().allows(install, prompt) {
        return None;
    }
    servers(scope)
        .into_iter()
        .find(|(active, server)| active.record.name == install && server.catalog().prompt(prompt).is_some())
        .map(|(active, server)| (active, server, prompt.to_string()))
}

fn failed(error: CallError) -> (i64, String) {
    match error {
        CallError::Tool(error) => (INVALID_PARAMS, error.message),
        other => (INTERNAL_ERROR, other.to_string()),
    }
}

fn string_param<'a>(params: &'a Value, pointer: &str, what: &str) -> Result<&'a str, (i64, String)> {
    params
        .pointer(pointer)
        .and_then(Value::as_str)
        .filter(|text| text.len() <= MAX_INPUT)
        .ok_or_else(|| {
            (
                INVALID_PARAMS,
                format!("{what} must be a string of at most {MAX_INPUT} bytes"),
            )
        })
}

/// `prompts/get`'s arguments: an object of short strings.
fn prompt_arguments(params: &Value) -> Result<Vec<(String, String)>, (i64, String)> {
    let mut arguments = Vec::new();
    match params.get("arguments") {
        None | Some(Value::Null) => {}
        Some(Value::Object(given)) => {
            for (key, value) in given {
                let value = value
                    .as_str()
                    .filter(|value| value.len() <= MAX_INPUT)
                    .ok_or_else(|| (INVALID_PARAMS, format!("argument '{key}' must be a short string")))?;
                arguments.push((key.clone(), value.to_string()));
            }
        }
        Some(_) => return Err((INVALID_PARAMS, "params.arguments must be an object".into())),
    }
    Ok(arguments)
}

/// -32602 naming the first of `required` that `given` lacks.
fn require<'a>(
    name: &str,
    mut required: impl Iterator<Item = &'a str>,
    given: &[(String, String)],
) -> Result<(), (i64, String)> {
    match required.find(|argument| !given.iter().any(|(key, _)| key == argument)) {
        Some(missing) => Err((INVALID_PARAMS, format!("prompt '{name}' needs argument '{missing}'"))),
        None => Ok(()),
    }
}

pub(super) async fn get_prompt(scope: &Scope, params: &Value) -> Outcome {
    let name = string_param(params, "/name", "params.name")?;
    let arguments = prompt_arguments(params)?;
    if let Some((_, template)) = templates::find(scope, name) {
        let required = template.arguments.iter().filter(|argument| argument.required);
        require(name, required.map(|argument| argument.name.as_str()), &arguments)?;
        return templates::get(scope, name, &template, arguments).await;
    }
    let Some((active, server, prompt)) = find_prompt(scope, name) else {
        return match remote::resolve(scope, name).await {
            Some((remote, prompt)) => {
                let params =
                    json!({"name": prompt, "arguments": params.get("arguments").cloned().unwrap_or(json!({}))});
                remote::forward(scope, &remote, "prompts/get", params).await
            }
            None => Err((INVALID_PARAMS, format!("Unknown prompt: {name}"))),
        };
    };
    let spec = server.catalog().prompt(&prompt).cloned().expect("found above");
    let required = spec.arguments.iter().filter(|argument| argument.required);
    require(name, required.map(|argument| argument.name.as_str()), &arguments)?;
    let answer = server
        .get_prompt(invocation(scope, &active), active.grants.clone(), &prompt, arguments)
        .await
        .map_err(failed)?;
    let messages: Vec<Value> = answer
        .messages
        .iter()
        .map(|message| {
            let role = match message.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            json!({"role": role, "content": mcp_content(&message.content)})
        })
        .collect();
    let mut result = json!({ "messages": messages });
    if let Some(description) = answer.description {
        result["description"] = json!(description);
    }
    Ok(result)
}

/// The one install that claims `uri`: listed exactly, else by a template.
fn find_resource(scope: &Scope, uri: &str) -> Result<(Arc<Active>, Arc<ToolServer>), (i64, String)> {
    let servers = readable(scope);
    let listed: Vec<_> = servers
        .iter()
        .filter(|(_, server)| server.catalog().resources.iter().any(|r| r.uri == uri))
        .collect();
    let claimed = match listed.is_empty() {
        false => listed,
        true => servers
            .iter()
            .filter(|(_, server)| (server.catalog().templates.iter()).any(|t| template_matches(&t.uri_template, uri)))
            .collect(),
    };
    match claimed.as_slice() {
        [(active, server)] => Ok((active.clone(), server.clone())),
        [] => Err((RESOURCE_NOT_FOUND, format!("Resource not found: {uri}"))),
        _ => Err((
            INVALID_PARAMS,
            format!("more than one install offers {uri}; read it on /v1/mcp/{{install}}"),
        )),
    }
}

pub(super) async fn read_resource(scope: &Scope, params: &Value) -> Outcome {
    let uri = string_param(params, "/uri", "params.uri")?;
    let (active, server) = match find_resource(scope, uri) {
        Err((RESOURCE_NOT_FOUND, text)) => {
            return match remote::resource_owner(scope, uri).await {
                Some(remote) => remote::forward(scope, &remote, "resources/read", json!({"uri": uri})).await,
                None => Err((RESOURCE_NOT_FOUND, text)),
            };
        }
        found => found?,
    };
    let contents = server
        .read_resource(invocation(scope, &active), active.grants.clone(), uri)
        .await
        .map_err(failed)?;
    let contents: Vec<Value> = contents.iter().map(mcp_resource).collect();
    Ok(json!({ "contents": contents }))
}

pub(super) async fn complete(scope: &Scope, params: &Value) -> Outcome {
    let argument = string_param(params, "/argument/name", "params.argument.name")?;
    let value = string_param(params, "/argument/value", "params.argument.value")?;
    let (active, server, reference) = match params.pointer("/ref/type").and_then(Value::as_str) {
        Some("ref/prompt") => {
            let name = string_param(params, "/ref/name", "params.ref.name")?;
            // A template's arguments are free text: nothing to suggest.
            if let Some((_, template)) = templates::find(scope, name) {
                if !template.arguments.iter().any(|known| known.name == argument) {
                    return Err((INVALID_PARAMS, format!("prompt '{name}' has no argument '{argument}'")));
                }
                return Ok(json!({"completion": {"values": [], "total": 0, "hasMore": false}}));
            }
            let Some((active, server, prompt)) = find_prompt(scope, name) else {
                let (remote, prompt) = remote::resolve(scope, name)
                    .await
                    .ok_or_else(|| (INVALID_PARAMS, format!("Unknown prompt: {name}")))?;
                let mut params = params.clone();
                params["ref"]["name"] = json!(prompt);
                return remote::forward(scope, &remote, "completion/complete", params).await;
            };
            (active, server, Reference::Prompt(prompt))
        }
        Some("ref/resource") => {
            let uri = string_param(params, "/ref/uri", "params.ref.uri")?;
            let claimed: Vec<_> = readable(scope)
                .into_iter()
                .filter(|(_, server)| server.catalog().template(uri).is_some())
                .collect();
            match <[_; 1]>::try_from(claimed) {
                Ok([(active, server)]) => (active, server, Reference::ResourceTemplate(uri.to_string())),
                Err(claimed) if claimed.is_empty() => {
                    return match remote::template_owner(scope, uri).await {
                        Some(remote) => remote::forward(scope, &remote, "completion/complete", params.clone()).await,
                        None => Err((INVALID_PARAMS, format!("Unknown resource template: {uri}"))),
                    };
                }
                Err(_) => {
                    let text = format!("more than one install offers {uri}; complete it on /v1/mcp/{{install}}");
                    return Err((INVALID_PARAMS, text));
                }
            }
        }
        _ => {
            return Err((
                INVALID_PARAMS,
                "params.ref.type must be ref/prompt or ref/resource".into(),
            ));
        }
    };
    let values = server
        .complete(
            invocation(scope, &active),
            active.grants.clone(),
            reference,
            argument,
            value,
        )
        .await
        .map_err(failed)?;
    Ok(json!({"completion": {"values": values, "total": values.len(), "hasMore": false}}))
}

/// Whether `uri` fits an RFC 6570 template's simple form: literal text and
/// `{name}` expressions, each matching one or more characters other than `/`.
pub(super) fn template_matches(template: &str, uri: &str) -> bool {
    match template.find('{') {
        None => template == uri,
        Some(open) => {
            let Some(rest) = uri.strip_prefix(&template[..open]) else {
                return false;
            };
            let Some(close) = template[open..].find('}') else {
                return false;
            };
            let after = &template[open + close + 1..];
            // The expression takes 1.. characters up to a `/`; try each length.
            let limit = rest.find('/').unwrap_or(rest.len());
            let ends = rest[..limit].char_indices().skip(1).map(|(at, _)| at);
            (limit > 0) && ends.chain([limit]).any(|taken| template_matches(after, &rest[taken..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::template_matches;

    #[test]
    fn templates_match_one_segment_per_expression() {
        assert!(template_matches(
            "test://template/{id}/data",
            "test://template/123/data"
        ));
        assert!(!template_matches(
            "test://template/{id}/data",
            "test://template/1/2/data"
        ));
        assert!(!template_matches("test://template/{id}/data", "test://template//data"));
        assert!(template_matches("file://{a}-{b}", "file://x-y-z"));
        assert!(!template_matches("file://{a}", "http://x"));
        assert!(template_matches("test://static", "test://static"));
        assert!(template_matches("x://{name}", "x://é"));
    }
}
