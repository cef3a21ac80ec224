//! The tools a workspace offers, and calling one by name. Shared by the MCP
//! endpoint and by skills calling tools, so both see the same names and the
//! same rules: a tool server's tool is `<install>__<tool>`, a skill is
//! `<install>__run`; inside one install's scope the prefix is dropped. Every
//! call gets its own request id and request-log row (kind `tool_call` or
//! `skill_run`), linked to the request it ran inside.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Value, json};
use tollgate_components::{CallError, Content, Elicitor, Invocation, LogSink, ProgressSink, SkillError, ToolSpec};
use tollgate_core::db::now_ms;
use tollgate_core::money::Nanos;
use tollgate_ledger::{RequestKind, RequestLogRow};

use super::Components;
use super::installs::{Active, Installs, Loaded};
use super::skills::RunLedger;
use tollgate_gateway::guards::{self, AnswerOutcome, Checks, GuardRoute, GuardText};
use tollgate_identity::auth::Principal;
use tollgate_web::server::RequestId;

/// Between the install name and the tool name.
pub const SEPARATOR: &str = "__";
/// The tool name a skill is offered under.
pub const SKILL_TOOL: &str = "run";

/// One tool as a client sees it.
pub struct Listed {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    pub output_schema: Option<Value>,
    /// MCP's `annotations` object (hints), when the component gave any.
    pub annotations: Option<Value>,
}

/// Where a call goes.
pub struct Target {
    pub install: Arc<Active>,
    pub tool: String,
}

/// The names of the tools one install offers (`<install>__<tool>`), as
/// [`list`] shows them to the whole workspace.
pub fn tools_of(installs: &Installs, workspace_id: &str, install: &str) -> Vec<String> {
    list(installs, workspace_id, None)
        .into_iter()
        .map(|tool| tool.name)
        .filter(|name| name.split_once(SEPARATOR).is_some_and(|(owner, _)| owner == install))
        .collect()
}

/// The tools of `workspace_id` (only of install `only`, when given).
pub fn list(installs: &Installs, workspace_id: &str, only: Option<&str>) -> Vec<Listed> {
    let mut listed = Vec::new();
    for active in installs.in_workspace(workspace_id) {
        if only.is_some_and(|name| name != active.record.name) {
            continue;
        }
        let prefix = |tool: &str| match only {
            Some(_) => tool.to_string(),
            None => format!("{}{SEPARATOR}{tool}", active.record.name),
        };
        match &active.component {
            Loaded::Tool(server) => listed.extend(server.tools().iter().map(|tool| Listed {
                name: prefix(&tool.name),
                description: tool.description.clone(),
                input_schema: tool.input_schema.clone(),
                output_schema: tool.output_schema.clone(),
                annotations: annotations(tool),
            })),
            Loaded::Skill(skill) => {
                let spec = skill.spec();
                let description = match spec.instructions.is_empty() {
                    true => spec.description.clone(),
                    false => format!("{}\n\n{}", spec.description, spec.instructions),
                };
                listed.push(Listed {
                    name: prefix(SKILL_TOOL),
                    description,
                    input_schema: spec.input_schema.clone(),
                    output_schema: Some(spec.output_schema.clone()).filter(Value::is_object),
                    annotations: None,
                });
            }
            // A guardrail checks requests and answers, and a prompt
            // template is served as an MCP prompt: neither offers tools.
            Loaded::Guardrail(_) | Loaded::Prompt(_) => {}
        }
    }
    listed
}

/// Finds the install and tool a name means, in `workspace_id` (inside
/// install `only`'s scope, when given).
pub fn resolve(installs: &Installs, workspace_id: &str, only: Option<&str>, name: &str) -> Option<Target> {
    let (install, tool) = match only {
        Some(install) => (install, name),
        None => name.split_once(SEPARATOR)?,
    };
    let active = installs.get(workspace_id, install)?;
    let known = match &active.component {
        Loaded::Tool(server) => server.tool(tool).is_some(),
        Loaded::Skill(_) => tool == SKILL_TOOL,
        Loaded::Guardrail(_) | Loaded::Prompt(_) => false,
    };
    known.then(|| Target {
        install: active,
        tool: tool.to_string(),
    })
}

/// Who calls, and inside which request.
pub struct CallSite {
    pub caller: Arc<Principal>,
    /// The request this call runs inside (a skill's run, for its tool calls).
    pub parent_request_id: Option<String>,
    /// 0 for a call from outside; each nested tool call adds one.
    pub depth: u32,
    /// The budget of the actor run the call is part of: a skill's model
    /// calls hold against it.
    pub ceiling: Option<Arc<dyn tollgate_gateway::CostCeiling>>,
}

