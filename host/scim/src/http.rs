//! The SCIM endpoints under `/scim/v2/`: discovery, Users and Groups, each
//! request authenticated by a workspace's bearer token and confined to that
//! workspace.

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, FromRef, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

use super::protocol::{ListQuery, MAX_COUNT, PATCH_SCHEMA, ScimError, operations, parse_filter, scim};
use super::users::{ScimUser, email_of};
use super::{Connection, Provisioning, groups, tokens, users};

/// SCIM bodies are a few KB; a group of thousands of members stays well below.
const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Bounds on what one workspace's provider may keep here, so that its lists
/// and syncs stay short and cannot slow other workspaces' requests.
const MAX_USERS: usize = 10_000;
const MAX_GROUP_MEMBERS: usize = 10_000;

pub fn routes<S>() -> axum::Router<S>
where
    S: Clone + Send + Sync + 'static,
    Arc<Provisioning>: FromRef<S>,
{
    axum::Router::new()
        .route("/scim/v2/ServiceProviderConfig", get(service_provider_config))
        .route("/scim/v2/ResourceTypes", get(resource_types))
        .route("/scim/v2/Users", get(list_users).post(create_user))
        .route(
            "/scim/v2/Users/{id}",
            get(get_user).put(replace_user).patch(patch_user).delete(delete_user),
        )
        .route("/scim/v2/Groups", get(list_groups).post(create_group))
        .route(
            "/scim/v2/Groups/{id}",
            get(get_group)
                .put(replace_group)
                .patch(patch_group)
                .delete(delete_group),
        )
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
}

type Scim = State<Arc<Provisioning>>;
type Answer = Result<Response, ScimError>;

async fn connect(scim: &Provisioning, headers: &HeaderMap) -> Result<Connection, ScimError> {
    let unauthorized = || ScimError::new(StatusCode::UNAUTHORIZED, None, "a valid SCIM bearer token is required");
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .ok_or_else(unauthorized)?;
    let (workspace_id, token_id) = tokens::resolve(&scim.database, token.trim())
        .await?
        .ok_or_else(unauthorized)?;
    Ok(Connection { workspace_id, token_id })
}

/// A body that must be JSON (SCIM clients send `application/scim+json`,
/// which axum's `Json` would refuse).
fn json_body(body: &[u8]) -> Result<Value, ScimError> {
    serde_json::from_slice(body).map_err(|e| ScimError::invalid(format!("the body is not JSON: {e}")))
}

fn base_url(scim: &Provisioning, headers: &HeaderMap) -> String {
    scim.origins.public_url(Some(headers)).trim_end_matches('/').to_string()
}

async fn service_provider_config(State(scim): Scim, headers: HeaderMap) -> Answer {
    connect(&scim, &headers).await?;
    Ok(scim_json(json!({
        "schemas": ["urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig"],
        "documentationUri": "https://github.com/tollgate/tollgate/blob/main/docs/scim.md",
        "patch": {"supported": true},
        "bulk": {"supported": false, "maxOperations": 0, "maxPayloadSize": 0},
        "filter": {"supported": true, "maxResults": MAX_COUNT},
        "changePassword": {"supported": false},
        "sort": {"supported": false},
        "etag": {"supported": false},
        "authenticationSchemes": [{
            "type": "oauthbearertoken", "name": "Bearer token", "primary": true,
            "description": "A workspace's SCIM token (scim.tokens.create)",
        }],
    })))
}

async fn resource_types(State(scim): Scim, headers: HeaderMap) -> Answer {
    connect(&scim, &headers).await?;
    let types = vec![
        json!({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:ResourceType"], "id": "User", "name": "User",
               "endpoint": "/Users", "schema": super::protocol::USER_SCHEMA}),
        json!({"schemas": ["urn:ietf:params:scim:schemas:core:2.0:ResourceType"], "id": "Group", "name": "Group",
               "endpoint": "/Groups", "schema": super::protocol::GROUP_SCHEMA}),
    ];
    Ok(ListQuery::default().page(types))
}

fn scim_json(body: Value) -> Response {
    scim(StatusCode::OK, body)
}

async fn render_user(
    scim: &Provisioning,
    connection: &Connection,
    user: &ScimUser,
    base: &str,
) -> Result<Value, ScimError> {
    let groups = groups::of_user(&scim.database, &connection.workspace_id, &user.user_id).await?;
    Ok(user.render(base, &groups))
}

async fn list_users(State(scim): Scim, headers: HeaderMap, Query(query): Query<ListQuery>) -> Answer {
    let connection = connect(&scim, &headers).await?;
    let filter = query.filter.as_deref().map(parse_filter).transpose()?;
    let base = base_url(&scim, &headers);
    let mut found = Vec::new();
    for user in users::list(&scim.database, &connection.workspace_id).await? {
        if filter.as_ref().is_none_or(|f| user.matches(&f.attribute, &f.value)) {
            found.push(query.trim(render_user(&scim, &connection, &user, &base).await?));
        }
    }
    Ok(query.page(found))
}

