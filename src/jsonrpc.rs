//! JSON-RPC 2.0 framing for AHP: classify one inbound text frame, encode outbound frames.
//! Pure functions; every malformed input maps to the error the spec names, never a panic.

use serde::Serialize;
use serde_json::{Map, Value};
use tokio_tungstenite::tungstenite::Utf8Bytes;

pub use ahp_types::errors::ahp_error_codes as ahp_codes;
pub use ahp_types::errors::json_rpc_error_codes as codes;

/// One serialized JSON-RPC message, ready to send as a WebSocket text frame (cheap to clone).
pub type Frame = Utf8Bytes;

/// An error answer: code, human message, optional structured `data`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RpcError {
    /// JSON-RPC or AHP error code.
    pub code: i32,
    /// What went wrong, for a person.
    pub message: String,
    /// Structured detail (e.g. `supportedVersions`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    /// An error without `data`.
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// `-32602 Invalid params`.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(codes::INVALID_PARAMS, message)
    }

    /// `-32601 Method not found`.
    pub fn method_not_found(message: impl Into<String>) -> Self {
        Self::new(codes::METHOD_NOT_FOUND, message)
    }
}

/// An inbound frame that is a well-formed JSON-RPC message.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request: must be answered with the same `id`.
    Request {
        /// Integer request id.
        id: u64,
        /// Method name.
        method: String,
        /// `params` object, or `Value::Null` when absent.
        params: Value,
    },
    /// A notification: never answered.
    Notification {
        /// Method name.
        method: String,
        /// `params` object, or `Value::Null` when absent.
        params: Value,
    },
    /// A response to a host→client request.
    Response {
        /// The id it answers.
        id: Value,
    },
}

/// A frame that could not be accepted, with the error to send back and the id to send it under
/// (`null` when the id could not be read).
#[derive(Debug, Clone, PartialEq)]
pub struct Malformed {
    /// The id to answer with.
    pub id: Value,
    /// Why the frame was refused.
    pub error: RpcError,
}

/// Classify one text frame.
pub fn decode(text: &str) -> Result<Incoming, Malformed> {
    let value: Value = serde_json::from_str(text).map_err(|e| Malformed {
        id: Value::Null,
        error: RpcError::new(codes::PARSE_ERROR, format!("parse error: {e}")),
    })?;
    let object = match value {
        Value::Object(object) => object,
        Value::Array(_) => {
            return Err(invalid_request(
                Value::Null,
                "batches are not supported: send one JSON-RPC message per frame",
            ))
        }
        _ => {
            return Err(invalid_request(
                Value::Null,
                "a JSON-RPC message must be an object",
            ))
        }
    };
    classify(object)
}

fn invalid_request(id: Value, message: &str) -> Malformed {
    Malformed {
        id,
        error: RpcError::new(codes::INVALID_REQUEST, message),
    }
}

fn classify(mut object: Map<String, Value>) -> Result<Incoming, Malformed> {
    let raw_id = object.remove("id");
    let echo_id = raw_id.clone().unwrap_or(Value::Null);
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(invalid_request(echo_id, "\"jsonrpc\" must be \"2.0\""));
    }
    let params = match object.remove("params") {
        None => Value::Null,
        Some(params @ Value::Object(_)) => params,
        Some(_) => {
            return Err(Malformed {
                id: echo_id,
                error: RpcError::invalid_params("params must be an object"),
            })
        }
    };
    match object.remove("method") {
        Some(Value::String(method)) => match raw_id {
            None => Ok(Incoming::Notification { method, params }),
            Some(id) => match id.as_u64() {
                Some(id) => Ok(Incoming::Request { id, method, params }),
                None => Err(invalid_request(
                    echo_id,
                    "\"id\" must be a non-negative integer",
                )),
            },
        },
        Some(_) => Err(invalid_request(echo_id, "\"method\" must be a string")),
        None if raw_id.is_some()
            && (object.contains_key("result") || object.contains_key("error")) =>
        {
            Ok(Incoming::Response { id: echo_id })
        }
        None => Err(invalid_request(echo_id, "missing \"method\"")),
    }
}

#[derive(Serialize)]
struct Success<'a, T: Serialize> {
    jsonrpc: &'static str,
    id: u64,
    result: &'a T,
}

#[derive(Serialize)]
struct Failure<'a> {
    jsonrpc: &'static str,
    id: &'a Value,
    error: &'a RpcError,
}

#[derive(Serialize)]
struct Notification<'a, T: Serialize> {
    jsonrpc: &'static str,
    method: &'a str,
    params: &'a T,
}

fn to_frame(value: &impl Serialize) -> Frame {
    // Serializing our own typed values cannot fail (no non-string map keys, no custom errors);
    // should it ever, the peer gets an internal error rather than a broken frame.
    match serde_json::to_string(value) {
        Ok(text) => Frame::from(text),
        Err(e) => Frame::from(format!(
            r#"{{"jsonrpc":"2.0","id":null,"error":{{"code":-32603,"message":"cannot encode reply: {}"}}}}"#,
            e.to_string().replace('"', "'")
        )),
    }
}

