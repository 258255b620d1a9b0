//! Validation of `[trust]`: which sources' server definitions wait for the user's trust,
//! and the folders whose definitions are the user's own, into the pure
//! [`TrustPolicy`](crate::trust::TrustPolicy).

use toml::Spanned;

use super::checker::Checker;
use super::keys::{self, Text};
use super::paths::{self, Resolver};
use super::raw::RawTrust;
use crate::trust::{Mode, TrustPolicy};

/// `[trust]`.
pub(super) fn trust(
    checker: &mut Checker<'_>,
    raw: RawTrust,
    resolver: &Resolver<'_>,
) -> TrustPolicy {
    let folders = paths::list(checker, "trust.folders", raw.folders, resolver);
    TrustPolicy {
        manifests: mode(checker, &keys::TRUST_MANIFESTS, raw.manifests),
        plugins: mode(checker, &keys::TRUST_PLUGINS, raw.plugins),
        directories: mode(checker, &keys::TRUST_DIRECTORIES, raw.directories),
        client_plugins: mode(checker, &keys::TRUST_CLIENT_PLUGINS, raw.client_plugins),
        folders,
    }
}

/// One source's mode: `"ask"` or `"trusted"`; anything else is a problem (and asks).
fn mode(checker: &mut Checker<'_>, key: &Text, value: Option<Spanned<String>>) -> Mode {
    let Some(value) = value else {
        return Mode::parse(key.default).unwrap_or_default();
    };
    Mode::parse(value.get_ref()).unwrap_or_else(|| {
        checker.problem(
            value.span().start,
            format!(
                "{} = {:?}: expected \"ask\" or \"trusted\"",
                key.name,
                value.get_ref()
            ),
        );
        Mode::Ask
    })
}
