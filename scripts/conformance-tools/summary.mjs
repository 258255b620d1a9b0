// Turns one run of `conformance server` or `conformance client` into per-scenario results for
// scripts/conformance.sh.
//
//   node summary.mjs OUT_DIR
//
// Reads OUT_DIR/suite.log (the suite's stdout+stderr), OUT_DIR/results/[server-]<scenario>-<time>/checks.json
// and OUT_DIR/meta.json (written by conformance.sh), writes OUT_DIR/summary.json, prints one
// line per scenario and, last, the summary as one JSON line prefixed with "AHP-CONFORMANCE ".
// Exit code: 0 every scenario passed (with a baseline: the suite's baseline check passed),
// 1 otherwise, 2 the suite printed no summary.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const out = process.argv[2];
if (!out) {
  console.error('usage: node summary.mjs OUT_DIR');
  process.exit(2);
}
const meta = JSON.parse(readFileSync(join(out, 'meta.json'), 'utf8'));
const log = existsSync(join(out, 'suite.log')) ? readFileSync(join(out, 'suite.log'), 'utf8') : '';
const lines = log.split('\n');

// The suite's own verdicts: "✓ name: 3 passed, 0 failed" between "=== SUMMARY ===" (client runs:
// "=== SUITE SUMMARY ===") and "Total:",
// and, with --requirements, "  ✓ name (reason)" under "Not scored for ...".
// With --expected-failures it then prints its baseline verdict: "  ~ entry" (expected),
// "  ✓ entry" (stale: now passing), "  ✗ entry" (unexpected), an entry being
// "scenario" or "scenario:check-id".
const order = [];
const fromSummary = new Map();
const unscored = new Map();
const baseline = { expected: [], stale: [], unexpected: [] };
let section = null;
for (const raw of lines) {
  const line = raw.replace(/\x1b\[[0-9;]*m/g, '');
  if (/^=== (SUITE )?SUMMARY ===/.test(line)) section = 'summary';
  else if (line.startsWith('Total:')) section = null;
  else if (line.startsWith('Not scored for')) section = 'unscored';
  else if (line.startsWith('Expected failures (in baseline)')) section = 'expected';
  else if (line.startsWith('Stale baseline entries')) section = 'stale';
  else if (line.startsWith('Unexpected failures (not in baseline)')) section = 'unexpected';
  else if (section in baseline) {
    const m = /^\s+[~✓✗] (\S+)\s*$/.exec(line);
    if (m) baseline[section].push(m[1]);
    else if (line.trim() !== '') section = null;
  } else if (section === 'summary') {
    const m = /^([✓✗]) (\S+): (\d+) passed, (\d+) failed/.exec(line);
    if (m) {
      order.push(m[2]);
      fromSummary.set(m[2], { passed: +m[3], failed: +m[4] });
    }
  } else if (section === 'unscored') {
    const m = /^\s+[✓✗] (\S+) \(([^)]*)\)/.exec(line);
    if (m) unscored.set(m[1], m[2]);
  }
}
const total = /^Total: (\d+) passed, (\d+) failed/m.exec(log);

// Newest checks.json of each scenario (a result directory without one: the scenario threw).
// Server runs write results/server-<scenario>-<time>/, client runs results/<scenario>-<time>/, a
// scenario named `group/name` results/group/name-<time>/.
const checksOf = new Map();
function readResults(dir, prefix) {
  for (const entry of readdirSync(join(out, 'results', dir)).sort()) {
    const path = dir ? join(dir, entry) : entry;
    const m = /^(?:server-)?(.+)-(\d{4}-\d{2}-\d{2}T[\d-]+Z)$/.exec(entry);
    if (!m) {
      if (!dir) readResults(entry, `${entry}/`);
      continue;
    }
    let checks = null;
    try {
      checks = JSON.parse(readFileSync(join(out, 'results', path, 'checks.json'), 'utf8'));
    } catch {
      /* missing or half-written */
    }
    checksOf.set(prefix + m[1], { dir: path, checks });
  }
}
if (existsSync(join(out, 'results'))) readResults('', '');
// A single --scenario run prints no SUMMARY block: count its checks instead.
if (order.length === 0) {
  for (const [name, { checks }] of checksOf) {
    order.push(name);
    const count = (status) => (checks ?? []).filter((c) => c.status === status).length;
    fromSummary.set(name, {
      passed: count('SUCCESS'),
      failed: checks ? count('FAILURE') : 1,
    });
  }
}