/// `{"jsonrpc":"2.0","id":id,"result":result}`; `()` encodes as `"result": null`.
pub fn success(id: u64, result: &impl Serialize) -> Frame {
    to_frame(&Success {
        jsonrpc: "2.0",
        id,
        result,
    })
}

/// `{"jsonrpc":"2.0","id":id,"error":{…}}`.
pub fn failure(id: &Value, error: &RpcError) -> Frame {
    to_frame(&Failure {
        jsonrpc: "2.0",
        id,
        error,
    })
}

/// `{"jsonrpc":"2.0","method":method,"params":params}`.
pub fn notification(method: &str, params: &impl Serialize) -> Frame {
    to_frame(&Notification {
        jsonrpc: "2.0",
        method,
        params,
    })
}

/// [`notification`] whose `params` are already JSON text (`params` must be one JSON value).
pub fn notification_encoded(method: &str, params: &str) -> Frame {
    let method = serde_json::to_string(method).unwrap_or_else(|_| "\"\"".into());
    let mut text = String::with_capacity(40 + method.len() + params.len());
    text.push_str(r#"{"jsonrpc":"2.0","method":"#);
    text.push_str(&method);
    text.push_str(r#","params":"#);
    text.push_str(params);
    text.push('}');
    Frame::from(text)
}

/// How many bytes `value` takes as JSON, without building the text.
pub fn encoded_len(value: &impl Serialize) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Writing to a counter cannot fail; a value that cannot be encoded counts what it got.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn encoded_len_is_the_length_of_the_text() {
        let value = json!({"title": "déjà vu", "n": [1, 2, 3], "nested": {"a": null}});
        assert_eq!(encoded_len(&value), value.to_string().len());
    }

    #[test]
    fn a_notification_of_encoded_params_is_the_same_text() {
        let params = json!({"channel": "ahp-proxy:/x", "serverSeq": 7, "action": {"type": "t\"q"}});
        for method in ["action", "a \"quoted\" method"] {
            assert_eq!(
                notification_encoded(method, &params.to_string()),
                notification(method, &params)
            );
        }
    }

    fn code(text: &str) -> (Value, i32) {
        let malformed = decode(text).expect_err("should be refused");
        (malformed.id, malformed.error.code)
    }

    #[test]
    fn requests_notifications_and_responses_are_told_apart() {
        assert_eq!(
            decode(
                r#"{"jsonrpc":"2.0","id":3,"method":"ping","params":{"channel":"ahp-root://"}}"#
            ),
            Ok(Incoming::Request {
                id: 3,
                method: "ping".into(),
                params: json!({"channel":"ahp-root://"})
            })
        );
        assert_eq!(
            decode(r#"{"jsonrpc":"2.0","method":"unsubscribe"}"#),
            Ok(Incoming::Notification {
                method: "unsubscribe".into(),
                params: Value::Null
            })
        );
        assert_eq!(
            decode(r#"{"jsonrpc":"2.0","id":1,"result":null}"#),
            Ok(Incoming::Response { id: json!(1) })
        );
    }

    #[test]
    fn malformed_frames_get_the_spec_codes() {
        assert_eq!(code("{not json"), (Value::Null, codes::PARSE_ERROR));
        assert_eq!(code("[]"), (Value::Null, codes::INVALID_REQUEST));
        assert_eq!(code("42"), (Value::Null, codes::INVALID_REQUEST));
        assert_eq!(
            code(r#"{"id":1,"method":"ping"}"#),
            (json!(1), codes::INVALID_REQUEST)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#),
            (json!("a"), codes::INVALID_REQUEST)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":-1,"method":"ping"}"#),
            (json!(-1), codes::INVALID_REQUEST)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#),
            (json!(1.5), codes::INVALID_REQUEST)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":2,"method":7}"#),
            (json!(2), codes::INVALID_REQUEST)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0","id":2,"method":"ping","params":[1]}"#),
            (json!(2), codes::INVALID_PARAMS)
        );
        assert_eq!(
            code(r#"{"jsonrpc":"2.0"}"#),
            (Value::Null, codes::INVALID_REQUEST)
        );
    }

    #[test]
    fn deeply_nested_json_is_an_error_not_a_stack_overflow() {
        let text = "[".repeat(100_000);
        assert_eq!(code(&text).1, codes::PARSE_ERROR);
    }

    #[test]
    fn null_results_encode_as_null() {
        assert_eq!(
            success(9, &()).as_str(),
            r#"{"jsonrpc":"2.0","id":9,"result":null}"#
        );
    }

    #[test]
    fn errors_carry_data_only_when_present() {
        let frame = failure(&json!(1), &RpcError::method_not_found("nope"));
        assert_eq!(
            frame.as_str(),
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"nope"}}"#
        );
    }
}
