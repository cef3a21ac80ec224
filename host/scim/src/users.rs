//! SCIM Users: what the identity provider says of a workspace's member
//! (`scim_users`), read from and written to the SCIM JSON. `id` is the
//! gateway's user id; `userName` is the user's e-mail.

use serde_json::{Value, json};

use super::protocol::{Operation, ScimError, USER_SCHEMA, boolean, timestamp};
use tollgate_core::db::{Database, now_ms};

#[derive(Clone, Debug, PartialEq)]
pub struct ScimUser {
    pub user_id: String,
    pub user_name: String,
    pub external_id: Option<String>,
    pub display_name: Option<String>,
    pub given_name: Option<String>,
    pub family_name: Option<String>,
    pub active: bool,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

type Row = (
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
    i64,
    i64,
    i64,
);

const COLUMNS: &str =
    "user_id, user_name, external_id, display_name, given_name, family_name, active, created_at_ms, updated_at_ms";

fn user(row: Row) -> ScimUser {
    let (user_id, user_name, external_id, display_name, given_name, family_name, active, created, updated) = row;
    ScimUser {
        user_id,
        user_name,
        external_id,
        display_name,
        given_name,
        family_name,
        active: active != 0,
        created_at_ms: created,
        updated_at_ms: updated,
    }
}

/// The e-mail a `userName` names, normalised.
pub fn email_of(user_name: &str) -> Result<String, ScimError> {
    tollgate_identity::accounts::normalize_email(user_name)
        .map_err(|_| ScimError::invalid(format!("userName '{user_name}' must be an e-mail address")))
}

impl ScimUser {
    /// A new user from a POST body, before it has an id.
    pub fn from_body(body: &Value) -> Result<Self, ScimError> {
        let now = now_ms();
        let mut user = ScimUser {
            user_id: String::new(),
            user_name: String::new(),
            external_id: None,
            display_name: None,
            given_name: None,
            family_name: None,
            active: true,
            created_at_ms: now,
            updated_at_ms: now,
        };
        user.replace_with(body)?;
        Ok(user)
    }

    /// PUT: every attribute from `body`; those it lacks are cleared.
    pub fn replace_with(&mut self, body: &Value) -> Result<(), ScimError> {
        let text = |v: &Value| v.as_str().map(str::to_string);
        let user_name = body["userName"]
            .as_str()
            .ok_or_else(|| ScimError::invalid("userName is required"))?;
        self.user_name = email_of(user_name)?;
        self.external_id = text(&body["externalId"]);
        self.display_name = text(&body["displayName"]);
        self.given_name = text(&body["name"]["givenName"]);
        self.family_name = text(&body["name"]["familyName"]);
        self.active = match body.get("active") {
            None | Some(Value::Null) => true,
            Some(value) => boolean(value)?,
        };
        self.updated_at_ms = now_ms();
        Ok(())
    }

    /// PATCH: the operations Okta and Entra ID send for users.
    pub fn patch(&mut self, operations: &[Operation]) -> Result<(), ScimError> {
        for operation in operations {
            let path = operation.path.as_deref().unwrap_or_default();
            let value = if operation.op == "remove" {
                &Value::Null
            } else {
                &operation.value
            };
            let text = value.as_str().map(str::to_string);
            match path.to_ascii_lowercase().as_str() {
                "active" => self.active = boolean(value)?,
                "username" => self.user_name = email_of(text.as_deref().unwrap_or_default())?,
                "externalid" => self.external_id = text,
                "displayname" => self.display_name = text,
                "name.givenname" => self.given_name = text,
                "name.familyname" => self.family_name = text,
                "name" => {
                    self.given_name = value["givenName"].as_str().map(str::to_string);
                    self.family_name = value["familyName"].as_str().map(str::to_string);
                }
                // Attributes the gateway keeps nothing of (the e-mail is the
                // userName; titles, phone numbers, extension schemas, which
                // Entra ID's default mapping sends) change nothing here.
                other => tracing::debug!(path = other, "SCIM user attribute ignored"),
            }
        }
        self.updated_at_ms = now_ms();
        Ok(())
    }

