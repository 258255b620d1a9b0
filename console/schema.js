// JSON Schema (2020-12) for the workbench, pure: `$ref` resolution within a schema, the
// shape a form field takes, and validation of a value (a tool's arguments before a call, its
// structuredContent against its outputSchema). The keywords tools use are covered; unknown
// ones (formats, `$dynamicRef`, `unevaluated*`) are accepted, never guessed at.

const MAX_DEPTH = 64;

/** The value at JSON pointer `pointer` (`/a/b`, `~0` and `~1` escaped) inside `root`. */
export function pointer(root, path) {
  if (path === "") return root;
  let node = root;
  for (const raw of path.slice(1).split("/")) {
    const key = decodeURIComponent(raw).replace(/~1/g, "/").replace(/~0/g, "~");
    if (node === null || typeof node !== "object" || !(key in node)) return undefined;
    node = node[key];
  }
  return node;
}

/** The schema `$ref` names within `root` (`#`, `#/$defs/x`, `#/definitions/x`, or an
 *  `$anchor`); undefined when it points elsewhere (another document) or nowhere. */
export function resolveRef(root, ref) {
  if (typeof ref !== "string" || !ref.startsWith("#")) return undefined;
  const fragment = ref.slice(1);
  if (fragment === "") return root;
  if (fragment.startsWith("/")) return pointer(root, fragment);
  return findAnchor(root, fragment, 0);
}

function findAnchor(node, anchor, depth) {
  if (!node || typeof node !== "object" || depth > MAX_DEPTH) return undefined;
  if (node.$anchor === anchor) return node;
  for (const value of Object.values(node)) {
    const found = findAnchor(value, anchor, depth + 1);
    if (found) return found;
  }
  return undefined;
}

/** `schema` with its `$ref` followed (siblings of `$ref` kept, as 2020-12 allows); `seen`
 *  guards against cycles. `true`/`false` schemas stay as they are. */
export function deref(schema, root, seen = new Set()) {
  let current = schema;
  while (current && typeof current === "object" && typeof current.$ref === "string") {
    if (seen.has(current.$ref) || seen.size > MAX_DEPTH) break;
    seen.add(current.$ref);
    const target = resolveRef(root, current.$ref);
    if (target === undefined) break;
    const { $ref, ...siblings } = current;
    current = typeof target === "object" && target !== null ? { ...target, ...siblings } : target;
  }
  return current;
}

/** The one type a form edits for `schema`: `object`, `array`, `string`, `number`,
 *  `integer`, `boolean`, `null`, or undefined when it cannot tell (raw JSON then). A
 *  nullable type (`["string","null"]`, or `anyOf` of a type and null) counts as that type. */
export function kindOf(schema, root) {
  const s = deref(schema, root);
  if (!s || typeof s !== "object") return undefined;
  if (Array.isArray(s.enum) || s.const !== undefined) return "enum";
  let type = s.type;
  if (Array.isArray(type)) {
    const real = type.filter((t) => t !== "null");
    type = real.length === 1 ? real[0] : undefined;
  }
  if (type) return type;
  const branches = s.anyOf || s.oneOf;
  if (Array.isArray(branches)) {
    const real = branches.filter((b) => !(b && b.type === "null"));
    if (real.length === 1 && real.length < branches.length) return kindOf(real[0], root);
    return undefined;
  }
  if (s.properties) return "object";
  if (s.items) return "array";
  return undefined;
}

/** The non-null branch of a nullable `anyOf`/`oneOf`, else the schema itself (dereferenced). */
export function unwrap(schema, root) {
  const s = deref(schema, root);
  const branches = s && (s.anyOf || s.oneOf);
  if (Array.isArray(branches) && !s.type && !s.properties) {
    const real = branches.filter((b) => !(b && b.type === "null"));
    if (real.length === 1) return { ...deref(real[0], root), ...(s.description ? { description: s.description } : {}) };
  }
  return s;
}

function typeOf(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

function typeMatches(type, value) {
  const actual = typeOf(value);
  return type === actual || (type === "number" && actual === "integer");
}

function equal(a, b) {
  if (a === b) return true;
  if (typeof a !== typeof b || a === null || b === null || typeof a !== "object") return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => equal(a[k], b[k]));
}

function where(path) {
  return path === "" ? "the value" : path;
}

/** Every way `value` breaks `schema` (`root` for `$ref`s): `[{path, message}]`, empty when
 *  it is valid. */
export function validate(value, schema, root = schema) {
  const errors = [];
  check(value, schema, root, "", errors, 0);
  return errors;
}

