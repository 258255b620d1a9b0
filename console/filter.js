// The filter box: as you type, only the plugins, directories, servers and tools whose names
// (or problems, or error messages) hold every word stay shown; `state:<kind>` keeps servers
// in that state, `is:problem` what needs attention. Matching reads the mirror (and each
// server's offer), and touches only the elements whose visibility changes.

/** A query as `{words, state, problem}` (lower case). Pure. */
export function parse(query) {
  const out = { words: [], state: undefined, problem: false };
  for (const token of query.toLowerCase().split(/\s+/).filter(Boolean)) {
    if (token.startsWith("state:")) out.state = token.slice(6);
    else if (token === "is:problem") out.problem = true;
    else out.words.push(token);
  }
  return out;
}

const ownTexts = new WeakMap(); // container object → its own searchable text

function ownText(c) {
  let text = ownTexts.get(c);
  if (text === undefined) {
    const children = (c.children || []).filter((x) => x.type !== "mcpServer").map((x) => x.name);
    text = [c.name, c.version, c.type, c.load && c.load.message, ...children].filter(Boolean).join("\n").toLowerCase();
    ownTexts.set(c, text);
  }
  return text;
}

function serverText(s, tools) {
  const error = s.state && s.state.error;
  return [s.name, s.state && s.state.kind, error && error.errorType, error && error.message, ...(tools || [])].filter(Boolean).join("\n").toLowerCase();
}

function all(words, text) {
  return words.every((w) => text.includes(w));
}

/** Which containers and servers `query` shows: `{cards: Set, rows: Set, narrow: Map serverId →
 *  words}` (a server's offer narrowed to tools matching the words its own name did not). Pure:
 *  `tools(server)` gives a server's tool names. */
export function select(customizations, query, tools) {
  const q = parse(query);
  const cards = new Set();
  const rows = new Set();
  const narrow = new Map();
  for (const c of customizations || []) {
    const servers = c.type === "mcpServer" ? [c] : (c.children || []).filter((x) => x.type === "mcpServer");
    const own = c.type === "mcpServer" ? "" : ownText(c);
    const hasProblems = !!(c.load && c.load.message);
    const ownMatch = c.type !== "mcpServer" && all(q.words, own) && !q.state && (!q.problem || hasProblems);
    let anyServer = false;
    for (const s of servers) {
      const kind = (s.state && s.state.kind) || "stopped";
      if (q.state && kind.toLowerCase() !== q.state) continue;
      const failing = kind === "error" || kind === "authRequired";
      if (q.problem && !failing && !hasProblems) continue;
      const names = tools(s);
      const text = `${own}\n${serverText(s, [])}`;
      const byName = all(q.words, text);
      const byTool = !byName && names.length > 0 && all(q.words, `${text}\n${names.join("\n").toLowerCase()}`);
      if (ownMatch || byName || byTool) {
        rows.add(s.id);
        anyServer = true;
        if (byTool) narrow.set(s.id, q.words.filter((w) => !text.includes(w)));
      }
    }
    if (ownMatch || anyServer) cards.add(c.id);
  }
  return { cards, rows, narrow };
}

export class Filter {
  /**
   * @param input the search field
   * @param host {customizations(), tools(server) → names, tree, workbench, stats}
   */
  constructor(input, host) {
    this.input = input;
    this.host = host;
    this.narrowed = new Set();
    input.addEventListener("input", () => this.typed());
    input.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && input.value) {
        input.value = "";
        this.typed();
      }
    });
  }

  /** Set the query (a summary part was chosen) and apply it. */
  set(query) {
    this.input.value = query;
    this.typed();
  }

  typed() {
    const started = performance.now();
    this.apply();
    const applied = performance.now() - started;
    // Done when on screen: the next frame, style and layout included.
    requestAnimationFrame(() => {
      void document.body.offsetHeight;
      const ms = performance.now() - started;
      this.host.stats.filters.push({ query: this.input.value, ms, applied });
      if (this.host.stats.filters.length > 200) this.host.stats.filters.shift();
    });
  }

  /** Show what the current query selects (after a redraw, or as the user types). */
  apply() {
    const query = this.input.value.trim();
    const { tree, workbench } = this.host;
    const everything = query === "";
    const picked = everything ? undefined : select(this.host.customizations(), query, (s) => this.host.tools(s));
    for (const [id, card] of tree.cards) {
      const hide = !everything && !picked.cards.has(id);
      if (card.hidden !== hide) card.hidden = hide;
    }
    for (const [id, row] of tree.rows) {
      const hide = !everything && !picked.rows.has(id);
      if (row.hidden !== hide) row.hidden = hide;
    }
    const narrow = everything ? new Map() : picked.narrow;
    for (const id of this.narrowed) if (!narrow.has(id)) workbench.narrow(id, [], false);
    for (const [id, words] of narrow) workbench.narrow(id, words, true);
    this.narrowed = new Set(narrow.keys());
    const shown = everything ? tree.cards.size : picked.cards.size;
    this.input.setAttribute("aria-description", `${shown} shown`);
  }
}
