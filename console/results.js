// What the workbench shows for an answer: a tool's result as its content blocks (text,
// images, audio, links, embedded resources) and structured content checked against the
// tool's output schema; a resource read (text, an image, a download for any blob); a prompt's
// messages; every one with its raw JSON beside it.

import { h, jsonDetails, pretty } from "./dom.js";
import { validate } from "./schema.js";

function dataUrl(mime, base64) {
  return `data:${mime || "application/octet-stream"};base64,${base64}`;
}

/** A link that saves `base64` as a file (a `blob:` URL, made when clicked). */
function download(base64, mime, name) {
  const link = h("a", { class: "download", href: "#", download: name || "download" }, `Download ${name || "the data"}`);
  link.addEventListener("click", () => {
    const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
    link.href = URL.createObjectURL(new Blob([bytes], { type: mime || "application/octet-stream" }));
    setTimeout(() => URL.revokeObjectURL(link.href), 60000);
  });
  return link;
}

function fileName(uri) {
  const last = String(uri || "").split(/[/:]/).filter(Boolean).pop();
  return last || "resource";
}

/** One resource's contents (from `resources/read`, or embedded in a result). */
function contents(item) {
  const head = h("div", { class: "content-head muted" }, h("code", {}, item.uri || ""), item.mimeType ? ` ${item.mimeType}` : "");
  if (typeof item.text === "string") return h("div", { class: "content content-text" }, head, h("pre", {}, item.text));
  if (typeof item.blob === "string") {
    const image = /^image\//.test(item.mimeType || "");
    return h(
      "div",
      { class: "content content-blob" },
      head,
      image ? h("img", { src: dataUrl(item.mimeType, item.blob), alt: `${fileName(item.uri)} (${item.mimeType})` }) : null,
      h("div", {}, download(item.blob, item.mimeType, fileName(item.uri)), ` (${Math.floor((item.blob.length * 3) / 4)} bytes)`),
    );
  }
  return h("div", { class: "content" }, head, h("pre", {}, pretty(item)));
}

/** One content block of a tool result or prompt message. */
function block(c) {
  switch (c && c.type) {
    case "text":
      return h("pre", { class: "content content-text" }, c.text);
    case "image":
      return h("div", { class: "content content-image" }, h("img", { src: dataUrl(c.mimeType, c.data), alt: `image (${c.mimeType})` }), download(c.data, c.mimeType, "image"));
    case "audio":
      return h("div", { class: "content content-audio" }, h("audio", { controls: true, src: dataUrl(c.mimeType, c.data) }), download(c.data, c.mimeType, "audio"));
    case "resource_link":
      return h("div", { class: "content content-link" }, "Resource link: ", h("code", {}, c.uri), c.name ? ` (${c.name})` : "", c.description ? h("span", { class: "muted" }, ` — ${c.description}`) : null);
    case "resource":
      return contents(c.resource || {});
    default:
      return h("pre", { class: "content" }, pretty(c));
  }
}

function took(ms) {
  return ms === undefined ? null : h("span", { class: "muted" }, ` answered in ${Math.round(ms)} ms`);
}

/** A `tools/call` result; `tool` for its output schema, `ms` the round trip. */
export function toolResult(result, tool, ms) {
  const failed = result.isError === true;
  const structured = result.structuredContent;
  let check = null;
  if (tool && tool.outputSchema && structured !== undefined) {
    const errors = validate(structured, tool.outputSchema);
    check = errors.length
      ? h("div", { class: "schema-check schema-bad", role: "status" }, "structuredContent does not match the output schema:", h("ul", {}, errors.map((e) => h("li", {}, e.message))))
      : h("div", { class: "schema-check schema-ok" }, "structuredContent matches the output schema");
  } else if (tool && tool.outputSchema && !failed) {
    check = h("div", { class: "schema-check schema-bad" }, "no structuredContent, though the tool has an output schema");
  }
  return h(
    "div",
    { class: `result ${failed ? "result-error" : "result-ok"}`, "data-kind": "tool" },
    h("div", { class: "result-head" }, h("strong", {}, failed ? "The tool reported an error" : "Result"), took(ms)),
    (result.content || []).map(block),
    structured !== undefined ? h("div", { class: "structured" }, h("h5", {}, "structuredContent"), h("pre", { class: "json-text" }, pretty(structured))) : null,
    check,
    jsonDetails("Raw JSON", result, { class: "json raw-json-result" }),
  );
}

/** A `resources/read` result. */
export function resourceResult(result, ms) {
  return h(
    "div",
    { class: "result result-ok", "data-kind": "resource" },
    h("div", { class: "result-head" }, h("strong", {}, "Contents"), took(ms)),
    (result.contents || []).map(contents),
    jsonDetails("Raw JSON", result, { class: "json raw-json-result" }),
  );
}

/** A `prompts/get` result: its messages. */
export function promptResult(result, ms) {
  return h(
    "div",
    { class: "result result-ok", "data-kind": "prompt" },
    h("div", { class: "result-head" }, h("strong", {}, "Messages"), took(ms)),
    result.description ? h("p", { class: "muted" }, result.description) : null,
    (result.messages || []).map((m) => h("div", { class: "message" }, h("span", { class: "badge" }, m.role), block(m.content))),
    jsonDetails("Raw JSON", result, { class: "json raw-json-result" }),
  );
}

/** A request that failed (an MCP error, or the channel's). */
export function errorResult(error, ms) {
  return h(
    "div",
    { class: "result result-error", role: "alert" },
    h("div", { class: "result-head" }, h("strong", {}, `Error${error.code !== undefined ? ` ${error.code}` : ""}`), took(ms)),
    h("pre", {}, error.message || String(error)),
    error.data !== undefined ? jsonDetails("Error data", error.data) : null,
  );
}
