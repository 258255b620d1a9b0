//! The `conformance` example server: the MCP conformance suite's reference fixture (the
//! tools, resources and prompts its server scenarios call by name), on the raw server core.
//!
//! Written from the suite's scenario descriptions (and the behaviour of its TypeScript
//! fixture, read as a specification): `scripts/conformance.sh fixture` runs the suite on it.
//! Every message related to a request rides that request's stream, before the reply.

use std::time::Duration;

use serde_json::{json, Value};

use crate::raw::{Call, Handler, Reply};

/// A 1×1 red PNG.
const IMAGE: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A minimal WAV file.
const AUDIO: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";
/// The pause between the log and progress messages of one call (the suite wants them spread).
const STEP: Duration = Duration::from_millis(50);
/// The protocol versions answered as asked; anything else gets the newest.
const VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// One session of the fixture (it keeps no state between requests).
#[derive(Default)]
pub struct Conformance;

impl Handler for Conformance {
    async fn request(&self, call: Call) -> Reply {
        let params = call.params();
        match call.method.as_str() {
            "initialize" => result(initialize(&params)),
            "ping" | "resources/subscribe" | "resources/unsubscribe" => result(json!({})),
            "logging/setLevel" => {
                let level = params["level"].as_str().unwrap_or("info").to_string();
                call.send(log("info", json!(format!("Log level set to: {level}"))));
                result(json!({}))
            }
            "completion/complete" => {
                result(json!({"completion": {"values": [], "total": 0, "hasMore": false}}))
            }
            "tools/list" => result(json!({ "tools": tools() })),
            "tools/call" => call_tool(&call, &params).await,
            "resources/list" => result(json!({ "resources": resources() })),
            "resources/templates/list" => result(json!({"resourceTemplates": [{
                "uriTemplate": "test://template/{id}/data", "name": "template",
                "title": "Resource Template", "mimeType": "application/json",
                "description": "A resource template with parameter substitution",
            }]})),
            "resources/read" => read(params["uri"].as_str().unwrap_or_default()),
            "prompts/list" => result(json!({ "prompts": prompts() })),
            "prompts/get" => get_prompt(&params),
            method => Reply::Error(-32601, format!("Method not found: {method}")),
        }
    }
}

fn result(value: Value) -> Reply {
    Reply::Result(value.to_string())
}

fn text(text: impl Into<String>) -> Reply {
    let text: String = text.into();
    result(json!({"content": [{"type": "text", "text": text}]}))
}

fn notification(method: &str, params: Value) -> String {
    json!({"jsonrpc": "2.0", "method": method, "params": params}).to_string()
}

fn log(level: &str, data: Value) -> String {
    let params = json!({"level": level, "logger": "conformance-test-server", "data": data});
    notification("notifications/message", params)
}

fn initialize(params: &Value) -> Value {
    let asked = params["protocolVersion"].as_str().unwrap_or_default();
    let version = VERSIONS
        .into_iter()
        .find(|v| *v == asked)
        .unwrap_or("2025-11-25");
    json!({
        "protocolVersion": version,
        "capabilities": {
            "tools": {"listChanged": true},
            "resources": {"subscribe": true, "listChanged": true},
            "prompts": {"listChanged": true},
            "logging": {},
            "completions": {},
        },
        "serverInfo": {"name": "ahp-proxy-example-conformance", "version": env!("CARGO_PKG_VERSION")},
    })
}

fn no_arguments() -> Value {
    json!({"type": "object", "properties": {}})
}

