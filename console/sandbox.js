// The MCP Apps sandbox relay, on the View origin (served with the View's content security
// policy, which the inner document inherits). Per the spec's "Sandbox proxy": it tells the
// host it is ready, loads the View's HTML into an inner iframe when the host sends it, and
// forwards every other message both ways. The inner frame has no `allow-same-origin`: each
// View gets an opaque origin of its own, so Views cannot reach each other or this relay.
(() => {
  "use strict";
  if (window.parent === window) return;
  const PROXY_READY = "ui/notifications/sandbox-proxy-ready";
  const RESOURCE_READY = "ui/notifications/sandbox-resource-ready";
  let hostOrigin = null; // learned from the host's first message
  let inner = null;

  function allowAttribute(permissions) {
    if (!permissions) return "";
    const map = { camera: "camera", microphone: "microphone", geolocation: "geolocation", clipboardWrite: "clipboard-write" };
    return Object.keys(map).filter((k) => permissions[k]).map((k) => map[k]).join("; ");
  }

  function load(params) {
    if (inner || typeof params.html !== "string") return;
    inner = document.createElement("iframe");
    inner.setAttribute("sandbox", "allow-scripts allow-forms");
    const allow = allowAttribute(params.permissions);
    if (allow) inner.setAttribute("allow", allow);
    inner.setAttribute("title", "MCP App View");
    inner.srcdoc = params.html;
    document.body.appendChild(inner);
  }

  window.addEventListener("message", (event) => {
    const data = event.data;
    if (event.source === window.parent) {
      if (hostOrigin === null) hostOrigin = event.origin;
      if (event.origin !== hostOrigin) return;
      if (data && data.method === RESOURCE_READY) {
        load(data.params || {});
      } else if (inner && inner.contentWindow && !(data && typeof data.method === "string" && data.method.startsWith("ui/notifications/sandbox-"))) {
        inner.contentWindow.postMessage(data, "*");
      }
    } else if (inner && event.source === inner.contentWindow) {
      if (data && typeof data.method === "string" && data.method.startsWith("ui/notifications/sandbox-")) return;
      window.parent.postMessage(data, hostOrigin || "*");
    }
  });

  window.parent.postMessage({ jsonrpc: "2.0", method: PROXY_READY, params: {} }, "*");
})();
