//! Guardrails installed from the registry, run as stages of the data plane's
//! pipeline: a workspace's guardrail installs (with their [`Placement`]:
//! routes, keys, models, order, mode) and the operator's gateway-wide ones
//! (`[[guardrails.operator]]`), which run first and which no tenant can
//! remove. Each check runs the install's component in a fresh sandbox with
//! its grants; a guardrail that asks for `models` judges through the
//! caller's metered pipeline, billed to the caller as a request inside the
//! checked one.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};

use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use serde::{Deserialize, Serialize};
use tollgate_components::{Capabilities, Check, GuardRoute as WitRoute, Invocation, Subject, Text};
use tollgate_gateway::guards::{self, Guard, GuardCall, GuardMode, GuardRoute, GuardText, Guardrails};
use tollgate_identity::auth::Principal;

use crate::Components;
use crate::installs::{Active, Loaded};

/// Where a guardrail install applies, and how.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Placement {
    /// `chat`, `embeddings`, `actors`, `tools`. Default: `chat`.
    #[schemars(with = "Vec<String>")]
    pub routes: Vec<GuardRoute>,
    /// Key ids it applies to; empty: every key of the workspace.
    pub keys: Vec<String>,
    /// Models (`<provider>/<model>`, or `<provider>/*`) it applies to; empty: every model.
    pub models: Vec<String>,
    /// Lower runs first on a request (and last on its answer).
    pub order: i32,
    /// `enforce` (default): a denial or a fault refuses. `monitor`: both are recorded only.
    #[schemars(with = "String")]
    pub mode: GuardMode,
    /// The hooks it runs here: `requests`, `responses`. Empty (default): every
    /// hook its package has. Each hook left out is a sandbox call a request
    /// does not make.
    pub checks: Vec<Hook>,
}

/// A guardrail's hook, as a placement names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Hook {
    Requests,
    Responses,
}

impl Default for Placement {
    fn default() -> Self {
        Placement {
            routes: vec![GuardRoute::Chat],
            keys: Vec::new(),
            models: Vec::new(),
            order: 0,
            mode: GuardMode::Enforce,
            checks: Vec::new(),
        }
    }
}

impl Placement {
    pub fn check(&self) -> Result<(), String> {
        if self.routes.is_empty() {
            return Err("guardrail.routes must name at least one of chat, embeddings, actors, tools".into());
        }
        if self.keys.len() > 100 || self.models.len() > 100 {
            return Err("guardrail.keys and guardrail.models take at most 100 entries each".into());
        }
        Ok(())
    }

    fn applies(&self, caller: &Principal, route: GuardRoute, target: &str) -> bool {
        self.routes.contains(&route)
            && (self.keys.is_empty() || self.keys.iter().any(|key| *key == caller.key_id))
            && (self.models.is_empty() || self.models.iter().any(|model| matches_model(model, target)))
    }

    fn runs(&self, hook: Hook) -> bool {
        self.checks.is_empty() || self.checks.contains(&hook)
    }
}

fn matches_model(pattern: &str, target: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => target.starts_with(prefix),
        None => pattern == target,
    }
}

/// `[guardrails]`.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct GuardrailsConfig {
    /// How many characters of a streamed answer an answer guardrail checks
    /// at a time (cut at the last whitespace past it).
    pub stream_window_chars: usize,
    /// Gateway-wide guardrails, run before every workspace's own.
    pub operator: Vec<OperatorGuardrail>,
}

impl Default for GuardrailsConfig {
    fn default() -> Self {
        GuardrailsConfig {
            stream_window_chars: 128,
            operator: Vec::new(),
        }
    }
}

/// `[[guardrails.operator]]`: a registry guardrail every workspace runs.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct OperatorGuardrail {
    /// Shown in decisions and errors as `operator/<name>`.
    pub name: String,
    /// E.g. `tollgate/pii-redact`.
    pub package: String,
    /// A semver requirement; default `*`.
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    #[serde(flatten)]
    pub placement: Placement,
}

/// A loaded operator guardrail.
struct OperatorGuard {
    name: String,
    active: Arc<Active>,
    placement: Placement,
}

/// The data plane's [`Guardrails`]: the operator's, then the workspace's
/// installs that apply, by order.
pub struct InstalledGuardrails {
    components: Weak<Components>,
    operator: Vec<OperatorGuard>,
}

impl InstalledGuardrails {
    /// Loads the operator's guardrails (a package that does not resolve or
    /// load stops the start: a gateway must not serve without a guardrail
    /// its operator requires).
    pub async fn load(components: &Arc<Components>, config: &GuardrailsConfig) -> anyhow::Result<Arc<Self>> {
        let mut operator = Vec::new();
        for wanted in &config.operator {
            wanted
                .placement
                .check()
                .map_err(|e| anyhow::anyhow!("guardrails.operator '{}': {e}", wanted.name))?;
            let active = components
                .installs()
                .operator_guardrail(
                    &wanted.name,
                    &wanted.package,
                    wanted.version.as_deref(),
                    wanted.config.clone(),
                )
                .await
                .map_err(|e| anyhow::anyhow!("guardrails.operator '{}' ({}): {e}", wanted.name, wanted.package))?;
            operator.push(OperatorGuard {
                name: format!("operator/{}", wanted.name),
                active,
                placement: wanted.placement.clone(),
            });
        }
        Ok(Arc::new(InstalledGuardrails {
            components: Arc::downgrade(components),
            operator,
        }))
    }
}

