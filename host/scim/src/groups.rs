//! SCIM Groups (`scim_groups`, `scim_group_members`): named sets of the
//! workspace's SCIM users. A group's display name maps to a role
//! (`tokens::Settings`), so changing a group changes its members' roles.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::protocol::{GROUP_SCHEMA, Operation, ScimError, timestamp};
use tollgate_core::db::{Database, new_id, now_ms};

#[derive(Clone, Debug, PartialEq)]
pub struct ScimGroup {
    pub id: String,
    pub display_name: String,
    pub external_id: Option<String>,
    pub members: BTreeSet<String>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

/// The member ids of `[{"value": id}, …]`.
fn member_ids(value: &Value) -> Result<Vec<String>, ScimError> {
    let items = match value {
        Value::Array(items) => items.as_slice(),
        Value::Null => &[],
        single @ Value::Object(_) => std::slice::from_ref(single),
        _ => return Err(ScimError::invalid("members must be a list of {\"value\": id}")),
    };
    items
        .iter()
        .map(|item| {
            item["value"]
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| ScimError::invalid("each member needs a value (the user's id)"))
        })
        .collect()
}

/// The id in a path like `members[value eq "usr_1"]`.
fn member_in_path(path: &str) -> Option<String> {
    let inner = path.strip_prefix("members[")?.strip_suffix(']')?;
    let filter = super::protocol::parse_filter(inner).ok()?;
    (filter.attribute == "value").then_some(filter.value)
}

impl ScimGroup {
    pub fn from_body(body: &Value) -> Result<Self, ScimError> {
        let now = now_ms();
        let mut group = ScimGroup {
            id: new_id("grp"),
            display_name: String::new(),
            external_id: None,
            members: BTreeSet::new(),
            created_at_ms: now,
            updated_at_ms: now,
        };
        group.replace_with(body)?;
        Ok(group)
    }

    pub fn replace_with(&mut self, body: &Value) -> Result<(), ScimError> {
        let name = body["displayName"]
            .as_str()
            .filter(|n| !n.trim().is_empty())
            .ok_or_else(|| ScimError::invalid("displayName is required"))?;
        self.display_name = name.to_string();
        self.external_id = body["externalId"].as_str().map(str::to_string);
        self.members = member_ids(&body["members"])?.into_iter().collect();
        self.updated_at_ms = now_ms();
        Ok(())
    }

    pub fn patch(&mut self, operations: &[Operation]) -> Result<(), ScimError> {
        for operation in operations {
            let path = operation.path.as_deref().unwrap_or_default();
            match (operation.op.as_str(), path.to_ascii_lowercase().as_str()) {
                ("add", "members") => self.members.extend(member_ids(&operation.value)?),
                ("replace", "members") => self.members = member_ids(&operation.value)?.into_iter().collect(),
                ("remove", "members") => match &operation.value {
                    Value::Null => self.members.clear(),
                    value => {
                        for id in member_ids(value)? {
                            self.members.remove(&id);
                        }
                    }
                },
                ("remove", p) if p.starts_with("members[") => {
                    let id = member_in_path(path).ok_or_else(|| ScimError::invalid(format!("bad path '{path}'")))?;
                    self.members.remove(&id);
                }
                ("add" | "replace", "displayname") => {
                    self.display_name = operation
                        .value
                        .as_str()
                        .filter(|n| !n.trim().is_empty())
                        .ok_or_else(|| ScimError::invalid("displayName must be a non-empty string"))?
                        .to_string();
                }
                ("add" | "replace", "externalid") => self.external_id = operation.value.as_str().map(str::to_string),
                // Okta restates the id beside a new display name.
                ("add" | "replace", "id") if operation.value.as_str() == Some(self.id.as_str()) => {}
                (op, other) => return Err(ScimError::invalid(format!("cannot {op} '{other}' of a group"))),
            }
        }
        self.updated_at_ms = now_ms();
        Ok(())
    }

    /// The resource; `users` gives each member's display (their userName).
    pub fn render(&self, base_url: &str, display_of: impl Fn(&str) -> Option<String>) -> Value {
        let members: Vec<Value> = self
            .members
            .iter()
            .map(|id| json!({"value": id, "display": display_of(id), "$ref": format!("{base_url}/scim/v2/Users/{id}")}))
            .collect();
        json!({
            "schemas": [GROUP_SCHEMA],
            "id": self.id,
            "externalId": self.external_id,
            "displayName": self.display_name,
            "members": members,
            "meta": {
                "resourceType": "Group",
                "created": timestamp(self.created_at_ms),
                "lastModified": timestamp(self.updated_at_ms),
                "location": format!("{base_url}/scim/v2/Groups/{}", self.id),
            },
        })
    }

    pub fn matches(&self, attribute: &str, value: &str) -> bool {
        match attribute {
            "id" => self.id == value,
            "displayname" => self.display_name.eq_ignore_ascii_case(value),
            "externalid" => self.external_id.as_deref() == Some(value),
            _ => false,
        }
    }
}

type Row = (String, String, Option<String>, i64, i64);

