//! An audit row: who changed what, from where, before and after, and how it
//! ended, chained to the row before it by its hash.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The hash before the first row: the chain's genesis.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// How the actor was authenticated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ActorKind {
    /// An API key (directly, or through a console session made with it).
    Key,
    /// A console session of a user signed in through OpenID Connect.
    Oidc,
    /// The operator, on the gateway's host (`tollgate admin …`).
    Operator,
    /// The payment processor, through a signed webhook.
    Processor,
    /// An identity provider, through a workspace's SCIM token (`key_id`).
    Provisioner,
    /// Nobody signed in (`accounts.signup`).
    Anonymous,
}

/// Who made a change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Actor {
    pub kind: ActorKind,
    pub user_id: Option<String>,
    pub key_id: Option<String>,
    pub session_id: Option<String>,
}

impl Actor {
    pub fn of_kind(kind: ActorKind) -> Self {
        Self {
            kind,
            user_id: None,
            key_id: None,
            session_id: None,
        }
    }

    /// The key id or session id, whichever the actor acted through.
    pub fn credential(&self) -> Option<&str> {
        self.key_id.as_deref().or(self.session_id.as_deref())
    }
}

/// Why a change failed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Failure {
    pub reason: String,
    pub message: String,
}

/// A change to record. Values are redacted by the log itself
/// ([`crate::redact::for_audit`]), whoever builds them.
#[derive(Clone, Debug)]
pub struct Change {
    pub op: String,
    pub actor: Actor,
    pub workspace_id: Option<String>,
    pub ip: Option<String>,
    pub target: Option<Value>,
    pub params: Option<Value>,
    pub before: Option<Value>,
    pub after: Option<Value>,
    pub failure: Option<Failure>,
}

impl Change {
    pub fn new(op: impl Into<String>, actor: Actor) -> Self {
        Self {
            op: op.into(),
            actor,
            workspace_id: None,
            ip: None,
            target: None,
            params: None,
            before: None,
            after: None,
            failure: None,
        }
    }

    pub fn workspace(mut self, workspace_id: impl Into<String>) -> Self {
        self.workspace_id = Some(workspace_id.into());
        self
    }

    pub fn target(mut self, target: Value) -> Self {
        self.target = Some(target);
        self
    }

    pub fn after(mut self, after: Value) -> Self {
        self.after = Some(after);
        self
    }

    pub fn ip(mut self, ip: Option<impl ToString>) -> Self {
        self.ip = ip.map(|ip| ip.to_string());
        self
    }
}

/// A stored row, as `audit.list` shows it and the sinks receive it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Record {
    pub seq: i64,
    pub at_ms: i64,
    pub workspace_id: Option<String>,
    pub actor: Actor,
    pub ip: Option<String>,
    pub op: String,
    pub target: Option<Value>,
    pub params: Option<Value>,
    pub before: Option<Value>,
    pub after: Option<Value>,
    /// `ok` or `error`.
    pub outcome: String,
    pub error: Option<Failure>,
    pub prev_hash: String,
    /// SHA-256 (hex) of the row's RFC 8785 canonical JSON without this
    /// field; `prev_hash` is inside it, which chains the rows.
    pub hash: String,
}

impl Record {
    /// The hash this row must carry, from everything else in it.
    pub fn expected_hash(&self) -> String {
        let mut body = serde_json::to_value(self).expect("a record is JSON");
        if let Value::Object(fields) = &mut body {
            fields.remove("hash");
        }
        let canonical = serde_jcs::to_string(&body).expect("JSON canonicalizes");
        hex::encode(Sha256::digest(canonical.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record() -> Record {
        Record {
            seq: 1,
            at_ms: 1_764_200_000_000,
            workspace_id: Some("ws_1".into()),
            actor: Actor::of_kind(ActorKind::Operator),
            ip: None,
            op: "keys.create".into(),
            target: Some(json!({"key_id": "key_1"})),
            params: Some(json!({"name": "ci", "z": 1, "a": [1.5, "é"]})),
            before: None,
            after: Some(json!({"key_id": "key_1"})),
            outcome: "ok".into(),
            error: None,
            prev_hash: GENESIS.into(),
            hash: String::new(),
        }
    }

    #[test]
    fn the_hash_covers_every_field_but_itself() {
        let base = record();
        let hash = base.expected_hash();
        assert_eq!(hash.len(), 64);
        let mut same = base.clone();
        same.hash = "anything".into();
        assert_eq!(same.expected_hash(), hash, "the hash field is not hashed");
        let changes: Vec<fn(&mut Record)> = vec![
            |r| r.seq = 2,
            |r| r.at_ms += 1,
            |r| r.workspace_id = None,
            |r| r.actor.kind = ActorKind::Key,
            |r| r.op = "keys.revoke".into(),
            |r| r.params = Some(json!({"name": "cj", "z": 1, "a": [1.5, "é"]})),
            |r| r.after = None,
            |r| r.outcome = "error".into(),
            |r| r.prev_hash = "1".repeat(64),
        ];
        for change in changes {
            let mut changed = base.clone();
            change(&mut changed);
            assert_ne!(changed.expected_hash(), hash);
        }
    }

    #[test]
    fn key_order_and_spelling_do_not_change_the_hash() {
        let mut a = record();
        a.params = Some(serde_json::from_str(r#"{"z":1,"a":[1.5,"\u00e9"],"name":"ci"}"#).unwrap());
        assert_eq!(a.expected_hash(), record().expected_hash());
    }
}
