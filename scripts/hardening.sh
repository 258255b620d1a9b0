#!/usr/bin/env bash
# The long version of the hardening checks, by hand (CI runs the quick ones under
# `cargo test`: tests/fuzz_corpora.rs, tests/faults.rs, tests/load.rs, tests/soak.rs).
#
#   scripts/hardening.sh [FUZZ_SECONDS_PER_TARGET] [SOAK_SECONDS] [FAULT_ROUNDS]
#                         default: 120 s per fuzz target, 300 s of soak, 500 fault rounds
#
# Runs, in order, and prints each one's figures: every fuzz target for a bounded time
# (scripts/fuzz.sh, needs cargo-fuzz), the fault tests with many rounds of random crashes
# (daemons and stubborn grandchildren included), the attacks and large inputs of
# examples/bench_hardening (huge titles and legal actions against the replay log and what
# it then holds, thousands of sessions, disposing of the default session, megabyte and
# line-forging client ids against the text log, a secret in a server's URL, over-long and
# deeply nested lines on --stdio, half-sent headers / too many connections / too many
# sessions on the MCP HTTP front, fairness between its clients (huge listen requests, 256
# listen streams, 1,000 sessions of one client, 150 slow peers, each followed by new
# harnesses that must be served), a manifest of 10,000 servers edited over and over, and
# 1,000 / 10,000 / 100,000 disabled servers beside one plugin being edited), the fan-out
# benchmark at 1/10/100 clients, and the soak (docs/hardening.md has the figures).
# Exits non-zero if a fuzz target crashed, a fault test failed, an attack passed its
# bound, the benchmark's stalled client was never cut off, or the soak saw memory or
# descriptors grow.
set -uo pipefail
cd "$(dirname "$0")/.."

fuzz_seconds="${1:-120}"
soak_seconds="${2:-300}"
fault_rounds="${3:-500}"
status=0

echo "==== fuzzing: ${fuzz_seconds} s per target"
scripts/fuzz.sh "${fuzz_seconds}" || status=1

echo "==== faults: ${fault_rounds} rounds"
mkdir -p target
AHP_PROXY_FAULT_ROUNDS="${fault_rounds}" cargo test --test faults -- --nocapture \
  >target/hardening-faults.log 2>&1
faults=$?
grep -oE '(log flood|endless stdout|floods:|plugin churn|random crashes|root removed).*|^test (daemons|kill_9).*|^test result.*|panicked.*' target/hardening-faults.log
[ "${faults}" -eq 0 ] || { echo "fault tests failed: see target/hardening-faults.log"; status=1; }

echo "==== attacks and large inputs"
cargo build --release --quiet && cargo run --release --quiet --example bench_hardening || status=1

echo "==== fan-out"
cargo run --release --quiet --example bench_fanout || status=1

echo "==== soak: ${soak_seconds} s"
cargo run --release --quiet --example soak -- --secs "${soak_seconds}" || status=1

exit "${status}"