async fn existing_user(scim: &Provisioning, connection: &Connection, id: &str) -> Result<ScimUser, ScimError> {
    users::get(&scim.database, &connection.workspace_id, id)
        .await?
        .ok_or_else(|| ScimError::not_found(&format!("user '{id}'")))
}

async fn get_user(State(scim): Scim, headers: HeaderMap, Path(id): Path<String>) -> Answer {
    let connection = connect(&scim, &headers).await?;
    let user = existing_user(&scim, &connection, &id).await?;
    Ok(scim_json(
        render_user(&scim, &connection, &user, &base_url(&scim, &headers)).await?,
    ))
}

async fn create_user(State(scim): Scim, headers: HeaderMap, body: axum::body::Bytes) -> Answer {
    let connection = connect(&scim, &headers).await?;
    let mut user = ScimUser::from_body(&json_body(&body)?)?;
    let provisioned = users::list(&scim.database, &connection.workspace_id).await?;
    if provisioned.iter().any(|u| u.user_name == user.user_name) {
        return Err(ScimError::conflict(format!("user '{}' exists", user.user_name)));
    }
    // Inactive users hold no seat, so the plan's seats alone would not bound them.
    if provisioned.len() >= MAX_USERS {
        return Err(ScimError::new(
            StatusCode::FORBIDDEN,
            None,
            format!("a workspace holds at most {MAX_USERS} provisioned users; delete some first"),
        ));
    }
    let display = user.display_name.clone().unwrap_or_else(|| user.user_name.clone());
    user.user_id = scim.accounts.user_for_email(&user.user_name, &display).await?;
    users::save(&scim.database, &connection.workspace_id, &user).await?;
    if let Err(error) = scim.sync(&connection.workspace_id, &user.user_id).await {
        // Not provisioned after all (no seat left): nothing stays behind.
        users::delete(&scim.database, &connection.workspace_id, &user.user_id).await?;
        return Err(error);
    }
    let rendered = render_user(&scim, &connection, &user, &base_url(&scim, &headers)).await?;
    scim.audit(
        &connection,
        "scim.users.create",
        json!({"user_id": user.user_id}),
        Some(rendered.clone()),
    )
    .await;
    Ok(super::protocol::scim(StatusCode::CREATED, rendered))
}

/// PUT and PATCH: change the stored user, then its membership.
async fn update_user(scim: &Provisioning, headers: &HeaderMap, id: &str, body: &[u8], patch: bool) -> Answer {
    let connection = connect(scim, headers).await?;
    let mut user = existing_user(scim, &connection, id).await?;
    let body = json_body(body)?;
    if patch {
        if !body["schemas"]
            .as_array()
            .is_none_or(|s| s.iter().any(|v| v == PATCH_SCHEMA))
        {
            return Err(ScimError::invalid(format!("a PATCH body is a {PATCH_SCHEMA}")));
        }
        user.patch(&operations(&body)?)?;
    } else {
        user.replace_with(&body)?;
    }
    email_of(&user.user_name)?;
    users::save(&scim.database, &connection.workspace_id, &user).await?;
    scim.sync(&connection.workspace_id, &user.user_id).await?;
    let rendered = render_user(scim, &connection, &user, &base_url(scim, headers)).await?;
    let op = if patch {
        "scim.users.patch"
    } else {
        "scim.users.replace"
    };
    scim.audit(
        &connection,
        op,
        json!({"user_id": user.user_id}),
        Some(rendered.clone()),
    )
    .await;
    Ok(scim_json(rendered))
}

