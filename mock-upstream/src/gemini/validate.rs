//! Request checks the Gemini API makes before answering. Gemini parses the
//! body as protobuf JSON, so an unknown field anywhere is a 400 ("Unknown
//! name … Cannot find field") — notably JSON-Schema keywords such as
//! `additionalProperties` in a function's `parameters`, which its `Schema`
//! (an OpenAPI subset) lacks. Then it checks the fields it requires. Messages
//! follow Google's wording; locations use its snake_case field paths.

use serde_json::{Map, Value};

/// Why a request is refused (both answer 400 `INVALID_ARGUMENT`).
pub enum Rejection {
    /// A field the protobuf schema does not have.
    UnknownField(String),
    Invalid(String),
}

type Checked = Result<(), Rejection>;

const REQUEST_FIELDS: &[&str] = &[
    "contents",
    "systemInstruction",
    "tools",
    "toolConfig",
    "safetySettings",
    "generationConfig",
    "cachedContent",
    "labels",
    "serviceTier",
    // The mock's own test directives (see the crate docs).
    "mock",
];
const CONTENT_FIELDS: &[&str] = &["role", "parts"];
/// The `data` oneof of a `Part`, plus its metadata fields.
const PART_DATA: &[&str] = &[
    "text",
    "inlineData",
    "fileData",
    "functionCall",
    "functionResponse",
    "executableCode",
    "codeExecutionResult",
];
const PART_META: &[&str] = &["thought", "thoughtSignature", "videoMetadata", "partMetadata"];
const TOOL_FIELDS: &[&str] = &[
    "functionDeclarations",
    "googleSearch",
    "googleSearchRetrieval",
    "codeExecution",
    "urlContext",
    "computerUse",
    "fileSearch",
    "googleMaps",
];
const DECLARATION_FIELDS: &[&str] = &[
    "name",
    "description",
    "parameters",
    "parametersJsonSchema",
    "response",
    "responseJsonSchema",
    "behavior",
];
const GENERATION_FIELDS: &[&str] = &[
    "stopSequences",
    "responseMimeType",
    "responseSchema",
    "responseJsonSchema",
    "responseModalities",
    "candidateCount",
    "maxOutputTokens",
    "temperature",
    "topP",
    "topK",
    "seed",
    "presencePenalty",
    "frequencyPenalty",
    "responseLogprobs",
    "logprobs",
    "enableEnhancedCivicAnswers",
    "speechConfig",
    "thinkingConfig",
    "imageConfig",
    "mediaResolution",
    "audioTranscriptionConfig",
];
/// Gemini's `Schema` message.
const SCHEMA_FIELDS: &[&str] = &[
    "type",
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "maxItems",
    "minItems",
    "properties",
    "required",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
    "pattern",
    "example",
    "anyOf",
    "propertyOrdering",
    "default",
    "items",
    "minimum",
    "maximum",
];
const TYPES: &[&str] = &[
    "TYPE_UNSPECIFIED",
    "STRING",
    "NUMBER",
    "INTEGER",
    "BOOLEAN",
    "ARRAY",
    "OBJECT",
    "NULL",
];
const MODES: &[&str] = &["MODE_UNSPECIFIED", "AUTO", "ANY", "NONE", "VALIDATED"];
const MIME_TYPES: &[&str] = &[
    "text/plain",
    "application/json",
    "application/xml",
    "application/yaml",
    "text/x.enum",
];

/// Check a `GenerateContentRequest`.
pub fn request(body: &Map<String, Value>) -> Checked {
    known_fields(body, REQUEST_FIELDS, "")?;
    let contents = match body.get("contents") {
        Some(Value::Array(contents)) if !contents.is_empty() => contents,
        _ => return invalid("* GenerateContentRequest.contents: contents is not specified\n"),
    };
    for (i, content) in contents.iter().enumerate() {
        self::content(content, &format!("contents[{i}]"), true)?;
    }
    if let Some(system) = body.get("systemInstruction") {
        self::content(system, "system_instruction", false)?;
    }
    if let Some(tools) = body.get("tools") {
        self::tools(tools)?;
    }
    if let Some(config) = body.get("toolConfig") {
        tool_config(config)?;
    }
    if let Some(config) = body.get("generationConfig") {
        generation_config(config)?;
    }
    Ok(())
}

fn content(content: &Value, at: &str, needs_role: bool) -> Checked {
    let Some(content) = content.as_object() else {
        return invalid(&format!("Invalid value at '{at}': expected a Content object"));
    };
    known_fields(content, CONTENT_FIELDS, at)?;
    match content.get("role").and_then(Value::as_str) {
        None | Some("user" | "model") => {}
        Some(_) if !needs_role => {}
        Some(_) => return invalid("Please use a valid role: user, model."),
    }
    let parts = match content.get("parts") {
        Some(Value::Array(parts)) if !parts.is_empty() => parts,
        _ => {
            return invalid(&format!(
                "* GenerateContentRequest.{at}.parts: contents.parts must not be empty.\n"
            ));
        }
    };
    for (j, part) in parts.iter().enumerate() {
        self::part(part, &format!("{at}.parts[{j}]"))?;
    }
    Ok(())
}

