// Forms built from JSON Schema (a tool's `inputSchema`): nested objects as fieldsets,
// arrays with add and remove, enums and booleans as selects, defaults filled in, `$ref`s
// followed. A field left empty is left out (an optional object with nothing in it too), so
// what is sent is what was typed; the schema's `required` is checked before sending. What a
// form cannot express (unions, tuples, free-form objects, deep recursion) is a JSON field,
// and the whole form can be edited as raw JSON and back.

import { h, fill, pretty } from "./dom.js";
import { kindOf, unwrap, validate } from "./schema.js";

/** Nesting beyond this (a recursive `$ref`) is edited as JSON. */
const MAX_DEPTH = 6;

/** A value the user typed that cannot be read (bad JSON, not a number). */
class FormError extends Error {}

/**
 * The form for `schema` (an object schema): `{element, read(), set(value), submit()}`.
 * `read()` returns the arguments (throws `FormError` when a field cannot be read);
 * `set(value)` fills the fields; `submit()` reads and checks them against the schema.
 * `label` names it for assistive technology.
 */
export function schemaForm(schema, label) {
  const root = schema && typeof schema === "object" ? schema : { type: "object" };
  const form = editor(root, root, { name: "", path: "", required: true, depth: 0 });
  const json = h("textarea", { class: "raw-json", rows: 8, spellcheck: "false", "aria-label": `${label}: arguments as JSON` });
  const problem = h("p", { class: "form-error", role: "alert" });
  let raw = false;
  const body = h("div", { class: "schema-fields" }, form.element);
  const toggle = h("button", { type: "button", class: "link", "aria-pressed": "false" }, "Edit as JSON");
  toggle.addEventListener("click", () => {
    problem.textContent = "";
    try {
      if (raw) {
        form.set(parseJson(json.value, "the arguments"));
        fill(body, form.element);
      } else {
        json.value = pretty(form.read() ?? {});
        fill(body, json);
      }
    } catch (error) {
      problem.textContent = error.message;
      return;
    }
    raw = !raw;
    toggle.textContent = raw ? "Edit as form" : "Edit as JSON";
    toggle.setAttribute("aria-pressed", String(raw));
    (raw ? json : body.querySelector("input, select, textarea, button"))?.focus();
  });
  const element = h("div", { class: "schema-form" }, body, h("div", { class: "form-tools" }, toggle), problem);
  const read = () => (raw ? parseJson(json.value, "the arguments") ?? {} : form.read() ?? {});
  return {
    element,
    read,
    set: (value) => (raw ? (json.value = pretty(value)) : form.set(value)),
    /** The arguments to send; undefined, with the reason shown under the form, when a field
     *  cannot be read or they break the schema. */
    submit: () => {
      problem.textContent = "";
      let args;
      try {
        args = read();
      } catch (error) {
        if (!(error instanceof FormError)) throw error;
        problem.textContent = error.message;
        return undefined;
      }
      const errors = validate(args, root);
      if (errors.length) {
        problem.textContent = `Not sent: ${errors.map((e) => e.message).join("; ")}`;
        return undefined;
      }
      return args;
    },
  };
}

function parseJson(text, what) {
  if (text.trim() === "") return undefined;
  try {
    return JSON.parse(text);
  } catch (error) {
    throw new FormError(`${what} is not valid JSON: ${error.message}`);
  }
}

/** One field (or group of fields) for `schema`: `{element, read(), set(value)}`. */
function editor(schema, root, at) {
  const s = unwrap(schema, root) || {};
  const kind = at.depth > MAX_DEPTH ? undefined : kindOf(s, root);
  const make = {
    enum: enumField,
    string: textField,
    number: numberField,
    integer: numberField,
    boolean: booleanField,
    object: s.properties ? objectField : jsonField,
    array: s.items && !Array.isArray(s.prefixItems) ? arrayField : jsonField,
  }[kind] || jsonField;
  const field = make(s, root, at);
  if (s.default !== undefined) field.set(s.default);
  return field;
}

function caption(s, at) {
  const name = at.name || s.title || "";
  return [
    h("span", { class: "field-name" }, name, at.required && at.name ? h("span", { class: "required", "aria-hidden": "true" }, " *") : null),
    s.description ? h("span", { class: "field-hint muted" }, ` ${s.description}`) : null,
  ];
}

function labelled(s, at, input) {
  input.dataset.path = at.path;
  if (at.required) input.setAttribute("aria-required", "true");
  return h("label", { class: "field" }, caption(s, at), input);
}

function enumField(s, root, at) {
  const values = Array.isArray(s.enum) ? s.enum : [s.const];
  const select = h(
    "select",
    {},
    h("option", { value: "" }, "(not set)"),
    values.map((v) => h("option", { value: JSON.stringify(v) }, typeof v === "string" ? v : JSON.stringify(v))),
  );
  return {
    element: labelled(s, at, select),
    read: () => (select.value === "" ? undefined : JSON.parse(select.value)),
    set: (v) => {
      const wanted = v === undefined ? "" : JSON.stringify(v);
      if ([...select.options].some((o) => o.value === wanted)) select.value = wanted;
    },
  };
}