fn tools() -> Vec<Value> {
    let plain = |name: &str, description: &str| json!({"name": name, "description": description, "inputSchema": no_arguments()});
    let one_string = |name: &str, description: &str, argument: &str, about: &str| {
        json!({"name": name, "description": description, "inputSchema": {
            "type": "object", "properties": {argument: {"type": "string", "description": about}},
            "required": [argument],
        }})
    };
    vec![
        plain("test_simple_text", "Tests simple text content response"),
        plain("test_image_content", "Tests image content response"),
        plain("test_audio_content", "Tests audio content response"),
        plain(
            "test_embedded_resource",
            "Tests embedded resource content response",
        ),
        plain(
            "test_multiple_content_types",
            "Tests response with multiple content types (text, image, resource)",
        ),
        plain(
            "test_tool_with_logging",
            "Tests tool that emits log messages during execution",
        ),
        plain(
            "test_tool_with_progress",
            "Tests tool that reports progress notifications",
        ),
        plain("test_error_handling", "Tests error response handling"),
        plain(
            "test_reconnection",
            "Tests SSE stream disconnection and client reconnection (SEP-1699): the server \
             closes the stream mid-call and sends the result after the client reconnects",
        ),
        one_string(
            "test_sampling",
            "Tests server-initiated sampling (LLM completion request)",
            "prompt",
            "The prompt to send to the LLM",
        ),
        one_string(
            "test_elicitation",
            "Tests server-initiated elicitation (user input request)",
            "message",
            "The message to show the user",
        ),
        plain(
            "test_elicitation_sep1034_defaults",
            "Tests elicitation with default values per SEP-1034",
        ),
        plain(
            "test_elicitation_sep1330_enums",
            "Tests elicitation with enum schema improvements per SEP-1330",
        ),
        json!({
            "name": "json_schema_2020_12_tool",
            "description": "Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)",
            "inputSchema": json_schema_2020_12(),
        }),
    ]
}

/// A schema that uses the 2020-12 vocabulary a proxy must keep (`$schema`, `$defs`, `$ref`,
/// `$anchor`, composition, conditionals, `additionalProperties`).
fn json_schema_2020_12() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }},
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"},
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false,
    })
}

async fn call_tool(call: &Call, params: &Value) -> Reply {
    let arguments = &params["arguments"];
    match params["name"].as_str().unwrap_or_default() {
        "test_simple_text" => text("This is a simple text response for testing."),
        "test_image_content" => result(json!({"content": [
            {"type": "image", "data": IMAGE, "mimeType": "image/png"},
        ]})),
        "test_audio_content" => result(json!({"content": [
            {"type": "audio", "data": AUDIO, "mimeType": "audio/wav"},
        ]})),
        "test_embedded_resource" => result(json!({"content": [{"type": "resource", "resource": {
            "uri": "test://embedded-resource", "mimeType": "text/plain",
            "text": "This is an embedded resource content.",
        }}]})),
        "test_multiple_content_types" => result(json!({"content": [
            {"type": "text", "text": "Multiple content types test:"},
            {"type": "image", "data": IMAGE, "mimeType": "image/png"},
            {"type": "resource", "resource": {
                "uri": "test://mixed-content-resource", "mimeType": "application/json",
                "text": json!({"test": "data", "value": 123}).to_string(),
            }},
        ]})),
        "test_tool_with_logging" => {
            let steps = [
                "Tool execution started",
                "Tool processing data",
                "Tool execution completed",
            ];
            for (i, step) in steps.into_iter().enumerate() {
                if i > 0 {
                    tokio::time::sleep(STEP).await;
                }
                call.send(log("info", json!(step)));
            }
            text("Tool with logging executed successfully")
        }
        "test_tool_with_progress" => progress(call).await,
        "test_error_handling" => result(json!({
            "content": [{"type": "text", "text": "This tool intentionally returns an error for testing"}],
            "isError": true,
        })),
        "test_reconnection" => {
            call.close_stream();
            tokio::time::sleep(Duration::from_millis(100)).await;
            text("Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure.")
        }
        "test_sampling" => sampling(call, arguments["prompt"].as_str().unwrap_or_default()).await,
        "test_elicitation" => {
            let message = arguments["message"].as_str().unwrap_or_default();
            let schema = json!({
                "type": "object",
                "properties": {"response": {"type": "string", "description": "User's response"}},
                "required": ["response"],
            });
            elicit(call, message, schema, "User response").await
        }
        "test_elicitation_sep1034_defaults" => {
            let message = "Please review and update the form fields with defaults";
            let schema = json!({"type": "object", "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {"type": "number", "description": "User score", "default": 95.5},
                "status": {"type": "string", "description": "User status",
                           "enum": ["active", "inactive", "pending"], "default": "active"},
                "verified": {"type": "boolean", "description": "Verification status", "default": true},
            }, "required": []});
            elicit(call, message, schema, "Elicitation completed").await
        }
        "test_elicitation_sep1330_enums" => {
            let message = "Please select options from the enum fields";
            elicit(call, message, enum_schema(), "Elicitation completed").await
        }
        "json_schema_2020_12_tool" => {
            let arguments = if arguments.is_null() {
                json!({})
            } else {
                arguments.clone()
            };
            text(format!("JSON Schema 2020-12 tool called with: {arguments}"))
        }
        name => Reply::Error(-32602, format!("Unknown tool: {name}")),
    }
}