/// Calls `target` with `arguments` (a JSON object) under a request id of its
/// own, and logs it. A skill gets the caller's capabilities, its model calls
/// linked to this call; a tool server on tool WIT 0.4.0 whose package
/// declares `models` gets the caller's model access, linked alike; other
/// tool servers get none.
pub async fn call(
    components: &Arc<Components>,
    target: &Target,
    site: &CallSite,
    arguments: String,
) -> Result<Vec<Content>, CallError> {
    call_logged(components, target, site, arguments).await.1
}

/// Where a call's notices go while it runs (an MCP client's log and
/// progress notifications), who answers its questions (the MCP client's
/// user), and where its model calls are itemised as they complete; the
/// default sends them nowhere and asks no one.
#[derive(Clone, Default)]
pub struct Sinks {
    pub logs: Option<LogSink>,
    pub progress: Option<ProgressSink>,
    pub elicit: Option<Arc<dyn Elicitor>>,
    /// The model calls of a skill or of a 0.4.0 tool server, each billed to
    /// the caller and logged inside the call.
    pub models: Option<RunLedger>,
}

/// [`call`], with the component's log lines, progress reports and model
/// calls also sent to `sinks` as it makes them; also answers the call's
/// request id.
pub async fn call_with_sinks(
    components: &Arc<Components>,
    target: &Target,
    site: &CallSite,
    arguments: String,
    sinks: Sinks,
) -> (String, Result<Vec<Content>, CallError>) {
    run(components, target, site, arguments, sinks).await
}

/// [`call`], also answering the call's request id (its log row).
pub async fn call_logged(
    components: &Arc<Components>,
    target: &Target,
    site: &CallSite,
    arguments: String,
) -> (String, Result<Vec<Content>, CallError>) {
    run(components, target, site, arguments, Sinks::default()).await
}

async fn run(
    components: &Arc<Components>,
    target: &Target,
    site: &CallSite,
    mut arguments: String,
    sinks: Sinks,
) -> (String, Result<Vec<Content>, CallError>) {
    let request_id = RequestId::new();
    let name = format!("{}{SEPARATOR}{}", target.install.record.name, target.tool);
    let mut checks = match guarded_arguments(components, site, &name, &request_id.0, &mut arguments).await {
        Ok(checks) => checks,
        Err(refused) => return (request_id.0.to_string(), Err(refused)),
    };
    let invocation = Invocation {
        request_id: request_id.0.to_string(),
        workspace: site.caller.workspace_id.clone(),
        install: target.install.record.name.clone(),
        depth: site.depth,
        logs: sinks.logs,
        progress: sinks.progress,
        elicit: sinks.elicit,
    };
    let started = (now_ms(), Instant::now());
    let logged = Logged {
        kind: match target.install.component {
            Loaded::Skill(_) => RequestKind::SkillRun,
            _ => RequestKind::ToolCall,
        },
        request_id: &request_id.0,
        site,
        name,
        provider: &target.install.record.package,
        version: &target.install.record.version,
        streamed: false,
    };
    // The operator's price for the call is held before the component runs:
    // a wallet that cannot pay is refused here, and the tool never runs.
    let price = components.prices.of(&target.install.record.package);
    let hold = match components.data.hold_price(&site.caller, price).await {
        Ok(hold) => hold,
        Err(refused) => {
            let status = refused.status.as_u16();
            let code = refused.code;
            let failure = guard_refusal(refused);
            logged.record_refused(components, &failure, code, status, started).await;
            return (request_id.0.to_string(), Err(failure));
        }
    };
    let grants = target.install.grants.clone();
    let ledger = sinks.models.unwrap_or_default();
    let outcome = match &target.install.component {
        Loaded::Tool(server) => {
            // Only a 0.4.0 server whose package declared `models` (so its
            // installer saw it) may call models, billed to this caller and
            // logged inside this call.
            let models = (server.imports_models() && target.install.vetting.capabilities.models).then(|| {
                super::capabilities::tool_models(components, &site.caller, &request_id.0, ledger, site.ceiling.clone())
            });
            server.call(invocation, grants, models, &target.tool, arguments).await
        }
        Loaded::Guardrail(_) | Loaded::Prompt(_) => {
            unreachable!("`resolve` finds no tool in a guardrail or prompt template")
        }
        Loaded::Skill(skill) => {
            let capabilities = super::capabilities::for_caller(
                components,
                &site.caller,
                &request_id.0,
                site.depth,
                ledger,
                site.ceiling.clone(),
            );
            let run = skill.run(invocation, grants, capabilities, arguments).await;
            run.map(|output| vec![Content::Json(output.to_string())])
        }
    };
    let outcome = match (outcome, checks.as_mut()) {
        (Ok(content), Some(checks)) if checks.checks_responses() => checked_result(checks, content).await,
        (outcome, _) => outcome,
    };
    match hold {
        // A priced call posts its price with its row, which it waits for.
        Some(hold) => {
            logged
                .record_priced(components, outcome.as_ref().err(), started, hold)
                .await
        }
        // The answer does not wait for the row's commit: the call posted
        // nothing, so no money hangs on it, and a pure tool call would
        // otherwise pay a durable commit (an fsync on SQLite) for its log
        // line. The writer commits it with its next batch.
        None => logged.record_in_background(components, outcome.as_ref().err(), started),
    }
    (request_id.0.to_string(), outcome)
}

