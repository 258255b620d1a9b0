//! Ids that grant something (an MCP session, a key): 128 bits from the system's CSPRNG
//! (`ring`'s `SystemRandom`, `getrandom(2)`), as 32 lowercase hex digits, with no structure.

use ring::rand::{SecureRandom, SystemRandom};

/// A fresh id; `None` only when the system has no randomness to give, in which case the
/// caller refuses what it would have granted rather than make a guessable one.
pub fn id() -> Option<String> {
    let mut bytes = [0u8; 16];
    hex(SystemRandom::new().fill(&mut bytes).map(|()| bytes).ok())
}

/// 16 drawn bytes as 32 lowercase hex digits; `None` when nothing could be drawn.
pub fn hex(drawn: Option<[u8; 16]>) -> Option<String> {
    let mut out = String::with_capacity(32);
    for byte in drawn? {
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 0xf)]));
    }
    Some(out)
}

const HEX: &[u8; 16] = b"0123456789abcdef";

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn ids_are_32_hex_digits_and_never_repeat_or_share_a_prefix() {
        let ids: Vec<String> = (0..1000).map(|_| id().expect("randomness")).collect();
        assert!(ids
            .iter()
            .all(|id| id.len() == 32 && id.bytes().all(|b| HEX.contains(&b))));
        assert_eq!(ids.iter().collect::<HashSet<_>>().len(), ids.len());
        // No counter or clock inside: consecutive ids share no long prefix or suffix.
        let prefixes: HashSet<&str> = ids.iter().map(|id| &id[..8]).collect();
        let suffixes: HashSet<&str> = ids.iter().map(|id| &id[24..]).collect();
        assert!(prefixes.len() > 990 && suffixes.len() > 990);
    }
}
