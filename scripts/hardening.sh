#!/usr/bin/env bash
# The long version of the hardening checks, by hand (CI runs the quick ones under
# `cargo test`: tests/fuzz_corpora.rs, tests/faults.rs, tests/load.rs, tests/soak.rs).
#
#   scripts/hardening.sh [FUZZ_SECONDS_PER_TARGET] [SOAK_SECONDS] [FAULT_ROUNDS]
#                         default: 120 s per fuzz target, 300 s of soak, 500 fault rounds
#
# Runs, in order, and prints each one's figures: every fuzz target for a bounded time
# (scripts/fuzz.sh, needs cargo-fuzz), the fault tests with many rounds of random crashes,
# the fan-out benchmark at 1/10/100 clients, and the soak. Exits non-zero if a fuzz target
# crashed or a fault test failed; the benchmark and the soak print numbers, not verdicts
# (read "flat" / "GROWING" at the end of the soak).
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
grep -oE '(log flood|endless stdout|floods:|plugin churn|random crashes|root removed).*|^test result.*|panicked.*' target/hardening-faults.log
[ "${faults}" -eq 0 ] || { echo "fault tests failed: see target/hardening-faults.log"; status=1; }

echo "==== fan-out"
cargo build --release --quiet && cargo run --release --quiet --example bench_fanout || status=1

echo "==== soak: ${soak_seconds} s"
cargo run --release --quiet --example soak -- --secs "${soak_seconds}" || status=1

exit "${status}"
