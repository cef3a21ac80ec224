//! SCIM 2.0 wire details shared by users and groups (RFC 7644): errors, list
//! responses with paging, the `attribute eq "value"` filters identity
//! providers send, and PATCH operations in the spellings Okta and Entra ID
//! use.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

pub const USER_SCHEMA: &str = "urn:ietf:params:scim:schemas:core:2.0:User";
pub const GROUP_SCHEMA: &str = "urn:ietf:params:scim:schemas:core:2.0:Group";
const LIST_SCHEMA: &str = "urn:ietf:params:scim:api:messages:2.0:ListResponse";
const ERROR_SCHEMA: &str = "urn:ietf:params:scim:api:messages:2.0:Error";
pub const PATCH_SCHEMA: &str = "urn:ietf:params:scim:api:messages:2.0:PatchOp";

/// Most resources one list answers.
pub const MAX_COUNT: usize = 200;

/// A SCIM answer: JSON as `application/scim+json`.
pub fn scim(status: StatusCode, body: Value) -> Response {
    let mut response = (status, axum::Json(body)).into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/scim+json"));
    response
}

/// A SCIM error (RFC 7644 §3.12).
#[derive(Debug)]
pub struct ScimError {
    pub status: StatusCode,
    pub scim_type: Option<&'static str>,
    pub detail: String,
}

impl ScimError {
    pub fn new(status: StatusCode, scim_type: Option<&'static str>, detail: impl Into<String>) -> Self {
        Self {
            status,
            scim_type,
            detail: detail.into(),
        }
    }

    pub fn invalid(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, Some("invalidValue"), detail)
    }

    pub fn not_found(what: &str) -> Self {
        Self::new(StatusCode::NOT_FOUND, None, format!("{what} not found"))
    }

    pub fn conflict(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, Some("uniqueness"), detail)
    }
}

impl IntoResponse for ScimError {
    fn into_response(self) -> Response {
        let mut body = json!({
            "schemas": [ERROR_SCHEMA],
            "status": self.status.as_u16().to_string(),
            "detail": self.detail,
        });
        if let Some(scim_type) = self.scim_type {
            body["scimType"] = json!(scim_type);
        }
        scim(self.status, body)
    }
}

impl From<sqlx::Error> for ScimError {
    fn from(error: sqlx::Error) -> Self {
        anyhow::Error::from(error).into()
    }
}

impl From<anyhow::Error> for ScimError {
    fn from(error: anyhow::Error) -> Self {
        tracing::error!(error = %format!("{error:#}"), "SCIM request failed");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            None,
            "internal error; it has been logged",
        )
    }
}

/// `?filter=…&startIndex=…&count=…` of a list request.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListQuery {
    pub filter: Option<String>,
    pub start_index: Option<usize>,
    pub count: Option<usize>,
    /// `members` leaves groups' member lists out (Entra ID asks so).
    pub excluded_attributes: Option<String>,
}

impl ListQuery {
    /// Removes the attributes the request excluded from `resource`.
    pub fn trim(&self, mut resource: Value) -> Value {
        if let (Some(excluded), Value::Object(fields)) = (&self.excluded_attributes, &mut resource) {
            for attribute in excluded.split(',') {
                let attribute = attribute.trim();
                fields.retain(|name, _| !name.eq_ignore_ascii_case(attribute) || name == "id" || name == "schemas");
            }
        }
        resource
    }
}

impl ListQuery {
    /// The page of `all` asked for, as a ListResponse.
    pub fn page(&self, all: Vec<Value>) -> Response {
        let start = self.start_index.unwrap_or(1).max(1);
        let count = self.count.unwrap_or(100).min(MAX_COUNT);
        let total = all.len();
        let page: Vec<Value> = all.into_iter().skip(start - 1).take(count).collect();
        scim(
            StatusCode::OK,
            json!({
                "schemas": [LIST_SCHEMA],
                "totalResults": total,
                "startIndex": start,
                "itemsPerPage": page.len(),
                "Resources": page,
            }),
        )
    }
}

/// `attribute eq "value"`, the one filter identity providers send when
/// they look a resource up. The attribute is lower-cased (SCIM attribute
/// names ignore case).
#[derive(Debug, PartialEq, Eq)]
pub struct Equals {
    pub attribute: String,
    pub value: String,
}