function check(value, schema, root, path, errors, depth) {
  if (schema === true || schema === undefined || schema === null) return;
  if (schema === false) {
    errors.push({ path, message: `${where(path)} is not allowed` });
    return;
  }
  if (typeof schema !== "object" || depth > MAX_DEPTH) return;
  const say = (message) => errors.push({ path, message: `${where(path)} ${message}` });
  if (typeof schema.$ref === "string") {
    const target = resolveRef(root, schema.$ref);
    if (target !== undefined) check(value, target, root, path, errors, depth + 1);
  }
  if (schema.type !== undefined) {
    const types = Array.isArray(schema.type) ? schema.type : [schema.type];
    if (!types.some((t) => typeMatches(t, value))) {
      say(`should be ${types.join(" or ")}, not ${typeOf(value)}`);
      return;
    }
  }
  if (Array.isArray(schema.enum) && !schema.enum.some((e) => equal(e, value))) {
    say(`should be one of ${schema.enum.map((e) => JSON.stringify(e)).join(", ")}`);
  }
  if (schema.const !== undefined && !equal(schema.const, value)) say(`should be ${JSON.stringify(schema.const)}`);
  if (typeof value === "number") {
    if (typeof schema.minimum === "number" && value < schema.minimum) say(`should be at least ${schema.minimum}`);
    if (typeof schema.maximum === "number" && value > schema.maximum) say(`should be at most ${schema.maximum}`);
    if (typeof schema.exclusiveMinimum === "number" && value <= schema.exclusiveMinimum) say(`should be above ${schema.exclusiveMinimum}`);
    if (typeof schema.exclusiveMaximum === "number" && value >= schema.exclusiveMaximum) say(`should be below ${schema.exclusiveMaximum}`);
    if (typeof schema.multipleOf === "number" && schema.multipleOf > 0 && Math.abs(value / schema.multipleOf - Math.round(value / schema.multipleOf)) > 1e-9) {
      say(`should be a multiple of ${schema.multipleOf}`);
    }
  }
  if (typeof value === "string") {
    const length = [...value].length;
    if (typeof schema.minLength === "number" && length < schema.minLength) say(`should have at least ${schema.minLength} characters`);
    if (typeof schema.maxLength === "number" && length > schema.maxLength) say(`should have at most ${schema.maxLength} characters`);
    if (typeof schema.pattern === "string") {
      try {
        if (!new RegExp(schema.pattern, "u").test(value)) say(`should match ${schema.pattern}`);
      } catch {
        // A pattern this browser cannot compile is not held against the value.
      }
    }
  }
  if (Array.isArray(value)) {
    if (typeof schema.minItems === "number" && value.length < schema.minItems) say(`should have at least ${schema.minItems} items`);
    if (typeof schema.maxItems === "number" && value.length > schema.maxItems) say(`should have at most ${schema.maxItems} items`);
    const prefix = Array.isArray(schema.prefixItems) ? schema.prefixItems : [];
    value.forEach((item, i) => {
      const itemSchema = i < prefix.length ? prefix[i] : schema.items;
      check(item, itemSchema, root, `${path}[${i}]`, errors, depth + 1);
    });
    if (schema.uniqueItems === true) {
      for (let i = 0; i < value.length; i++) {
        if (value.slice(0, i).some((other) => equal(other, value[i]))) {
          say(`should have unique items (item ${i} repeats)`);
          break;
        }
      }
    }
  }
  if (value && typeof value === "object" && !Array.isArray(value)) {
    const properties = schema.properties || {};
    const at = (name) => (path ? `${path}.${name}` : name);
    for (const name of Array.isArray(schema.required) ? schema.required : []) {
      if (!(name in value)) errors.push({ path: at(name), message: `${at(name)} is required` });
    }
    for (const [name, item] of Object.entries(value)) {
      const child = at(name);
      if (name in properties) check(item, properties[name], root, child, errors, depth + 1);
      else if (patternSchema(schema, name) !== undefined) check(item, patternSchema(schema, name), root, child, errors, depth + 1);
      else if (schema.additionalProperties === false) errors.push({ path: child, message: `${child} is not an expected property` });
      else if (schema.additionalProperties && typeof schema.additionalProperties === "object") {
        check(item, schema.additionalProperties, root, child, errors, depth + 1);
      }
    }
    const count = Object.keys(value).length;
    if (typeof schema.minProperties === "number" && count < schema.minProperties) say(`should have at least ${schema.minProperties} properties`);
    if (typeof schema.maxProperties === "number" && count > schema.maxProperties) say(`should have at most ${schema.maxProperties} properties`);
  }
  if (Array.isArray(schema.allOf)) schema.allOf.forEach((s) => check(value, s, root, path, errors, depth + 1));
  const passes = (s) => validateAt(value, s, root, path, depth) === 0;
  if (Array.isArray(schema.anyOf) && !schema.anyOf.some(passes)) say("matches none of the allowed shapes (anyOf)");
  if (Array.isArray(schema.oneOf)) {
    const n = schema.oneOf.filter(passes).length;
    if (n !== 1) say(n === 0 ? "matches none of the allowed shapes (oneOf)" : `matches ${n} of the shapes where exactly one is allowed (oneOf)`);
  }
  if (schema.not !== undefined && passes(schema.not)) say("matches a shape it must not (not)");
  if (schema.if !== undefined) {
    const branch = passes(schema.if) ? schema.then : schema.else;
    if (branch !== undefined) check(value, branch, root, path, errors, depth + 1);
  }
}

function validateAt(value, schema, root, path, depth) {
  const errors = [];
  check(value, schema, root, path, errors, depth + 1);
  return errors.length;
}

function patternSchema(schema, name) {
  for (const [pattern, s] of Object.entries(schema.patternProperties || {})) {
    try {
      if (new RegExp(pattern, "u").test(name)) return s;
    } catch {
      // ignored, like an unknown keyword
    }
  }
  return undefined;
}