fn part(part: &Value, at: &str) -> Checked {
    let Some(part) = part.as_object() else {
        return invalid(&format!("Invalid value at '{at}': expected a Part object"));
    };
    for key in part.keys() {
        if !PART_DATA.contains(&key.as_str()) && !PART_META.contains(&key.as_str()) {
            return unknown(key, at);
        }
    }
    let data: Vec<&str> = PART_DATA.iter().copied().filter(|k| part.contains_key(*k)).collect();
    match data.as_slice() {
        [] => {
            return invalid(&format!(
                "* GenerateContentRequest.{at}.data: required oneof field 'data' must have one initialized field\n"
            ));
        }
        [_] => {}
        [_, second, ..] => {
            return invalid(&format!(
                "Invalid JSON payload received. Oneof field 'data' is already set. Cannot set '{second}'"
            ));
        }
    }
    let needs = |object: &str, fields: &[&str]| -> Checked {
        let value = part.get(object).and_then(Value::as_object);
        for field in fields {
            if value.and_then(|v| v.get(*field)).is_none_or(Value::is_null) {
                return invalid(&format!(
                    "* GenerateContentRequest.{at}.{}.{}: required field is not set\n",
                    snake(object),
                    snake(field)
                ));
            }
        }
        Ok(())
    };
    match data[0] {
        "text" if !part["text"].is_string() => invalid(&format!("Invalid value at '{at}.text' (TYPE_STRING)")),
        "inlineData" => {
            needs("inlineData", &["mimeType", "data"])?;
            let data = part["inlineData"]["data"].as_str().unwrap_or("");
            let base64 = data
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'-' | b'_' | b'='));
            if !base64 {
                return invalid(&format!(
                    "Invalid value at '{at}.inline_data.data' (TYPE_BYTES), Base64 decoding failed"
                ));
            }
            Ok(())
        }
        "fileData" => needs("fileData", &["fileUri"]),
        "functionCall" => {
            needs("functionCall", &["name"])?;
            object_or_absent(&part["functionCall"], "args", &format!("{at}.function_call"))
        }
        "functionResponse" => {
            needs("functionResponse", &["name", "response"])?;
            object_or_absent(
                &part["functionResponse"],
                "response",
                &format!("{at}.function_response"),
            )
        }
        _ => Ok(()),
    }
}

fn object_or_absent(parent: &Value, key: &str, at: &str) -> Checked {
    match parent.get(key) {
        None | Some(Value::Null) | Some(Value::Object(_)) => Ok(()),
        Some(other) => invalid(&format!(
            "Invalid value at '{at}.{key}' (type.googleapis.com/google.protobuf.Struct), {other}"
        )),
    }
}

fn tools(tools: &Value) -> Checked {
    let Some(tools) = tools.as_array() else {
        return invalid("Invalid value at 'tools': expected a list of Tool");
    };
    for (i, tool) in tools.iter().enumerate() {
        let at = format!("tools[{i}]");
        let tool = tool
            .as_object()
            .ok_or_else(|| Rejection::Invalid(format!("Invalid value at '{at}'")))?;
        known_fields(tool, TOOL_FIELDS, &at)?;
        let declarations = tool.get("functionDeclarations").and_then(Value::as_array);
        for (j, declaration) in declarations.into_iter().flatten().enumerate() {
            let at = format!("{at}.function_declarations[{j}]");
            let declaration = declaration
                .as_object()
                .ok_or_else(|| Rejection::Invalid(format!("Invalid value at '{at}'")))?;
            known_fields(declaration, DECLARATION_FIELDS, &at)?;
            let name = declaration.get("name").and_then(Value::as_str).unwrap_or("");
            if !valid_function_name(name) {
                return invalid(&format!(
                    "* GenerateContentRequest.{at}.name: Invalid function name. Must start with a letter or an underscore. Must be alphameric (a-z, A-Z, 0-9), underscores (_), dots (.), colons (:) or dashes (-), with a maximum length of 64.\n"
                ));
            }
            if declaration.contains_key("parameters") && declaration.contains_key("parametersJsonSchema") {
                return invalid(&format!(
                    "* GenerateContentRequest.{at}: parameters and parameters_json_schema cannot both be set\n"
                ));
            }
            if let Some(parameters) = declaration.get("parameters") {
                schema(parameters, &format!("{at}.parameters"))?;
                let is_object = parameters
                    .get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|t| t.eq_ignore_ascii_case("object"));
                let empty = parameters
                    .get("properties")
                    .and_then(Value::as_object)
                    .is_none_or(Map::is_empty);
                if is_object && empty {
                    return invalid(&format!(
                        "* GenerateContentRequest.{at}.parameters.properties: should be non-empty for OBJECT type\n"
                    ));
                }
            }
        }
    }
    Ok(())
}

fn valid_function_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    name.len() <= 64
        && bytes.next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'))
}