/// The tool guardrails that apply to a call of `name`, run on its
/// `arguments` (which a guard may rewrite in place); the checks stay open
/// for the result. A component's and a remote server's calls share them.
pub(crate) async fn guarded_arguments(
    components: &Components,
    site: &CallSite,
    name: &str,
    request_id: &str,
    arguments: &mut String,
) -> Result<Option<Checks>, CallError> {
    let mut checks = components
        .data
        .guard_checks(&site.caller, GuardRoute::Tools, name, request_id, arguments);
    if let Some(checks) = checks.as_mut() {
        let given = vec![GuardText {
            role: "arguments".into(),
            content: arguments.clone(),
        }];
        match checks.request(given).await {
            Ok(Some(mut rewritten)) => *arguments = rewritten.remove(0).content,
            Ok(None) => {}
            Err(refused) => return Err(guard_refusal(refused)),
        }
    }
    Ok(checks)
}

/// A guardrail's refusal of a tool call, as the tool's own error: the caller
/// (often a model) reads why.
pub(crate) fn guard_refusal(refused: tollgate_web::error::ApiError) -> CallError {
    CallError::Tool(tollgate_components::ToolError {
        message: format!("{} ({})", refused.message, refused.code),
    })
}

/// A tool's result through the answer guardrails: each text, JSON or text
/// resource part is one text; a rewrite replaces them in place (a JSON part
/// must stay JSON). Images, audio and blobs pass unchecked: guardrails read
/// text.
async fn checked_result(checks: &mut Checks, mut content: Vec<Content>) -> Result<Vec<Content>, CallError> {
    fn text_of(part: &mut Content) -> Option<&mut String> {
        match part {
            Content::Text(text) | Content::Json(text) => Some(text),
            Content::Resource(contents) => match &mut contents.body {
                tollgate_components::ResourceBody::Text(text) => Some(text),
                tollgate_components::ResourceBody::Blob(_) => None,
            },
            Content::Image(_) | Content::Audio(_) => None,
        }
    }
    let texts = content.iter_mut().filter_map(|part| text_of(part).cloned()).collect();
    let texts: Vec<String> = match checks.answer(texts, true, false).await {
        Ok(AnswerOutcome::Pass(texts)) => texts,
        Ok(AnswerOutcome::Retry(reason)) => return Err(guard_refusal(guards::denied("guardrail", "result", &reason))),
        Err(refused) => return Err(guard_refusal(refused)),
    };
    let mut texts = texts.into_iter();
    for part in &mut content {
        let is_json = matches!(part, Content::Json(_));
        let Some(slot) = text_of(part) else { continue };
        let Some(text) = texts.next() else { break };
        if is_json && serde_json::from_str::<Value>(&text).is_err() {
            return Err(guard_refusal(guards::failed(
                "guardrail",
                "it rewrote a JSON result into text that is not JSON",
            )));
        }
        *slot = text;
    }
    Ok(content)
}

/// A tool call's or skill run's request-log row, before its outcome.
pub struct Logged<'a> {
    pub kind: RequestKind,
    pub request_id: &'a str,
    pub site: &'a CallSite,
    /// The name it was called by, `<install>__<tool>`.
    pub name: String,
    /// What served it: an install's package and version, or a remote MCP
    /// server's URL and the protocol revision agreed with it.
    pub provider: &'a str,
    pub version: &'a str,
    pub streamed: bool,
}

