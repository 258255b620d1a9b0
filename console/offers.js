// Every ready server's offer, read through its `mcp://` channel: tools, resources,
// resource templates and prompts (each list only when the channel advertises it: `mcpApp`'s
// `serverTools` and `serverResources`, prompts in the server's `_meta["ahp-proxy/channel"]`),
// every page of each. The console subscribes to each channel, so a server's
// `notifications/*/list_changed` re-reads that list.

const CHANNEL_META = "ahp-proxy/channel";
/** A server that pages forever is read this far. */
const MAX_PAGES = 100;

const LISTS = {
  tools: { method: "tools/list", field: "tools" },
  resources: { method: "resources/list", field: "resources" },
  templates: { method: "resources/templates/list", field: "resourceTemplates" },
  prompts: { method: "prompts/list", field: "prompts" },
};

/** Which lists server `server`'s channel serves. */
export function served(server) {
  const apps = (server && server.mcpApp && server.mcpApp.capabilities) || {};
  const extra = (server && server._meta && server._meta[CHANNEL_META]) || {};
  return {
    tools: !!apps.serverTools,
    resources: !!apps.serverResources,
    templates: !!apps.serverResources,
    prompts: !!extra.prompts,
  };
}

export class Offers {
  /** @param host {request(method, params), changed(serverId)} */
  constructor(host) {
    this.host = host;
    this.byChannel = new Map(); // channel → {serverId, lists: {tools, …}, loading: Set, errors: {}, version}
    this.reads = 0; // every read finished, so versions never repeat across readiness
  }

  /** Forget everything (a new connection). */
  reset() {
    this.byChannel.clear();
  }

  /** Server `server` is ready: read what its channel serves (once per readiness). */
  load(server) {
    const channel = server.channel;
    if (!channel || this.byChannel.has(channel)) return;
    const entry = { serverId: server.id, lists: {}, errors: {}, loading: new Set(), version: this.reads };
    this.byChannel.set(channel, entry);
    this.host.request("subscribe", { channel }).catch(() => {});
    const wanted = served(server);
    for (const list of Object.keys(LISTS)) if (wanted[list]) this.read(channel, entry, list);
  }

  /** Server `serverId` left `ready`: its lists go (they are read again when it is back). */
  drop(serverId) {
    for (const [channel, entry] of this.byChannel) if (entry.serverId === serverId) this.byChannel.delete(channel);
  }

  /** `notifications/<list>/list_changed` on `channel`. */
  listChanged(channel, method) {
    const entry = this.byChannel.get(channel);
    if (!entry) return;
    if (method === "notifications/tools/list_changed") this.read(channel, entry, "tools");
    else if (method === "notifications/prompts/list_changed") this.read(channel, entry, "prompts");
    else if (method === "notifications/resources/list_changed") {
      this.read(channel, entry, "resources");
      this.read(channel, entry, "templates");
    }
  }

  /** What server `server` offers so far: `{tools, resources, templates, prompts, errors,
   *  loading, version}` (a list is undefined until read; `version` counts the reads), or
   *  undefined when nothing is asked yet. */
  of(server) {
    const entry = server && server.channel && this.byChannel.get(server.channel);
    if (!entry || entry.serverId !== server.id) return undefined;
    return { ...entry.lists, errors: entry.errors, loading: entry.loading.size > 0, version: entry.version };
  }

  async read(channel, entry, list) {
    const { method, field } = LISTS[list];
    entry.loading.add(list);
    try {
      const items = [];
      let cursor;
      let pages = 0;
      do {
        const page = await this.host.request(method, { channel, ...(cursor ? { cursor } : {}) });
        items.push(...((page && page[field]) || []));
        cursor = page && page.nextCursor;
        pages += 1;
      } while (cursor && pages < MAX_PAGES);
      entry.lists[list] = items;
      delete entry.errors[list];
    } catch (error) {
      entry.errors[list] = error.message || String(error);
    }
    entry.loading.delete(list);
    this.reads += 1;
    entry.version = this.reads;
    if (this.byChannel.get(channel) === entry) this.host.changed(entry.serverId);
  }
}
