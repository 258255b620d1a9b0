//! Tests of the modern wire helpers: era classification, the envelope and header checks,
//! and results completed for a modern harness.

use super::*;
use serde_json::json;

fn msg(text: &str) -> Message {
    Message::parse(text.to_string()).unwrap()
}

fn modern(method: &str, params: &str) -> Message {
    msg(&format!(
        r#"{{"jsonrpc":"2.0","id":7,"method":"{method}","params":{params}}}"#
    ))
}

const META: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

#[test]
fn a_claim_in_meta_or_a_modern_header_makes_a_request_modern() {
    let claimed = modern("tools/list", &format!(r#"{{"_meta":{META}}}"#));
    assert_eq!(classify(&claimed, None), Era::Modern);
    let bare = modern("tools/list", "{}");
    assert_eq!(classify(&bare, None), Era::Legacy);
    assert_eq!(classify(&bare, Some("2025-11-25")), Era::Legacy);
    assert_eq!(classify(&bare, Some("2026-07-28")), Era::Modern);
    assert_eq!(classify(&bare, Some("1900-01-01")), Era::Legacy);
    let init = modern("initialize", r#"{"protocolVersion":"2025-11-25"}"#);
    assert_eq!(classify(&init, None), Era::Legacy);
}

#[test]
fn the_envelope_is_checked_in_the_spec_order() {
    let ok = envelope(&modern("tools/list", &format!(r#"{{"_meta":{META}}}"#))).unwrap();
    assert_eq!(ok.version, "2026-07-28");
    assert_eq!(ok.log_level, None);
    let missing = envelope(&modern("tools/list", "{}")).unwrap_err();
    assert_eq!((missing.code, missing.status), (-32602, 400));
    let no_caps = envelope(&modern(
        "tools/list",
        r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#,
    ))
    .unwrap_err();
    assert_eq!(no_caps.code, -32602);
    assert!(no_caps.message.contains("clientCapabilities"));
    let old = envelope(&modern(
        "tools/list",
        r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"1900-01-01","io.modelcontextprotocol/clientCapabilities":{}}}"#,
    ))
    .unwrap_err();
    assert_eq!(old.code, -32022);
    let data: Value = serde_json::from_str(old.data.as_deref().unwrap()).unwrap();
    assert_eq!(
        data,
        json!({"supported": ["2026-07-28"], "requested": "1900-01-01"})
    );
    let answer: Value = serde_json::from_str(&old.answer("7")).unwrap();
    assert_eq!(answer["id"], 7);
    assert_eq!(answer["error"]["data"]["requested"], "1900-01-01");
    let loud = envelope(&modern(
        "tools/list",
        r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"loud"}}"#,
    ))
    .unwrap_err();
    assert_eq!(loud.code, -32602);
}

#[test]
fn headers_must_match_the_body() {
    let call = modern(
        "tools/call",
        &format!(r#"{{"name":"échō","_meta":{META}}}"#),
    );
    let good = Headers {
        version: Some("2026-07-28"),
        method: Some("tools/call"),
        name: Some("=?base64?w6ljaMWN?="),
    };
    assert_eq!(check_headers(&call, good), Ok(()));
    for bad in [
        Headers {
            version: None,
            ..good
        },
        Headers {
            version: Some("2025-11-25"),
            ..good
        },
        Headers {
            method: Some("tools/list"),
            ..good
        },
        Headers { name: None, ..good },
        Headers {
            name: Some("other"),
            ..good
        },
    ] {
        let problem = check_headers(&call, bad).unwrap_err();
        assert_eq!((problem.code, problem.status), (-32020, 400), "{bad:?}");
    }
    let list = modern("tools/list", &format!(r#"{{"_meta":{META}}}"#));
    let plain = Headers {
        name: None,
        method: Some("tools/list"),
        ..good
    };
    assert_eq!(check_headers(&list, plain), Ok(()));
}

#[test]
fn removed_methods_and_input_methods_are_named() {
    assert!(removed("initialize") && removed("ping") && removed("logging/setLevel"));
    assert!(!removed("tools/call"));
    assert_eq!(not_found("ping").status, 404);
    assert!(may_need_input("resources/read") && !may_need_input("tools/list"));
    assert!(cacheable("server/discover") && !cacheable("tools/call"));
    let missing = missing_capability(&json!({"elicitation": {}}), "needs elicitation");
    assert_eq!(missing.code, -32021);
    assert!(missing.data.unwrap().contains("requiredCapabilities"));
}

#[test]
fn cache_hints_merge_to_the_strictest() {
    let public = CacheHint {
        ttl_ms: 60_000,
        private: false,
    };
    let merged = public.merge(CacheHint {
        ttl_ms: 5_000,
        private: false,
    });
    assert_eq!(
        merged,
        CacheHint {
            ttl_ms: 5_000,
            private: false
        }
    );
    assert_eq!(public.merge(CacheHint::LEGACY), CacheHint::LEGACY);
    assert_eq!(
        CacheHint::of(&json!({"ttlMs": -3, "cacheScope": "public"})),
        Some(CacheHint {
            ttl_ms: 0,
            private: false
        })
    );
    assert_eq!(CacheHint::of(&json!({})), None);
}

#[test]
fn legacy_results_are_completed_and_modern_members_kept() {
    let info = r#"{"name":"s","version":"1"}"#;
    let with = Completion {
        hint: Some(CacheHint::LEGACY),
        server_info: Some(info),
    };
    let done = complete(
        r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#.into(),
        with,
    );
    let v: Value = serde_json::from_str(&done).unwrap();
    assert_eq!(v["result"]["resultType"], "complete");
    assert_eq!(v["result"]["ttlMs"], 0);
    assert_eq!(v["result"]["cacheScope"], "private");
    assert_eq!(v["result"]["_meta"][meta::SERVER_INFO]["name"], "s");
    assert_eq!(v["result"]["tools"], json!([]));
    let empty = complete(
        r#"{"jsonrpc":"2.0","id":1,"result":{}}"#.into(),
        Completion {
            hint: None,
            server_info: None,
        },
    );
    assert_eq!(
        empty,
        r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete"}}"#
    );
    let kept = r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","ttlMs":50,"cacheScope":"public","_meta":{"x":1},"tools":[]}}"#;
    let v: Value = serde_json::from_str(&complete(kept.into(), with)).unwrap();
    assert_eq!(v["result"]["ttlMs"], 50);
    assert_eq!(v["result"]["cacheScope"], "public");
    assert_eq!(v["result"]["_meta"]["x"], 1);
    assert_eq!(v["result"]["_meta"][meta::SERVER_INFO]["version"], "1");
    let missing =
        r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32002,"message":"no","data":{"uri":"u"}}}"#;
    let v: Value = serde_json::from_str(&complete(missing.into(), with)).unwrap();
    assert_eq!(v["error"]["code"], -32602);
    assert_eq!(v["error"]["data"]["uri"], "u");
}

/// [`complete_message`] on text, as the front reads it.
fn complete(text: String, completion: Completion<'_>) -> String {
    complete_message(Message::parse(text).expect("an answer"), completion)
}