    /// The resource, with its groups (id, display name).
    pub fn render(&self, base_url: &str, groups: &[(String, String)]) -> Value {
        let mut name = json!({});
        if let Some(given) = &self.given_name {
            name["givenName"] = json!(given);
        }
        if let Some(family) = &self.family_name {
            name["familyName"] = json!(family);
        }
        json!({
            "schemas": [USER_SCHEMA],
            "id": self.user_id,
            "externalId": self.external_id,
            "userName": self.user_name,
            "displayName": self.display_name,
            "name": name,
            "emails": [{"value": self.user_name, "primary": true, "type": "work"}],
            "active": self.active,
            "groups": groups.iter().map(|(id, display)| json!({"value": id, "display": display})).collect::<Vec<_>>(),
            "meta": {
                "resourceType": "User",
                "created": timestamp(self.created_at_ms),
                "lastModified": timestamp(self.updated_at_ms),
                "location": format!("{base_url}/scim/v2/Users/{}", self.user_id),
            },
        })
    }

    /// Whether the user matches `attribute eq value` (lower-cased attribute).
    pub fn matches(&self, attribute: &str, value: &str) -> bool {
        match attribute {
            "id" => self.user_id == value,
            "username" | "emails.value" | "emails" => self.user_name.eq_ignore_ascii_case(value),
            "externalid" => self.external_id.as_deref() == Some(value),
            "displayname" => self.display_name.as_deref() == Some(value),
            _ => false,
        }
    }
}

pub async fn get(database: &Database, workspace_id: &str, user_id: &str) -> sqlx::Result<Option<ScimUser>> {
    let row: Option<Row> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM scim_users WHERE workspace_id = $1 AND user_id = $2"
    )))
    .bind(workspace_id)
    .bind(user_id)
    .fetch_optional(&database.pool)
    .await?;
    Ok(row.map(user))
}

pub async fn list(database: &Database, workspace_id: &str) -> sqlx::Result<Vec<ScimUser>> {
    let rows: Vec<Row> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT {COLUMNS} FROM scim_users WHERE workspace_id = $1 ORDER BY created_at_ms, user_id"
    )))
    .bind(workspace_id)
    .fetch_all(&database.pool)
    .await?;
    Ok(rows.into_iter().map(user).collect())
}

/// Inserts or replaces the row.
pub async fn save(database: &Database, workspace_id: &str, user: &ScimUser) -> sqlx::Result<()> {
    let _turn = database.write_turn().await;
    sqlx::query(
        "INSERT INTO scim_users (workspace_id, user_id, user_name, external_id, display_name, given_name, \
         family_name, active, created_at_ms, updated_at_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
         ON CONFLICT (workspace_id, user_id) DO UPDATE SET user_name = $3, external_id = $4, display_name = $5, \
         given_name = $6, family_name = $7, active = $8, updated_at_ms = $10",
    )
    .bind(workspace_id)
    .bind(&user.user_id)
    .bind(&user.user_name)
    .bind(&user.external_id)
    .bind(&user.display_name)
    .bind(&user.given_name)
    .bind(&user.family_name)
    .bind(i64::from(user.active))
    .bind(user.created_at_ms)
    .bind(user.updated_at_ms)
    .execute(&database.pool)
    .await?;
    Ok(())
}

/// Deletes the row and the user's group memberships in the workspace.
pub async fn delete(database: &Database, workspace_id: &str, user_id: &str) -> sqlx::Result<()> {
    let _turn = database.write_turn().await;
    let mut tx = database.begin_write().await?;
    sqlx::query(
        "DELETE FROM scim_group_members WHERE user_id = $1 \
         AND group_id IN (SELECT id FROM scim_groups WHERE workspace_id = $2)",
    )
    .bind(user_id)
    .bind(workspace_id)
    .execute(&mut *tx)
    .await?;
    sqlx::query("DELETE FROM scim_users WHERE workspace_id = $1 AND user_id = $2")
        .bind(workspace_id)
        .bind(user_id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await
}
