//! Trust in server definitions: a server declared anywhere but the proxy's own config runs
//! only once the user trusted what it would run. `fingerprint` (what would run, hashed, and
//! as people are shown it), `policy` (which sources ask), `store` (the decisions, on disk).

pub mod fingerprint;
pub mod policy;
pub mod store;

pub use policy::{Mode, Source, TrustPolicy};
pub use store::TrustStore;
