// A few DOM helpers. Text from the host always goes in as text, never as HTML.

/** `h("button", {class: "x", onclick}, "Stop")`: an element with attributes and children. */
export function h(tag, attributes = {}, ...children) {
  return build(document.createElement(tag), attributes, children);
}

/** An SVG element, like `h`. */
export function svg(tag, attributes = {}, ...children) {
  return build(document.createElementNS("http://www.w3.org/2000/svg", tag), attributes, children);
}

function build(element, attributes, children) {
  for (const [key, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) element.addEventListener(key.slice(2), value);
    else if (key === "class") element.setAttribute("class", value);
    else if (value === true) element.setAttribute(key, "");
    else element.setAttribute(key, String(value));
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(element, child);
    else element.append(child instanceof Node ? child : String(child));
  }
}

/** Replace `element`'s children. */
export function fill(element, ...children) {
  element.replaceChildren();
  append(element, children);
  return element;
}

/** A short, human label for a tool call or server state badge. */
export function badge(text, kind) {
  return h("span", { class: `badge badge-${kind}` }, text);
}

/** `1 skill`, `2 skills`. */
export function plural(n, one, many = `${one}s`) {
  return `${n} ${n === 1 ? one : many}`;
}

/** `value` as indented JSON (text that is JSON is parsed first). */
export function pretty(value) {
  if (value === undefined) return "";
  if (typeof value === "string") {
    try {
      return JSON.stringify(JSON.parse(value), null, 2);
    } catch {
      return value;
    }
  }
  return JSON.stringify(value, null, 2);
}

/** A collapsed `<details>` with a summary and a JSON block. */
export function jsonDetails(summary, value, attributes = {}) {
  return h("details", { class: "json", ...attributes }, h("summary", {}, summary), h("pre", { class: "json-text" }, pretty(value)));
}

/**
 * Put `fresh` where `old` is, keeping the keyboard focus: on the same element when it moved
 * into `fresh`, else on the element of `fresh` with the same `data-key` (a Stop button
 * stays focused after its row is redrawn for the new state).
 */
export function replaceKeepingFocus(old, fresh) {
  const active = document.activeElement;
  const inside = active && active !== document.body && old.contains(active);
  const key = inside ? active.closest("[data-key]")?.dataset.key : undefined;
  old.replaceWith(fresh);
  if (!inside) return;
  if (fresh.contains(active)) active.focus({ preventScroll: true });
  else if (key) fresh.querySelector(`[data-key="${CSS.escape(key)}"]`)?.focus({ preventScroll: true });
}

/**
 * Make `parent`'s children exactly `children` (nodes; null and undefined skipped), in order,
 * moving only those out of place and removing the others. An element left where it was
 * keeps what it holds: typed values, open `<details>`, the keyboard focus.
 */
export function reconcile(parent, children) {
  const wanted = children.filter(Boolean);
  const keep = new Set(wanted);
  for (const node of [...parent.childNodes]) if (!keep.has(node)) node.remove();
  let previous = null;
  for (const node of wanted) {
    const expected = previous ? previous.nextSibling : parent.firstChild;
    if (node !== expected) parent.insertBefore(node, expected);
    previous = node;
  }
}

/**
 * Keyed parts of an element, each drawn again only when its key (what it shows, as text)
 * changes: `parts.get(owner, "head", key, () => element)` returns the element drawn for
 * `key`, the previous one when the key is the same. A part drawn anew takes the old one's
 * place keeping the focus (see `replaceKeepingFocus`).
 */
export class Parts {
  constructor() {
    this.byOwner = new WeakMap(); // owner element → Map name → {key, element}
  }

  get(owner, name, key, draw) {
    let parts = this.byOwner.get(owner);
    if (!parts) {
      parts = new Map();
      this.byOwner.set(owner, parts);
    }
    const old = parts.get(name);
    if (old && old.key === key) return old.element;
    const element = draw() || null;
    parts.set(name, { key, element });
    if (old && old.element && old.element.parentNode === owner) {
      if (element) replaceKeepingFocus(old.element, element);
      else old.element.remove();
    }
    return element;
  }
}

/** Polite screen-reader announcements (one live region for the page). */
export function announce(text) {
  const region = document.getElementById("announcer");
  if (!region) return;
  // The same text twice in a row is announced again only if the region changes.
  region.textContent = region.textContent === text ? `${text}\u00a0` : text;
}