const scenarios = order.map((name) => {
  const counts = fromSummary.get(name);
  const found = checksOf.get(name);
  const checks = (found && found.checks) || [];
  const pick = (status) =>
    checks
      .filter((c) => c.status === status)
      .map((c) => ({ id: c.id, message: c.errorMessage ?? c.description ?? '' }));
  const failures = pick('FAILURE');
  if (counts.failed > 0 && failures.length === 0) {
    failures.push({ id: name, message: 'the scenario did not run to the end (no checks.json); see suite.log' });
  }
  return {
    name,
    status: counts.failed === 0 ? 'pass' : 'fail',
    passed: counts.passed,
    failed: counts.failed,
    warnings: pick('WARNING').length,
    scored: !unscored.has(name),
    ...(baseline.expected.some((e) => e === name || e.startsWith(name + ':'))
      ? { expected_failure: true }
      : {}),
    ...(unscored.has(name) ? { not_scored_reason: unscored.get(name) } : {}),
    failures,
    warning_checks: pick('WARNING'),
    results_dir: found ? join('results', found.dir) : null,
  };
});

const failedScenarios = scenarios.filter((s) => s.status === 'fail').map((s) => s.name);
const summary = {
  ...meta,
  // With a baseline (--expected-failures) the suite's own verdict counts: it passes when
  // exactly the listed scenarios fail.
  ok: order.length > 0 && (meta.baseline ? meta.suite_exit_code === 0 : failedScenarios.length === 0),
  scenario_count: scenarios.length,
  scenarios_passed: scenarios.length - failedScenarios.length,
  scenarios_failed: failedScenarios.length,
  checks_passed: total ? +total[1] : scenarios.reduce((n, s) => n + s.passed, 0),
  checks_failed: total ? +total[2] : scenarios.reduce((n, s) => n + s.failed, 0),
  failed_scenarios: failedScenarios,
  ...(meta.baseline ? { baseline } : {}),
  scenarios,
};
if (order.length === 0) summary.error = 'the suite printed no summary; see suite.log';
writeFileSync(join(out, 'summary.json'), JSON.stringify(summary, null, 2) + '\n');

for (const s of scenarios) {
  const tag = s.status === 'pass' ? 'PASS' : s.expected_failure ? 'XFAIL' : 'FAIL';
  const extra = [
    `${s.passed} passed, ${s.failed} failed`,
    s.warnings ? `${s.warnings} warnings` : null,
    s.scored ? null : `not scored: ${s.not_scored_reason}`,
  ]
    .filter(Boolean)
    .join(', ');
  console.log(`${tag} ${s.name} (${extra})`);
  for (const f of s.failures) console.log(`     failed ${f.id}: ${f.message}`);
  for (const w of s.warning_checks) console.log(`     warning ${w.id}: ${w.message}`);
}
console.log(
  `scenarios: ${summary.scenarios_passed} passed, ${summary.scenarios_failed} failed (${summary.scenario_count} run in ${meta.elapsed_ms} ms; ` +
    (meta.baseline ? `expected-failures baseline ${summary.ok ? 'matched' : 'NOT matched'}; ` : '') +
    `summary in ${join(out, 'summary.json')})`
);
const { scenarios: _full, ...head } = summary;
console.log(
  'AHP-CONFORMANCE ' +
    JSON.stringify({
      ...head,
      scenarios: scenarios.map(({ name, status, passed, failed, warnings, scored, expected_failure }) => ({
        name,
        status,
        passed,
        failed,
        warnings,
        scored,
        ...(expected_failure ? { expected_failure } : {}),
      })),
    }),
);
process.exit(order.length === 0 ? 2 : summary.ok ? 0 : 1);