pub fn parse_filter(filter: &str) -> Result<Equals, ScimError> {
    let unsupported = || {
        ScimError::new(
            StatusCode::BAD_REQUEST,
            Some("invalidFilter"),
            format!("unsupported filter '{filter}': only `attribute eq \"value\"` is supported"),
        )
    };
    let (attribute, rest) = filter.trim().split_once(char::is_whitespace).ok_or_else(unsupported)?;
    let (operator, value) = rest
        .trim_start()
        .split_once(char::is_whitespace)
        .ok_or_else(unsupported)?;
    if !operator.eq_ignore_ascii_case("eq") {
        return Err(unsupported());
    }
    let value: String = serde_json::from_str(value.trim()).map_err(|_| unsupported())?;
    Ok(Equals {
        attribute: attribute.to_ascii_lowercase(),
        value,
    })
}

/// One PATCH operation, normalised: the op lower-cased, and a missing path
/// expanded from the value's members (`{"op":"replace","value":{"active":false}}`
/// is `replace active false`).
#[derive(Debug, Clone, PartialEq)]
pub struct Operation {
    pub op: String,
    pub path: Option<String>,
    pub value: Value,
}

pub fn operations(body: &Value) -> Result<Vec<Operation>, ScimError> {
    let list = body
        .get("Operations")
        .or_else(|| body.get("operations"))
        .and_then(Value::as_array)
        .ok_or_else(|| ScimError::invalid("a PatchOp needs Operations"))?;
    let mut out = Vec::new();
    for item in list {
        let op = item["op"]
            .as_str()
            .ok_or_else(|| ScimError::invalid("each operation needs an op"))?
            .to_ascii_lowercase();
        if !matches!(op.as_str(), "add" | "replace" | "remove") {
            return Err(ScimError::invalid(format!("unknown op '{op}'")));
        }
        let value = item.get("value").cloned().unwrap_or(Value::Null);
        match item["path"].as_str() {
            Some(path) => out.push(Operation {
                op,
                path: Some(path.to_string()),
                value,
            }),
            None => match value {
                Value::Object(fields) => out.extend(fields.into_iter().map(|(path, value)| Operation {
                    op: op.clone(),
                    path: Some(path),
                    value,
                })),
                _ => return Err(ScimError::invalid("an operation without a path needs an object value")),
            },
        }
    }
    Ok(out)
}

/// A boolean as identity providers send it: `false`, or Entra ID's `"False"`.
pub fn boolean(value: &Value) -> Result<bool, ScimError> {
    match value {
        Value::Bool(b) => Ok(*b),
        Value::String(text) if text.eq_ignore_ascii_case("true") => Ok(true),
        Value::String(text) if text.eq_ignore_ascii_case("false") => Ok(false),
        other => Err(ScimError::invalid(format!("expected a boolean, got {other}"))),
    }
}

/// RFC 3339 of Unix milliseconds, for `meta`.
pub fn timestamp(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_as_okta_and_entra_send_them() {
        assert_eq!(
            parse_filter("userName eq \"alice@example.com\"").unwrap(),
            Equals {
                attribute: "username".into(),
                value: "alice@example.com".into()
            }
        );
        assert_eq!(parse_filter("externalId EQ \"00u1\"").unwrap().attribute, "externalid");
        assert!(parse_filter("userName sw \"a\"").is_err());
        assert!(parse_filter("userName eq alice").is_err());
    }

    #[test]
    fn patch_operations_in_both_spellings() {
        let okta = json!({"schemas": [PATCH_SCHEMA], "Operations": [{"op": "replace", "value": {"active": false}}]});
        let entra =
            json!({"schemas": [PATCH_SCHEMA], "Operations": [{"op": "Replace", "path": "active", "value": "False"}]});
        for body in [okta, entra] {
            let ops = operations(&body).unwrap();
            assert_eq!(ops.len(), 1);
            assert_eq!(
                (ops[0].op.as_str(), ops[0].path.as_deref()),
                ("replace", Some("active"))
            );
            assert!(!boolean(&ops[0].value).unwrap());
        }
        assert!(operations(&json!({"Operations": [{"op": "move"}]})).is_err());
    }

    #[test]
    fn pages_start_at_one() {
        let query = ListQuery {
            start_index: Some(2),
            count: Some(1),
            ..Default::default()
        };
        let response = query.page(vec![json!(1), json!(2), json!(3)]);
        assert_eq!(response.status(), StatusCode::OK);
    }
}