function textField(s, root, at) {
  const long = typeof s.maxLength !== "number" || s.maxLength > 200;
  const input = long && /text|body|content|description|message|prompt/i.test(at.name)
    ? h("textarea", { rows: 3 })
    : h("input", { type: "text" });
  return {
    element: labelled(s, at, input),
    read: () => (input.value === "" ? undefined : input.value),
    set: (v) => (input.value = v === undefined || v === null ? "" : String(v)),
  };
}

function numberField(s, root, at) {
  const input = h("input", { type: "number", step: kindOf(s, root) === "integer" ? "1" : "any", inputmode: "decimal" });
  return {
    element: labelled(s, at, input),
    read: () => {
      if (input.value.trim() === "") return undefined;
      const n = Number(input.value);
      if (!Number.isFinite(n)) throw new FormError(`${at.path || "the value"} is not a number`);
      return n;
    },
    set: (v) => (input.value = typeof v === "number" ? String(v) : ""),
  };
}

function booleanField(s, root, at) {
  const select = h("select", {}, h("option", { value: "" }, "(not set)"), h("option", { value: "true" }, "true"), h("option", { value: "false" }, "false"));
  return {
    element: labelled(s, at, select),
    read: () => (select.value === "" ? undefined : select.value === "true"),
    set: (v) => (select.value = typeof v === "boolean" ? String(v) : ""),
  };
}

function jsonField(s, root, at) {
  const area = h("textarea", { rows: 3, spellcheck: "false", placeholder: "JSON", class: "json-field" });
  return {
    element: labelled(s, at, area),
    read: () => parseJson(area.value, at.path || "the value"),
    set: (v) => (area.value = v === undefined ? "" : pretty(v)),
  };
}

function objectField(s, root, at) {
  const required = new Set(Array.isArray(s.required) ? s.required : []);
  // Required fields first, each group in the schema's order.
  const entries = Object.entries(s.properties);
  const ordered = [...entries.filter(([n]) => required.has(n)), ...entries.filter(([n]) => !required.has(n))];
  const fields = ordered.map(([name, child]) => ({
    name,
    field: editor(child, root, { name, path: at.path ? `${at.path}.${name}` : name, required: required.has(name), depth: at.depth + 1 }),
  }));
  let extra = {}; // keys set as JSON that the form has no field for, kept as they were
  const children = fields.map(({ field }) => field.element);
  const element = at.depth === 0
    ? h("div", { class: "object-fields" }, children)
    : h("fieldset", { class: "object", "data-path": at.path }, h("legend", {}, caption(s, at)), children);
  return {
    element,
    read: () => {
      const value = { ...extra };
      for (const { name, field } of fields) {
        const v = field.read();
        if (v !== undefined) value[name] = v;
      }
      return Object.keys(value).length || at.required ? value : undefined;
    },
    set: (v) => {
      const object = v && typeof v === "object" && !Array.isArray(v) ? v : {};
      extra = Object.fromEntries(Object.entries(object).filter(([k]) => !(k in s.properties)));
      for (const { name, field } of fields) field.set(object[name]);
    },
  };
}

function arrayField(s, root, at) {
  const items = [];
  const list = h("ol", { class: "array-items" });
  const itemName = (unwrap(s.items, root) || {}).title || "item";
  const add = (value) => {
    const index = items.length;
    const field = editor(s.items, root, { name: `${itemName} ${index + 1}`, path: `${at.path}[${index}]`, required: true, depth: at.depth + 1 });
    if (value !== undefined) field.set(value);
    const entry = { field };
    const remove = h("button", { type: "button", class: "link", "aria-label": `Remove ${itemName} ${index + 1} of ${at.path}` }, "Remove");
    entry.row = h("li", {}, field.element, remove);
    remove.addEventListener("click", () => {
      const values = items.filter((i) => i !== entry).map((i) => i.field.read());
      setAll(values);
      addButton.focus();
    });
    items.push(entry);
    list.append(entry.row);
    return entry;
  };
  const setAll = (values) => {
    items.length = 0;
    list.replaceChildren();
    for (const v of values) add(v);
  };
  const addButton = h("button", { type: "button", class: "add-item", "data-path": at.path }, `Add ${itemName}`);
  addButton.addEventListener("click", () => add().row.querySelector("input, select, textarea")?.focus());
  return {
    element: h("fieldset", { class: "array", "data-path": at.path }, h("legend", {}, caption(s, at)), list, addButton),
    read: () => {
      const values = items.map((i) => i.field.read()).filter((v) => v !== undefined);
      return values.length || at.required ? values : undefined;
    },
    set: (v) => setAll(Array.isArray(v) ? v : []),
  };
}