impl Guardrails for InstalledGuardrails {
    fn any(&self, caller: &Principal) -> bool {
        !self.operator.is_empty()
            || self
                .components
                .upgrade()
                .is_some_and(|components| components.installs().has_guardrails(&caller.workspace_id))
    }

    fn select(&self, caller: &Principal, route: GuardRoute, target: &str) -> Vec<Arc<dyn Guard>> {
        let Some(components) = self.components.upgrade() else {
            return Vec::new();
        };
        let mut chosen: Vec<(i32, Arc<dyn Guard>)> = Vec::new();
        for guard in &self.operator {
            if guard.placement.applies(caller, route, target) {
                chosen.push((
                    i32::MIN,
                    component_guard(&components, &guard.active, &guard.name, &guard.placement),
                ));
            }
        }
        for active in components.installs().in_workspace(&caller.workspace_id) {
            let Some(placement) = &active.record.guardrail else {
                continue;
            };
            if matches!(active.component, Loaded::Guardrail(_)) && placement.applies(caller, route, target) {
                let name = active.record.name.clone();
                chosen.push((placement.order, component_guard(&components, &active, &name, placement)));
            }
        }
        // Stable: the operator's first, then by order, then by name.
        chosen.sort_by_key(|(order, _)| *order);
        chosen.into_iter().map(|(_, guard)| guard).collect()
    }
}

fn component_guard(
    components: &Arc<Components>,
    active: &Arc<Active>,
    name: &str,
    placement: &Placement,
) -> Arc<dyn Guard> {
    Arc::new(ComponentGuard {
        components: components.clone(),
        active: active.clone(),
        name: name.to_string(),
        mode: placement.mode,
        requests: placement.runs(Hook::Requests),
        responses: placement.runs(Hook::Responses),
    })
}

/// One guardrail install as the pipeline runs it.
struct ComponentGuard {
    components: Arc<Components>,
    active: Arc<Active>,
    name: String,
    mode: GuardMode,
    /// The placement runs its request hook, its answer hook.
    requests: bool,
    responses: bool,
}

impl ComponentGuard {
    fn guardrail(&self) -> &Arc<tollgate_components::Guardrail> {
        match &self.active.component {
            Loaded::Guardrail(guardrail) => guardrail,
            _ => unreachable!("only guardrail installs are selected"),
        }
    }

    /// The check's sandbox inputs: the install's grants and, when its
    /// package asks for models, the caller's metered pipeline.
    fn check(&self, call: &GuardCall) -> Check {
        let capabilities = match self.active.vetting.capabilities.models {
            true => crate::capabilities::for_guardrail(&self.components, &call.caller, &call.request_id),
            false => Capabilities::default(),
        };
        Check {
            invocation: Invocation {
                request_id: call.request_id.clone(),
                workspace: call.caller.workspace_id.clone(),
                install: self.name.clone(),
                depth: 0,
                logs: None,
                progress: None,
                elicit: None,
            },
            grants: self.active.grants.clone(),
            capabilities,
            subject: Subject {
                route: match call.route {
                    GuardRoute::Chat => WitRoute::Chat,
                    GuardRoute::Embeddings => WitRoute::Embeddings,
                    GuardRoute::Actors => WitRoute::Actors,
                    GuardRoute::Tools => WitRoute::Tools,
                },
                target: call.target.clone(),
            },
            request: call.request.clone(),
        }
    }
}

impl Guard for ComponentGuard {
    fn name(&self) -> &str {
        &self.name
    }

    fn mode(&self) -> GuardMode {
        self.mode
    }

    fn checks_requests(&self) -> bool {
        self.requests && self.guardrail().spec().checks_requests
    }

    fn checks_responses(&self) -> bool {
        self.responses && self.guardrail().spec().checks_responses
    }

    fn check_request(
        &self,
        call: GuardCall,
        texts: Vec<GuardText>,
    ) -> BoxFuture<'static, Result<guards::RequestVerdict, String>> {
        let guardrail = self.guardrail().clone();
        let check = self.check(&call);
        let texts = texts
            .into_iter()
            .map(|text| Text {
                role: text.role,
                content: text.content,
            })
            .collect();
        async move {
            use tollgate_components::RequestVerdict as Wit;
            match guardrail.check_request(check, texts).await {
                Ok(Wit::Allow) => Ok(guards::RequestVerdict::Allow),
                Ok(Wit::Deny(reason)) => Ok(guards::RequestVerdict::Deny(reason)),
                Ok(Wit::Rewrite(rewrite)) => Ok(guards::RequestVerdict::Rewrite {
                    texts: rewrite.texts,
                    memo: rewrite.memo,
                }),
                Err(fault) => Err(fault.reason),
            }
        }
        .boxed()
    }

    fn check_response(
        &self,
        call: GuardCall,
        memo: Option<String>,
        texts: Vec<String>,
        done: bool,
    ) -> BoxFuture<'static, Result<guards::ResponseVerdict, String>> {
        let guardrail = self.guardrail().clone();
        let check = self.check(&call);
        async move {
            use tollgate_components::ResponseVerdict as Wit;
            match guardrail.check_response(check, memo, texts, done).await {
                Ok(Wit::Allow) => Ok(guards::ResponseVerdict::Allow),
                Ok(Wit::Deny(reason)) => Ok(guards::ResponseVerdict::Deny(reason)),
                Ok(Wit::Rewrite(texts)) => Ok(guards::ResponseVerdict::Rewrite(texts)),
                Ok(Wit::Retry(reason)) => Ok(guards::ResponseVerdict::Retry(reason)),
                Err(fault) => Err(fault.reason),
            }
        }
        .boxed()
    }
}
