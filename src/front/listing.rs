//! The four `*/list` requests, one path: the aggregated endpoint answers from the namespace
//! of every ready server; a per-server endpoint asks its server (an empty list while it is
//! not ready). Each list type says how it is asked for, picked out and built.

use rmcp::model::{
    ClientRequest, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, RequestOptionalParam, ServerResult,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};

use super::naming::Namespace;
use super::Front;

/// A list the harness can ask for.
pub(super) trait Listing: Sized {
    /// Every item of the aggregated endpoint.
    fn aggregated(names: &Namespace) -> Self;
    /// The request that asks one server for it.
    fn request(params: Option<PaginatedRequestParams>) -> ClientRequest;
    /// The list out of a server's answer, if it is one.
    fn pick(result: ServerResult) -> Option<Self>;
    /// No items.
    fn empty() -> Self;
}

macro_rules! listing {
    ($result:ident, $request:ident, $field:ident) => {
        impl Listing for $result {
            fn aggregated(names: &Namespace) -> Self {
                $result::with_all_items(names.$field.iter().map(|e| e.item.clone()).collect())
            }
            fn request(params: Option<PaginatedRequestParams>) -> ClientRequest {
                ClientRequest::$request(RequestOptionalParam {
                    params,
                    ..Default::default()
                })
            }
            fn pick(result: ServerResult) -> Option<Self> {
                match result {
                    ServerResult::$result(r) => Some(r),
                    _ => None,
                }
            }
            fn empty() -> Self {
                $result::with_all_items(vec![])
            }
        }
    };
}

listing!(ListToolsResult, ListToolsRequest, tools);
listing!(ListPromptsResult, ListPromptsRequest, prompts);
listing!(ListResourcesResult, ListResourcesRequest, resources);
listing!(
    ListResourceTemplatesResult,
    ListResourceTemplatesRequest,
    templates
);

impl Front {
    /// Answer a `*/list` request: from the namespace, or from this endpoint's server.
    pub(super) async fn list<T: Listing>(
        &self,
        params: Option<PaginatedRequestParams>,
        context: &RequestContext<RoleServer>,
    ) -> Result<T, ErrorData> {
        self.seen(&context.peer);
        self.first_listing().await;
        let Some(id) = self.own_server() else {
            return Ok(T::aggregated(&self.hub.namespace()));
        };
        if self.hub.connections.get(id).is_none() {
            return Ok(T::empty());
        }
        let result = self.send(id, T::request(params), context).await?;
        T::pick(result).ok_or_else(|| super::unexpected("a list"))
    }
}
