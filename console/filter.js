// The filter box: as you type, only the plugins, directories, servers and tools whose names
// (or problems, or error messages) hold every word stay shown; `state:<kind>` keeps servers
// in that state, `is:problem` what needs attention. Matching reads the mirror (and each
// server's offer), and touches only the elements whose visibility changes: once a frame
// however fast the keys come, the first cards at once and the rest in batches, frame by frame.

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

/** Cards shown in the frame of a keystroke (more than a screenful on any screen), then per
 *  frame after it: no keystroke waits for 1,000 cards to be laid out. */
const FIRST_BATCH = 60;
const BATCH = 200;
/** An offer opened and narrowed costs about as much as this many cards shown. */
const OFFER_COST = 5;

export class Filter {
  /**
   * @param input the search field
   * @param host {customizations(), tools(server) → names, tree, workbench, stats}
   */
  constructor(input, host) {
    this.input = input;
    this.host = host;
    this.narrowed = new Set(); // servers whose offer is narrowed now
    this.frame = 0; // the animation frame asked for, if any
    this.since = undefined; // when the first input not yet applied came
    this.run = 0; // each application's number: a newer one ends the batches of an older one
    input.addEventListener("input", () => this.typed());
    input.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && input.value) {
        input.value = "";
        this.typed();
      }
    });
  }

  /** Set the query (a summary part was chosen) and apply it at once, in full: the caller
   *  looks at what is shown next. */
  set(query) {
    this.input.value = query;
    if (this.frame) cancelAnimationFrame(this.frame);
    this.frame = 0;
    this.since = undefined;
    this.apply(Infinity);
  }

  /** A keystroke: the work of every keystroke of one frame is done once, in that frame. */
  typed() {
    if (this.since === undefined) this.since = performance.now();
    this.schedule();
  }

  /** The tree was redrawn: the query is applied again at the next frame. */
  refresh() {
    this.schedule();
  }

  schedule() {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      const since = this.since;
      this.since = undefined;
      const started = performance.now();
      let entry;
      let doneAt;
      this.apply(FIRST_BATCH, (at) => {
        doneAt = at;
        if (entry) entry.done = at - since;
      });
      const applied = performance.now() - started;
      if (since === undefined) return;
      // On screen: style and layout of this frame included. `done`: the last batch applied.
      void document.body.offsetHeight;
      entry = { query: this.input.value, ms: performance.now() - since, applied, batched: true };
      if (doneAt !== undefined) entry.done = doneAt - since;
      this.host.stats.filters.push(entry);
      if (this.host.stats.filters.length > 200) this.host.stats.filters.shift();
    });
  }

  /** Show what the current query selects, in the tree's order: up to `first` cards made
   *  visible now (an offer opened counts `OFFER_COST`), then `BATCH` a frame; `done(time)`
   *  after the last. */
  apply(first = Infinity, done = () => {}) {
    const run = ++this.run;
    const query = this.input.value.trim();
    const { tree, workbench } = this.host;
    const everything = query === "";
    const picked = everything ? undefined : select(this.host.customizations(), query, (s) => this.host.tools(s));
    const narrow = everything ? new Map() : picked.narrow;
    const rowsOf = new Map(); // card element → its server ids
    for (const [id, entry] of tree.servers) {
      const card = tree.cards.get(entry.container ? entry.container.id : id);
      if (!card) continue;
      if (!rowsOf.has(card)) rowsOf.set(card, []);
      rowsOf.get(card).push(id);
    }
    const shown = everything ? tree.cards.size : picked.cards.size;
    this.input.setAttribute("aria-description", `${shown} shown`);
    const cards = [...tree.element.children].filter((c) => c.dataset.id !== undefined && tree.cards.get(c.dataset.id) === c);
    let at = 0;
    const step = (budget) => {
      if (run !== this.run) return;
      let spent = 0;
      while (at < cards.length && spent < budget) {
        const card = cards[at++];
        const hide = !everything && !picked.cards.has(card.dataset.id);
        if (card.hidden !== hide) {
          card.hidden = hide;
          if (!hide) spent += 1;
        }
        for (const id of rowsOf.get(card) || []) {
          const row = tree.rows.get(id);
          const hideRow = !everything && !picked.rows.has(id);
          if (row && row.hidden !== hideRow) row.hidden = hideRow;
          if (narrow.has(id)) {
            if (!this.narrowed.has(id)) spent += OFFER_COST; // narrowed again: cheap
            workbench.narrow(id, narrow.get(id), true);
            this.narrowed.add(id);
          } else if (this.narrowed.has(id)) {
            workbench.narrow(id, [], false);
            this.narrowed.delete(id);
          }
        }
      }
      if (at < cards.length) requestAnimationFrame(() => step(BATCH));
      else done(performance.now());
    };
    step(first);
  }
}
