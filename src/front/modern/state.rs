//! The `requestState` the proxy mints when a legacy server asks a modern harness for input
//! mid-call: which held call and which round it answers, when it expires, bound to the
//! request (endpoint, server, method, name and a digest of its params) by an HMAC-SHA256
//! under a key drawn once per process.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::hmac;

/// What a verified state says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Claims {
    /// The held call.
    pub call: u64,
    /// The round of input it answers.
    pub round: u32,
}

/// Why a state is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Not minted by this proxy process for this request (forged, altered, another
    /// request's, or a previous run's).
    Forged,
    /// Minted here, but past its expiry.
    Expired,
}

impl Refused {
    /// What the harness is told.
    pub fn describe(self) -> &'static str {
        match self {
            Refused::Forged => "Invalid params: requestState was not minted by this proxy for this request (forged, altered, or from another request)",
            Refused::Expired => "Invalid params: requestState expired: the held call was given up; send the request again without it",
        }
    }
}

/// The key, drawn once per process; `None` when the system had no randomness to give: no
/// state is minted then, and none verifies (a key from the clock could be guessed).
fn key() -> Option<&'static hmac::Key> {
    static KEY: OnceLock<Option<hmac::Key>> = OnceLock::new();
    KEY.get_or_init(|| {
        let rng = ring::rand::SystemRandom::new();
        hmac::Key::generate(hmac::HMAC_SHA256, &rng).ok()
    })
    .as_ref()
}

/// The members of a request's params a retry adds or changes: left out of its digest.
const RETRY_MEMBERS: [&str; 3] = ["requestState", "inputResponses", "_meta"];

/// A SHA-256 of `params` without [`RETRY_MEMBERS`], written canonically (members sorted by
/// name, no spacing), as URL-safe base64; the same for the request and its retry.
pub fn params_digest(params: Option<serde_json::Value>) -> String {
    let mut params = params.unwrap_or(serde_json::Value::Null);
    if let serde_json::Value::Object(members) = &mut params {
        for member in RETRY_MEMBERS {
            members.remove(member);
        }
    }
    let mut canonical = String::new();
    write_canonical(&params, &mut canonical);
    let digest = ring::digest::digest(&ring::digest::SHA256, canonical.as_bytes());
    URL_SAFE_NO_PAD.encode(digest.as_ref())
}

/// `value` as JSON with every object's members sorted by name.
fn write_canonical(value: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match value {
        Value::Object(members) => {
            let mut sorted: Vec<(&String, &Value)> = members.iter().collect();
            sorted.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (n, (name, member)) in sorted.into_iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::Value::String(name.clone()).to_string());
                out.push(':');
                write_canonical(member, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// A fresh call id.
pub fn next_call() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

fn signed(key: &hmac::Key, payload: &str, binding: &str) -> hmac::Tag {
    let mut context = hmac::Context::with_key(key);
    context.update(payload.as_bytes());
    context.update(b"\n");
    context.update(binding.as_bytes());
    context.sign()
}

/// The state for round `round` of held call `call`, bound to `binding` (what
/// `call::binding` says of the request), valid for `ttl`; `None` without a key.
pub fn mint(claims: Claims, binding: &str, ttl: Duration) -> Option<String> {
    let key = key()?;
    let expires = now_ms() + ttl.as_millis() as u64;
    let payload = format!("v1.{}.{}.{expires}", claims.call, claims.round);
    let tag = signed(key, &payload, binding);
    Some(format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(payload),
        URL_SAFE_NO_PAD.encode(tag.as_ref())
    ))
}

/// Verify a state the harness sent back with a request bound as `binding`.
pub fn verify(state: &str, binding: &str) -> Result<Claims, Refused> {
    let (payload, tag) = state.split_once('.').ok_or(Refused::Forged)?;
    let payload = URL_SAFE_NO_PAD
        .decode(payload)
        .map_err(|_| Refused::Forged)?;
    let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| Refused::Forged)?;
    let payload = String::from_utf8(payload).map_err(|_| Refused::Forged)?;
    let mut message = payload.clone().into_bytes();
    message.push(b'\n');
    message.extend_from_slice(binding.as_bytes());
    let key = key().ok_or(Refused::Forged)?;
    hmac::verify(key, &message, &tag).map_err(|_| Refused::Forged)?;
    let parts: Vec<&str> = payload.split('.').collect();
    let [_, call, round, expires] = parts.as_slice() else {
        return Err(Refused::Forged);
    };
    let number = |s: &str| s.parse::<u64>().map_err(|_| Refused::Forged);
    if number(expires)? <= now_ms() {
        return Err(Refused::Expired);
    }
    Ok(Claims {
        call: number(call)?,
        round: u32::try_from(number(round)?).map_err(|_| Refused::Forged)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_params_digest_ignores_what_a_retry_adds_and_member_order_but_not_arguments() {
        let digest = |text: &str| params_digest(Some(serde_json::from_str(text).unwrap()));
        let first = digest(r#"{"name":"t","arguments":{"a":1,"b":[2,{"c":3,"d":4}]}}"#);
        let retry = digest(
            r#"{"arguments":{"b":[2,{"d":4,"c":3}],"a":1},"name":"t","requestState":"s","inputResponses":{"x":{}},"_meta":{"progressToken":2}}"#,
        );
        assert_eq!(first, retry);
        assert_ne!(
            first,
            digest(r#"{"name":"t","arguments":{"a":2,"b":[2,{"c":3,"d":4}]}}"#)
        );
        assert_ne!(
            first,
            digest(r#"{"name":"u","arguments":{"a":1,"b":[2,{"c":3,"d":4}]}}"#)
        );
        assert_ne!(params_digest(None), first);
    }

    #[test]
    fn a_state_verifies_only_unaltered_for_its_own_request_before_it_expires() {
        let claims = Claims { call: 9, round: 2 };
        let state = mint(claims, "tools/call elicit", Duration::from_secs(60)).unwrap();
        assert_eq!(verify(&state, "tools/call elicit"), Ok(claims));
        assert_eq!(verify(&state, "tools/call other"), Err(Refused::Forged));
        let (payload, tag) = state.split_once('.').unwrap();
        let forged_payload = URL_SAFE_NO_PAD.encode("v1.9.3.99999999999999");
        assert_eq!(
            verify(&format!("{forged_payload}.{tag}"), "tools/call elicit"),
            Err(Refused::Forged)
        );
        assert_eq!(verify(payload, "tools/call elicit"), Err(Refused::Forged));
        assert_eq!(verify("", "x"), Err(Refused::Forged));
        let old = mint(claims, "tools/call elicit", Duration::ZERO).unwrap();
        assert_eq!(verify(&old, "tools/call elicit"), Err(Refused::Expired));
        assert_ne!(next_call(), next_call());
    }
}