async fn replace_user(
    State(scim): Scim,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Answer {
    update_user(&scim, &headers, &id, &body, false).await
}

async fn patch_user(State(scim): Scim, headers: HeaderMap, Path(id): Path<String>, body: axum::body::Bytes) -> Answer {
    update_user(&scim, &headers, &id, &body, true).await
}

async fn delete_user(State(scim): Scim, headers: HeaderMap, Path(id): Path<String>) -> Answer {
    let connection = connect(&scim, &headers).await?;
    let mut user = existing_user(&scim, &connection, &id).await?;
    // Leave the workspace first: a refusal (the last owner) keeps the user.
    user.active = false;
    users::save(&scim.database, &connection.workspace_id, &user).await?;
    scim.sync(&connection.workspace_id, &id).await?;
    users::delete(&scim.database, &connection.workspace_id, &id).await?;
    scim.audit(&connection, "scim.users.delete", json!({"user_id": id}), None)
        .await;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn render_group(
    scim: &Provisioning,
    connection: &Connection,
    group: &groups::ScimGroup,
    base: &str,
) -> Result<Value, ScimError> {
    let known = users::list(&scim.database, &connection.workspace_id).await?;
    Ok(group.render(base, |id| {
        known.iter().find(|u| u.user_id == id).map(|u| u.user_name.clone())
    }))
}

async fn list_groups(State(scim): Scim, headers: HeaderMap, Query(query): Query<ListQuery>) -> Answer {
    let connection = connect(&scim, &headers).await?;
    let filter = query.filter.as_deref().map(parse_filter).transpose()?;
    let base = base_url(&scim, &headers);
    let mut found = Vec::new();
    for group in groups::list(&scim.database, &connection.workspace_id).await? {
        if filter.as_ref().is_none_or(|f| group.matches(&f.attribute, &f.value)) {
            found.push(query.trim(render_group(&scim, &connection, &group, &base).await?));
        }
    }
    Ok(query.page(found))
}

async fn existing_group(
    scim: &Provisioning,
    connection: &Connection,
    id: &str,
) -> Result<groups::ScimGroup, ScimError> {
    groups::get(&scim.database, &connection.workspace_id, id)
        .await?
        .ok_or_else(|| ScimError::not_found(&format!("group '{id}'")))
}

async fn get_group(State(scim): Scim, headers: HeaderMap, Path(id): Path<String>) -> Answer {
    let connection = connect(&scim, &headers).await?;
    let group = existing_group(&scim, &connection, &id).await?;
    Ok(scim_json(
        render_group(&scim, &connection, &group, &base_url(&scim, &headers)).await?,
    ))
}

/// Saves `group` (its members must be the workspace's SCIM users), then
/// brings roles in line: of those who joined or left, or of every member
/// when the group's name (and so the role it maps to) changed. A PATCH that
/// adds one member to a large group syncs that one member.
async fn save_group(
    scim: &Provisioning,
    connection: &Connection,
    group: &groups::ScimGroup,
    before: Option<&groups::ScimGroup>,
) -> Result<(), ScimError> {
    if group.members.len() > MAX_GROUP_MEMBERS {
        return Err(ScimError::invalid(format!(
            "a group holds at most {MAX_GROUP_MEMBERS} members"
        )));
    }
    let known: std::collections::HashSet<String> = users::list(&scim.database, &connection.workspace_id)
        .await?
        .into_iter()
        .map(|u| u.user_id)
        .collect();
    if let Some(stranger) = group.members.iter().find(|id| !known.contains(*id)) {
        return Err(ScimError::invalid(format!(
            "member '{stranger}' is not a user provisioned here"
        )));
    }
    groups::save(&scim.database, &connection.workspace_id, group).await?;
    let empty = std::collections::BTreeSet::new();
    let (old_members, renamed) = match before {
        Some(before) => (
            &before.members,
            !before.display_name.eq_ignore_ascii_case(&group.display_name),
        ),
        None => (&empty, false),
    };
    let affected: Vec<&String> = match renamed {
        true => group.members.union(old_members).collect(),
        false => group.members.symmetric_difference(old_members).collect(),
    };
    for user_id in affected {
        scim.sync(&connection.workspace_id, user_id).await?;
    }
    Ok(())
}

async fn create_group(State(scim): Scim, headers: HeaderMap, body: axum::body::Bytes) -> Answer {
    let connection = connect(&scim, &headers).await?;
    let group = groups::ScimGroup::from_body(&json_body(&body)?)?;
    save_group(&scim, &connection, &group, None).await?;
    let rendered = render_group(&scim, &connection, &group, &base_url(&scim, &headers)).await?;
    scim.audit(
        &connection,
        "scim.groups.create",
        json!({"group_id": group.id}),
        Some(rendered.clone()),
    )
    .await;
    Ok(super::protocol::scim(StatusCode::CREATED, rendered))
}

async fn update_group(scim: &Provisioning, headers: &HeaderMap, id: &str, body: &[u8], patch: bool) -> Answer {
    let connection = connect(scim, headers).await?;
    let mut group = existing_group(scim, &connection, id).await?;
    let before = group.clone();
    let body = json_body(body)?;
    if patch {
        group.patch(&operations(&body)?)?;
    } else {
        group.replace_with(&body)?;
    }
    save_group(scim, &connection, &group, Some(&before)).await?;
    let rendered = render_group(scim, &connection, &group, &base_url(scim, headers)).await?;
    let op = if patch {
        "scim.groups.patch"
    } else {
        "scim.groups.replace"
    };
    scim.audit(&connection, op, json!({"group_id": group.id}), Some(rendered.clone()))
        .await;
    // Entra ID and Okta accept 204 for a PATCH without attributes asked for;
    // answering the resource serves both.
    Ok(scim_json(rendered))
}

async fn replace_group(
    State(scim): Scim,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Answer {
    update_group(&scim, &headers, &id, &body, false).await
}

async fn patch_group(State(scim): Scim, headers: HeaderMap, Path(id): Path<String>, body: axum::body::Bytes) -> Answer {
    update_group(&scim, &headers, &id, &body, true).await
}

async fn delete_group(State(scim): Scim, headers: HeaderMap, Path(id): Path<String>) -> Answer {
    let connection = connect(&scim, &headers).await?;
    let group = existing_group(&scim, &connection, &id).await?;
    groups::delete(&scim.database, &connection.workspace_id, &id).await?;
    for user_id in &group.members {
        scim.sync(&connection.workspace_id, user_id).await?;
    }
    scim.audit(&connection, "scim.groups.delete", json!({"group_id": id}), None)
        .await;
    Ok(StatusCode::NO_CONTENT.into_response())
}
