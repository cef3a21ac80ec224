//! A `multipart/form-data` upload, read from the body the server already
//! bounded (`server.max_upload_bytes`) into the parts an adapter gets.

use axum::body::Bytes;
use tollgate_plugin_host::FormPart;
use tollgate_web::error::ApiError;

/// Most parts a form may have: an upload has a file and a dozen fields.
const MAX_PARTS: usize = 64;

/// The form's parts in order, or a 400 saying what is wrong with it.
pub async fn parse(content_type: Option<&str>, body: Bytes) -> Result<Vec<FormPart>, ApiError> {
    let malformed =
        |why: String| ApiError::invalid_request(format!("The request is not a valid multipart/form-data body: {why}"));
    let boundary = content_type
        .ok_or_else(|| malformed("no Content-Type".into()))
        .and_then(|ct| multer::parse_boundary(ct).map_err(|e| malformed(e.to_string())))?;
    let stream = futures_util::stream::once(async move { Ok::<Bytes, std::convert::Infallible>(body) });
    let mut form = multer::Multipart::new(stream, boundary);
    let mut parts = Vec::new();
    while let Some(field) = form.next_field().await.map_err(|e| malformed(e.to_string()))? {
        if parts.len() == MAX_PARTS {
            return Err(malformed(format!("more than {MAX_PARTS} parts")));
        }
        let name = field.name().unwrap_or_default().to_string();
        let filename = field.file_name().map(str::to_string);
        let content_type = field.content_type().map(|m| m.to_string());
        let data = field.bytes().await.map_err(|e| malformed(e.to_string()))?;
        parts.push(FormPart {
            name,
            filename,
            content_type,
            data: data.to_vec(),
        });
    }
    if parts.is_empty() {
        return Err(malformed("it has no parts".into()));
    }
    Ok(parts)
}