/// Progress 0, 50 and 100 of 100 for the request's token, then the token as text.
async fn progress(call: &Call) -> Reply {
    let token = call
        .param_raw(&["_meta", "progressToken"])
        .and_then(|raw| serde_json::from_str::<Value>(&raw).ok())
        .unwrap_or(json!(0));
    for (i, step) in [0, 50, 100].into_iter().enumerate() {
        if i > 0 {
            tokio::time::sleep(STEP).await;
        }
        call.send(notification(
            "notifications/progress",
            json!({"progressToken": token, "progress": step, "total": 100,
                   "message": format!("Completed step {step} of 100")}),
        ));
    }
    match token {
        Value::String(token) => text(token),
        token => text(token.to_string()),
    }
}

/// Send a request to the client; its `result`, or the error's message.
async fn ask(call: &Call, method: &str, params: Value) -> Result<Value, String> {
    let response = call
        .ask(|id| format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{params}}}"#))
        .await
        .ok_or("the session ended")?;
    let response: Value = serde_json::from_str(&response).map_err(|e| e.to_string())?;
    match response.get("result") {
        Some(result) => Ok(result.clone()),
        None => Err(response["error"]["message"]
            .as_str()
            .unwrap_or("an error without a message")
            .to_string()),
    }
}

async fn sampling(call: &Call, prompt: &str) -> Reply {
    let params = json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
        "maxTokens": 100,
    });
    match ask(call, "sampling/createMessage", params).await {
        Ok(result) => {
            let answer = (result["content"]["text"].as_str())
                .or(result["message"]["content"]["text"].as_str())
                .unwrap_or("No response");
            text(format!("LLM response: {answer}"))
        }
        Err(error) => text(format!("Sampling not supported or error: {error}")),
    }
}

async fn elicit(call: &Call, message: &str, schema: Value, label: &str) -> Reply {
    let params = json!({"message": message, "requestedSchema": schema});
    match ask(call, "elicitation/create", params).await {
        Ok(result) => {
            let action = result["action"].as_str().unwrap_or_default();
            let content = match &result["content"] {
                Value::Null => json!({}),
                content => content.clone(),
            };
            text(format!("{label}: action={action}, content={content}"))
        }
        Err(error) => text(format!("Elicitation not supported or error: {error}")),
    }
}

/// The five enum shapes of SEP-1330: untitled and titled single select, the legacy
/// `enumNames`, untitled and titled multi select.
fn enum_schema() -> Value {
    let titled = |labels: [&str; 3]| {
        let values = ["value1", "value2", "value3"];
        (values.iter().zip(labels))
            .map(|(value, title)| json!({"const": value, "title": title}))
            .collect::<Vec<_>>()
    };
    json!({"type": "object", "properties": {
        "untitledSingle": {"type": "string", "description": "Select one option",
                           "enum": ["option1", "option2", "option3"]},
        "titledSingle": {"type": "string", "description": "Select one option with titles",
                         "oneOf": titled(["First Option", "Second Option", "Third Option"])},
        "legacyEnum": {"type": "string", "description": "Select one option (legacy)",
                       "enum": ["opt1", "opt2", "opt3"],
                       "enumNames": ["Option One", "Option Two", "Option Three"]},
        "untitledMulti": {"type": "array", "description": "Select multiple options",
                          "minItems": 1, "maxItems": 3,
                          "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {"type": "array", "description": "Select multiple options with titles",
                        "minItems": 1, "maxItems": 3,
                        "items": {"anyOf": titled(["First Choice", "Second Choice", "Third Choice"])}},
    }, "required": []})
}