async fn with_members(database: &Database, rows: Vec<Row>) -> sqlx::Result<Vec<ScimGroup>> {
    let mut groups = Vec::with_capacity(rows.len());
    for (id, display_name, external_id, created_at_ms, updated_at_ms) in rows {
        let members: Vec<String> = sqlx::query_scalar("SELECT user_id FROM scim_group_members WHERE group_id = $1")
            .bind(&id)
            .fetch_all(&database.pool)
            .await?;
        groups.push(ScimGroup {
            id,
            display_name,
            external_id,
            members: members.into_iter().collect(),
            created_at_ms,
            updated_at_ms,
        });
    }
    Ok(groups)
}

pub async fn get(database: &Database, workspace_id: &str, id: &str) -> sqlx::Result<Option<ScimGroup>> {
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT id, display_name, external_id, created_at_ms, updated_at_ms FROM scim_groups \
         WHERE workspace_id = $1 AND id = $2",
    )
    .bind(workspace_id)
    .bind(id)
    .fetch_all(&database.pool)
    .await?;
    Ok(with_members(database, rows).await?.pop())
}

pub async fn list(database: &Database, workspace_id: &str) -> sqlx::Result<Vec<ScimGroup>> {
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT id, display_name, external_id, created_at_ms, updated_at_ms FROM scim_groups \
         WHERE workspace_id = $1 ORDER BY created_at_ms, id",
    )
    .bind(workspace_id)
    .fetch_all(&database.pool)
    .await?;
    with_members(database, rows).await
}

/// The groups (id, display name) `user_id` is in.
pub async fn of_user(database: &Database, workspace_id: &str, user_id: &str) -> sqlx::Result<Vec<(String, String)>> {
    sqlx::query_as(
        "SELECT g.id, g.display_name FROM scim_groups g JOIN scim_group_members m ON m.group_id = g.id \
         WHERE g.workspace_id = $1 AND m.user_id = $2 ORDER BY g.display_name",
    )
    .bind(workspace_id)
    .bind(user_id)
    .fetch_all(&database.pool)
    .await
}

/// Inserts or replaces the group and its member list. A display name taken
/// by another group of the workspace is a conflict.
pub async fn save(database: &Database, workspace_id: &str, group: &ScimGroup) -> Result<(), ScimError> {
    let _turn = database.write_turn().await;
    let mut tx = database.begin_write().await?;
    let taken: Option<String> =
        sqlx::query_scalar("SELECT id FROM scim_groups WHERE workspace_id = $1 AND display_name = $2 AND id <> $3")
            .bind(workspace_id)
            .bind(&group.display_name)
            .bind(&group.id)
            .fetch_optional(&mut *tx)
            .await?;
    if taken.is_some() {
        return Err(ScimError::conflict(format!(
            "a group named '{}' exists",
            group.display_name
        )));
    }
    sqlx::query(
        "INSERT INTO scim_groups (id, workspace_id, display_name, external_id, created_at_ms, updated_at_ms) \
         VALUES ($1, $2, $3, $4, $5, $6) \
         ON CONFLICT (id) DO UPDATE SET display_name = $3, external_id = $4, updated_at_ms = $6",
    )
    .bind(&group.id)
    .bind(workspace_id)
    .bind(&group.display_name)
    .bind(&group.external_id)
    .bind(group.created_at_ms)
    .bind(group.updated_at_ms)
    .execute(&mut *tx)
    .await?;
    sqlx::query("DELETE FROM scim_group_members WHERE group_id = $1")
        .bind(&group.id)
        .execute(&mut *tx)
        .await?;
    for member in &group.members {
        sqlx::query("INSERT INTO scim_group_members (group_id, user_id) VALUES ($1, $2)")
            .bind(&group.id)
            .bind(member)
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(())
}

pub async fn delete(database: &Database, workspace_id: &str, id: &str) -> sqlx::Result<()> {
    let _turn = database.write_turn().await;
    let mut tx = database.begin_write().await?;
    sqlx::query("DELETE FROM scim_group_members WHERE group_id IN (SELECT id FROM scim_groups WHERE id = $1 AND workspace_id = $2)")
        .bind(id)
        .bind(workspace_id)
        .execute(&mut *tx)
        .await?;
    sqlx::query("DELETE FROM scim_groups WHERE id = $1 AND workspace_id = $2")
        .bind(id)
        .bind(workspace_id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::operations;

    #[test]
    fn member_patches_as_okta_and_entra_send_them() {
        let mut group = ScimGroup::from_body(&json!({"displayName": "Admins", "members": [{"value": "a"}]})).unwrap();
        let add = json!({"Operations": [{"op": "add", "path": "members", "value": [{"value": "b"}, {"value": "c"}]}]});
        group.patch(&operations(&add).unwrap()).unwrap();
        let remove = json!({"Operations": [{"op": "remove", "path": "members[value eq \"a\"]"}]});
        group.patch(&operations(&remove).unwrap()).unwrap();
        let entra_remove = json!({"Operations": [{"op": "Remove", "path": "members", "value": [{"value": "b"}]}]});
        group.patch(&operations(&entra_remove).unwrap()).unwrap();
        assert_eq!(group.members.iter().collect::<Vec<_>>(), ["c"]);
        let rename = json!({"Operations": [{"op": "replace", "value": {"displayName": "Owners-ish"}}]});
        group.patch(&operations(&rename).unwrap()).unwrap();
        assert_eq!(group.display_name, "Owners-ish");
    }
}