impl Logged<'_> {
    /// Writes the row and waits for its commit.
    pub async fn record(self, components: &Components, failure: Option<&CallError>, started: (i64, Instant)) {
        let request_id = self.request_id.to_string();
        let row = self.row(failure, started);
        if let Err(error) = components.data.request_log().settle(None, Nanos::ZERO, row).await {
            tracing::warn!(%request_id, %error, "could not log a component call");
        }
    }

    /// Writes the row of a call refused before it ran (`code`, `status`: a
    /// wallet that cannot pay the call's price), and waits for its commit.
    pub async fn record_refused(
        self,
        components: &Components,
        failure: &CallError,
        code: &str,
        status: u16,
        started: (i64, Instant),
    ) {
        let request_id = self.request_id.to_string();
        let mut row = self.row(Some(failure), started);
        row.outcome = code.to_string();
        row.status = Some(status);
        if let Err(error) = components.data.request_log().log(row).await {
            tracing::warn!(%request_id, %error, "could not log a refused component call");
        }
    }

    /// Writes the row of a call the operator prices, posting the price held
    /// for it as the row's cost and fee (a line of its own on the bill), and
    /// waits for its commit. A call the sandbox stopped served nothing, so
    /// its hold is voided; one that ran (whatever the tool answered) pays.
    pub async fn record_priced(
        self,
        components: &Components,
        failure: Option<&CallError>,
        started: (i64, Instant),
        hold: tollgate_ledger::Hold,
    ) {
        let price = match failure {
            Some(CallError::Fault(_)) => Nanos::ZERO,
            _ => hold.amount,
        };
        let request_id = self.request_id.to_string();
        let mut row = self.row(failure, started);
        row.reserved = hold.amount;
        row.fee = price;
        if let Err(error) = components.data.request_log().settle(Some(hold), price, row).await {
            tracing::error!(%request_id, %error, "could not settle a priced component call");
        }
    }

    /// Hands the row to the ledger writer without waiting for its commit.
    pub fn record_in_background(self, components: &Components, failure: Option<&CallError>, started: (i64, Instant)) {
        let ledger = components.data.request_log().clone();
        let row = self.row(failure, started);
        tokio::spawn(async move {
            let request_id = row.request_id.clone();
            if let Err(error) = ledger.log(row).await {
                tracing::warn!(%request_id, %error, "could not log a component call");
            }
        });
    }

    /// The row: nothing is posted (a skill's model calls are rows of their
    /// own), so the wallet is untouched; the usage event follows from it.
    fn row(self, failure: Option<&CallError>, started: (i64, Instant)) -> RequestLogRow {
        let (outcome, status) = outcome_of(failure);
        RequestLogRow {
            provider: Some(self.provider.to_string()),
            upstream_model: Some(self.version.to_string()),
            streamed: self.streamed,
            outcome: outcome.to_string(),
            status: Some(status),
            started_at_ms: started.0,
            duration_ms: i64::try_from(started.1.elapsed().as_millis()).unwrap_or(i64::MAX),
            parent_request_id: self.site.parent_request_id.clone(),
            ..RequestLogRow::unbilled(
                self.kind,
                self.request_id.to_string(),
                self.site.caller.key_id.clone(),
                self.site.caller.workspace_id.clone(),
                self.name,
            )
        }
    }
}

/// The log's outcome and status for a call: what the caller was answered.
fn outcome_of(failure: Option<&CallError>) -> (&'static str, u16) {
    match failure {
        None => ("success", 200),
        Some(CallError::Tool(_)) => ("tool_error", 422),
        Some(CallError::Skill(SkillError::InvalidInput(_))) => ("invalid_request", 400),
        Some(CallError::Skill(SkillError::Model(error))) => ("model_error", error.status),
        Some(CallError::Skill(SkillError::Failed(_))) => ("skill_error", 422),
        Some(CallError::Fault(_)) => ("component_failed", 502),
    }
}

fn annotations(tool: &ToolSpec) -> Option<Value> {
    let a = tool.annotations;
    let mut object = serde_json::Map::new();
    for (key, value) in [
        ("readOnlyHint", a.read_only),
        ("destructiveHint", a.destructive),
        ("idempotentHint", a.idempotent),
        ("openWorldHint", a.open_world),
    ] {
        if let Some(value) = value {
            object.insert(key.into(), json!(value));
        }
    }
    (!object.is_empty()).then_some(Value::Object(object))
}
