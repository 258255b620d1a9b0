// Per server, a small live chart of its tool calls over the last minutes: calls (and
// failures) per interval as bars, the 95th percentile latency as a line, p50 and p95 of the
// whole window beside it. From the host's timing of every call in the activity chat
// (`_meta["ahp-proxy/call"]`), drawn as SVG in the page.

import { h, svg, fill } from "./dom.js";
import { hostTiming } from "./activity.js";

/** The window: this many buckets of this many milliseconds. */
export const BUCKETS = 30;
export const BUCKET_MS = 10_000;

/** The `p`-th percentile (0..1) of sorted `values` (nearest rank). */
export function percentile(sorted, p) {
  if (!sorted.length) return undefined;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))];
}

/** Every completed call of `chat` with the host's timing: `{server, at, ms, ok}`. */
export function timedCalls(chat) {
  const out = [];
  const turns = [...((chat && chat.turns) || []), ...(chat && chat.activeTurn ? [chat.activeTurn] : [])];
  for (const turn of turns) {
    for (const part of turn.responseParts || []) {
      if (part.kind !== "toolCall") continue;
      const tc = part.toolCall;
      const timing = hostTiming(tc);
      const at = Date.parse(timing.startedAt);
      if (tc.status !== "completed" || typeof timing.durationMs !== "number" || Number.isNaN(at)) continue;
      if (!tc.contributor || tc.contributor.kind !== "mcp") continue;
      out.push({ server: tc.contributor.customizationId, at, ms: timing.durationMs, ok: tc.success === true });
    }
  }
  return out;
}

/** Per server: the calls of the window ending at `now`, bucketed. Pure. */
export function figures(calls, now) {
  const start = now - BUCKETS * BUCKET_MS;
  const byServer = new Map();
  for (const call of calls) {
    if (call.at < start || call.at > now) continue;
    let f = byServer.get(call.server);
    if (!f) {
      f = { calls: 0, failed: 0, latencies: [], buckets: Array.from({ length: BUCKETS }, () => ({ calls: 0, failed: 0, latencies: [] })) };
      byServer.set(call.server, f);
    }
    const b = f.buckets[Math.min(BUCKETS - 1, Math.floor((call.at - start) / BUCKET_MS))];
    b.calls += 1;
    f.calls += 1;
    if (!call.ok) {
      b.failed += 1;
      f.failed += 1;
    }
    b.latencies.push(call.ms);
    f.latencies.push(call.ms);
  }
  for (const f of byServer.values()) {
    f.latencies.sort((a, b) => a - b);
    f.p50 = percentile(f.latencies, 0.5);
    f.p95 = percentile(f.latencies, 0.95);
    for (const b of f.buckets) {
      b.latencies.sort((x, y) => x - y);
      b.p95 = percentile(b.latencies, 0.95);
    }
  }
  return byServer;
}

const WIDTH = 180;
const HEIGHT = 36;

function chartSvg(name, f) {
  const w = WIDTH / BUCKETS;
  const most = Math.max(1, ...f.buckets.map((b) => b.calls));
  const slowest = Math.max(1, ...f.buckets.map((b) => b.p95 || 0));
  const bars = f.buckets.flatMap((b, i) => {
    if (!b.calls) return [];
    const height = (b.calls / most) * (HEIGHT - 4);
    const failed = (b.failed / most) * (HEIGHT - 4);
    return [
      svg("rect", { class: "bar", x: (i * w + 1).toFixed(1), y: (HEIGHT - height).toFixed(1), width: (w - 2).toFixed(1), height: height.toFixed(1) }),
      failed ? svg("rect", { class: "bar-failed", x: (i * w + 1).toFixed(1), y: (HEIGHT - failed).toFixed(1), width: (w - 2).toFixed(1), height: failed.toFixed(1) }) : null,
    ];
  });
  const points = f.buckets
    .map((b, i) => (b.p95 === undefined ? null : `${(i * w + w / 2).toFixed(1)},${(HEIGHT - 2 - (b.p95 / slowest) * (HEIGHT - 6)).toFixed(1)}`))
    .filter(Boolean);
  return svg(
    "svg",
    { class: "chart", viewBox: `0 0 ${WIDTH} ${HEIGHT}`, width: WIDTH, height: HEIGHT, role: "img", "aria-label": `${name}: ${f.calls} calls in the last ${(BUCKETS * BUCKET_MS) / 60000} minutes, p50 ${f.p50} ms, p95 ${f.p95} ms` },
    svg("line", { class: "axis", x1: 0, y1: HEIGHT - 0.5, x2: WIDTH, y2: HEIGHT - 0.5 }),
    bars,
    points.length > 1 ? svg("polyline", { class: "p95-line", points: points.join(" ") }) : points.length ? svg("circle", { class: "p95-line", cx: points[0].split(",")[0], cy: points[0].split(",")[1], r: 1.5 }) : null,
  );
}

export class Charts {
  /** @param element where the charts go; @param actions {server(id) → {name}, jump(id)} */
  constructor(element, actions) {
    this.element = element;
    this.actions = actions;
    this.chat = undefined;
    this.scheduled = false;
    // The window slides even when nothing happens.
    setInterval(() => this.chat && this.schedule(), BUCKET_MS);
  }

  /** The chat changed: redraw at the next frame (many actions in a row, one drawing). */
  render(chat) {
    this.chat = chat;
    this.schedule();
  }

  schedule() {
    if (this.scheduled) return;
    this.scheduled = true;
    requestAnimationFrame(() => {
      this.scheduled = false;
      this.draw();
    });
  }

  draw() {
    const all = figures(timedCalls(this.chat), Date.now());
    const rows = [...all.entries()].map(([id, f]) => {
      const server = this.actions.server(id);
      const name = server ? server.name : id;
      return h(
        "li",
        { class: "chart-row", "data-server": name, "data-calls": f.calls, "data-p50": f.p50, "data-p95": f.p95 },
        h("button", { type: "button", class: "link chart-name", "data-key": `chart:${id}`, onclick: () => this.actions.jump(id) }, name),
        chartSvg(name, f),
        h("span", { class: "chart-figures" }, `${f.calls} call${f.calls === 1 ? "" : "s"}${f.failed ? `, ${f.failed} failed` : ""} · p50 ${f.p50} ms · p95 ${f.p95} ms`),
      );
    });
    const focused = this.element.contains(document.activeElement) ? document.activeElement.dataset.key : undefined;
    fill(
      this.element,
      rows.length
        ? [h("h3", { id: "charts-title" }, `Calls per server, last ${(BUCKETS * BUCKET_MS) / 60000} minutes`), h("ul", { class: "charts", "aria-labelledby": "charts-title" }, rows)]
        : null,
    );
    if (focused) this.element.querySelector(`[data-key="${CSS.escape(focused)}"]`)?.focus({ preventScroll: true });
  }
}