fn resources() -> Vec<Value> {
    vec![
        json!({"uri": "test://static-text", "name": "static-text", "title": "Static Text Resource",
               "description": "A static text resource for testing", "mimeType": "text/plain"}),
        json!({"uri": "test://static-binary", "name": "static-binary", "title": "Static Binary Resource",
               "description": "A static binary resource (image) for testing", "mimeType": "image/png"}),
        json!({"uri": "test://watched-resource", "name": "watched-resource", "title": "Watched Resource",
               "description": "A resource that can be subscribed to", "mimeType": "text/plain"}),
    ]
}

fn read(uri: &str) -> Reply {
    let contents = match uri {
        "test://static-text" => json!({"uri": uri, "mimeType": "text/plain",
            "text": "This is the content of the static text resource."}),
        "test://static-binary" => json!({"uri": uri, "mimeType": "image/png", "blob": IMAGE}),
        "test://watched-resource" => json!({"uri": uri, "mimeType": "text/plain",
            "text": "Watched resource content"}),
        _ => match uri
            .strip_prefix("test://template/")
            .and_then(|rest| rest.strip_suffix("/data"))
            .filter(|id| !id.is_empty() && !id.contains('/'))
        {
            Some(id) => {
                let data =
                    json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
                json!({"uri": uri, "mimeType": "application/json", "text": data.to_string()})
            }
            None => return Reply::Error(-32002, format!("Resource not found: {uri}")),
        },
    };
    result(json!({ "contents": [contents] }))
}

fn prompts() -> Vec<Value> {
    let argument = |name: &str, description: &str| json!({"name": name, "description": description, "required": true});
    vec![
        json!({"name": "test_simple_prompt", "title": "Simple Test Prompt",
               "description": "A simple prompt without arguments"}),
        json!({"name": "test_prompt_with_arguments", "title": "Prompt With Arguments",
               "description": "A prompt with required arguments",
               "arguments": [argument("arg1", "First test argument"),
                             argument("arg2", "Second test argument")]}),
        json!({"name": "test_prompt_with_embedded_resource", "title": "Prompt With Embedded Resource",
               "description": "A prompt that includes an embedded resource",
               "arguments": [argument("resourceUri", "URI of the resource to embed")]}),
        json!({"name": "test_prompt_with_image", "title": "Prompt With Image",
               "description": "A prompt that includes image content"}),
    ]
}

fn get_prompt(params: &Value) -> Reply {
    let arguments = &params["arguments"];
    let argument = |name: &str| arguments[name].as_str().unwrap_or_default().to_string();
    let user = |content: Value| json!({"role": "user", "content": content});
    let say = |text: &str| user(json!({"type": "text", "text": text}));
    let messages = match params["name"].as_str().unwrap_or_default() {
        "test_simple_prompt" => vec![say("This is a simple prompt for testing.")],
        "test_prompt_with_arguments" => vec![say(&format!(
            "Prompt with arguments: arg1='{}', arg2='{}'",
            argument("arg1"),
            argument("arg2")
        ))],
        "test_prompt_with_embedded_resource" => vec![
            user(json!({"type": "resource", "resource": {
                "uri": argument("resourceUri"), "mimeType": "text/plain",
                "text": "Embedded resource content for testing.",
            }})),
            say("Please process the embedded resource above."),
        ],
        "test_prompt_with_image" => vec![
            user(json!({"type": "image", "data": IMAGE, "mimeType": "image/png"})),
            say("Please analyze the image above."),
        ],
        name => return Reply::Error(-32602, format!("Unknown prompt: {name}")),
    };
    result(json!({ "messages": messages }))
}