fn tool_config(config: &Value) -> Checked {
    let Some(calling) = config.get("functionCallingConfig") else {
        return Ok(());
    };
    let mode = calling
        .get("mode")
        .and_then(Value::as_str)
        .unwrap_or("MODE_UNSPECIFIED");
    if !MODES.contains(&mode) {
        return invalid(&format!(
            "Invalid value at 'tool_config.function_calling_config.mode' (type.googleapis.com/google.ai.generativelanguage.v1beta.FunctionCallingConfig.Mode), \"{mode}\""
        ));
    }
    let names = calling.get("allowedFunctionNames").and_then(Value::as_array);
    if names.is_some_and(|n| !n.is_empty()) && !matches!(mode, "ANY" | "VALIDATED") {
        return invalid(
            "* GenerateContentRequest.tool_config.function_calling_config.allowed_function_names: allowed_function_names is only allowed when mode is ANY or VALIDATED.\n",
        );
    }
    Ok(())
}

fn generation_config(config: &Value) -> Checked {
    let Some(config) = config.as_object() else {
        return invalid("Invalid value at 'generation_config': expected a GenerationConfig");
    };
    known_fields(config, GENERATION_FIELDS, "generation_config")?;
    let number = |key: &str| config.get(key).and_then(Value::as_f64);
    if number("temperature").is_some_and(|t| !(0.0..=2.0).contains(&t)) {
        return invalid(
            "* GenerateContentRequest.generation_config.temperature: temperature must be between 0 and 2\n",
        );
    }
    if number("topP").is_some_and(|p| !(0.0..=1.0).contains(&p)) {
        return invalid("* GenerateContentRequest.generation_config.top_p: top_p must be between 0 and 1\n");
    }
    if number("maxOutputTokens").is_some_and(|n| n < 1.0 || n.fract() != 0.0) {
        return invalid(
            "* GenerateContentRequest.generation_config.max_output_tokens: max_output_tokens must be positive\n",
        );
    }
    if number("candidateCount").is_some_and(|n| n > 1.0) {
        return invalid("mock: candidateCount above 1 is not supported");
    }
    if config
        .get("stopSequences")
        .and_then(Value::as_array)
        .is_some_and(|s| s.len() > 5)
    {
        return invalid("* GenerateContentRequest.generation_config.stop_sequences: Only 5 stop sequences allowed\n");
    }
    let mime = config.get("responseMimeType").and_then(Value::as_str);
    if let Some(mime) = mime.filter(|m| !MIME_TYPES.contains(m)) {
        return invalid(&format!(
            "* GenerateContentRequest.generation_config.response_mime_type: allowed mimetypes are `text/plain`, `application/json`, `application/xml`, `application/yaml` and `text/x.enum`. Got: {mime}\n"
        ));
    }
    let schema_set = config.contains_key("responseSchema") || config.contains_key("responseJsonSchema");
    if config.contains_key("responseSchema") && config.contains_key("responseJsonSchema") {
        return invalid(
            "* GenerateContentRequest.generation_config: response_schema and response_json_schema cannot both be set\n",
        );
    }
    if schema_set && !matches!(mime, Some("application/json" | "text/x.enum")) {
        return invalid(
            "* GenerateContentRequest.generation_config.response_mime_type: response_mime_type must be application/json or text/x.enum when a response schema is set\n",
        );
    }
    if let Some(schema) = config.get("responseSchema") {
        self::schema(schema, "generation_config.response_schema")?;
    }
    Ok(())
}

/// A `Schema`: only its own fields, and a known `type`.
fn schema(schema: &Value, at: &str) -> Checked {
    let Some(schema) = schema.as_object() else {
        return invalid(&format!("Invalid value at '{at}': expected a Schema"));
    };
    known_fields(schema, SCHEMA_FIELDS, at)?;
    match schema.get("type") {
        None => {}
        Some(Value::String(t)) if TYPES.contains(&t.to_ascii_uppercase().as_str()) => {}
        Some(other) => {
            return invalid(&format!(
                "Invalid value at '{at}.type' (type.googleapis.com/google.ai.generativelanguage.v1beta.Type), {other}"
            ));
        }
    }
    for (name, property) in schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
    {
        self::schema(property, &format!("{at}.properties[{name}].value"))?;
    }
    if let Some(items) = schema.get("items") {
        self::schema(items, &format!("{at}.items"))?;
    }
    for (i, branch) in schema
        .get("anyOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        self::schema(branch, &format!("{at}.any_of[{i}]"))?;
    }
    Ok(())
}

fn known_fields(object: &Map<String, Value>, known: &[&str], at: &str) -> Checked {
    match object.keys().find(|k| !known.contains(&k.as_str())) {
        Some(key) => unknown(key, at),
        None => Ok(()),
    }
}

fn unknown(key: &str, at: &str) -> Checked {
    let message = if at.is_empty() {
        format!("Invalid JSON payload received. Unknown name \"{key}\": Cannot find field.")
    } else {
        format!("Invalid JSON payload received. Unknown name \"{key}\" at '{at}': Cannot find field.")
    };
    Err(Rejection::UnknownField(message))
}

fn invalid(message: &str) -> Checked {
    Err(Rejection::Invalid(message.to_owned()))
}

/// `inlineData` → `inline_data`, for error locations.
fn snake(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}
