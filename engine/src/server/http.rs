//! HTTP plumbing every endpoint shares: JSON bodies parsed naming the field at fault, and OpenAI-style error responses.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

/// An OpenAI-style error response.
pub(super) fn error(
    status: StatusCode,
    kind: &str,
    param: Option<&str>,
    message: impl Into<String>,
) -> Response {
    let body = json!({"error": {
        "message": message.into(), "type": kind, "param": param, "code": Value::Null,
    }});
    (status, axum::Json(body)).into_response()
}

/// A `400 invalid_request_error`, naming the field at fault (`param`) when there is one.
pub(super) fn bad_request(param: Option<&str>, message: impl Into<String>) -> Response {
    error(
        StatusCode::BAD_REQUEST,
        "invalid_request_error",
        param,
        message,
    )
}

/// A `503 unavailable_error` (the model is loading or failed to load, or the server is
/// shutting down).
pub(super) fn unavailable(message: &str) -> Response {
    error(
        StatusCode::SERVICE_UNAVAILABLE,
        "unavailable_error",
        None,
        message,
    )
}

/// Parse a JSON body, naming the field at fault.
pub(super) fn parse<T: for<'de> Deserialize<'de>>(
    body: Result<Bytes, BytesRejection>,
) -> Result<T, Response> {
    let body = body.map_err(|r| {
        let status = r.status();
        let kind = if status == StatusCode::PAYLOAD_TOO_LARGE {
            "request_too_large"
        } else {
            "invalid_request_error"
        };
        error(status, kind, None, r.body_text())
    })?;
    let de = &mut serde_json::Deserializer::from_slice(&body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        match body_fault(&path, &inner) {
            Some(field) => bad_request(Some(&field), format!("field `{field}`: {inner}")),
            None => bad_request(None, format!("invalid JSON body: {inner}")),
        }
    })
}

/// The field a body's parse error is about, as a JSON path (`max_tokens`,
/// `messages[0].role`), or `None` when no field is at fault (the body is not JSON).
///
/// `serde_path_to_error` gives the path of the value being read: `.` for the top-level
/// object (a missing field is reported there, named only in serde's message "missing field
/// `model`"), `?` where the text is not JSON at all (the parser lost its place).
fn body_fault(path: &str, inner: &serde_json::Error) -> Option<String> {
    if inner.is_syntax() || inner.is_eof() || path.ends_with('?') {
        return None;
    }
    let missing = inner
        .to_string()
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split_once('`').map(|(f, _)| f.to_string()));
    match (path, missing) {
        (".", Some(field)) => Some(field),
        (".", None) => None,
        (p, Some(field)) => Some(format!("{p}.{field}")),
        (p, None) => Some(p.to_string()),
    }
}
