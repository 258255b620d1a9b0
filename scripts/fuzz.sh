#!/usr/bin/env bash
# The long fuzzing run, by hand: builds the cargo-fuzz targets in fuzz/ and runs each one for
# a bounded time, then prints executions and crashes per target. (CI runs the quick version:
# tests/fuzz_corpora.rs replays the committed corpora under plain `cargo test`.)
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     default: 60 s, every target
#
# Needs cargo-fuzz (`cargo install cargo-fuzz --locked`). It wants nightly flags; on a stable
# toolchain RUSTC_BOOTSTRAP=1 lets them through. The address sanitizer is off (`-s none`): the
# code under test is safe Rust, and the targets' own assertions are what find bugs; debug
# assertions and overflow checks stay on. New inputs go to fuzz/target/corpus/<target> (not
# committed; seeds live in fuzz/corpus/<target>); crashes go to fuzz/artifacts/<target>/.
# Nothing is minimized: `cargo fuzz tmin <target> <crash>` does that for one crash.
set -uo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-60}"
shift || true
if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for source in fuzz/fuzz_targets/*.rs; do
    targets+=("$(basename "${source}" .rs)")
  done
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "cargo-fuzz is missing: cargo install cargo-fuzz --locked" >&2
  exit 2
fi

export RUSTC_BOOTSTRAP=1
# Discovery targets scan real files in a scratch folder of their own: on tmpfs when there is
# one (a disk with `discard` makes each run's deletes 20x slower), under
# AHP_PROXY_FUZZ_SCRATCH if set; only that new folder is removed afterwards.
if [ -n "${AHP_PROXY_FUZZ_SCRATCH:-}" ]; then
  parent="${AHP_PROXY_FUZZ_SCRATCH}"
elif [ -d /dev/shm ] && [ -w /dev/shm ]; then
  parent=/dev/shm
else
  parent="${PWD}/fuzz/target"
fi
mkdir -p "${parent}" fuzz/target/logs
AHP_PROXY_FUZZ_SCRATCH="$(mktemp -d "${parent}/ahp-proxy-fuzz.XXXXXX")" || exit 2
export AHP_PROXY_FUZZ_SCRATCH
trap 'rm -rf "${AHP_PROXY_FUZZ_SCRATCH}"' EXIT

echo "== building the fuzz targets"
if [ "${#targets[@]}" -eq 1 ]; then
  (cd fuzz && cargo fuzz build -s none "${targets[0]}") || exit 2
else
  (cd fuzz && cargo fuzz build -s none) || exit 2
fi

summary=()
total_crashes=0
failed_runs=0
for target in "${targets[@]}"; do
  work="target/corpus/${target}"
  mkdir -p "fuzz/${work}" "fuzz/artifacts/${target}"
  before=$(find "fuzz/artifacts/${target}" -type f | wc -l)
  log="fuzz/target/logs/${target}.log"
  echo "== ${target}: ${seconds} s"
  start=$(date +%s)
  (cd fuzz && cargo fuzz run -s none "${target}" "${work}" "corpus/${target}" -- \
    -max_total_time="${seconds}" -timeout=10 -rss_limit_mb=2048 -max_len=16384 \
    -print_final_stats=1 -close_fd_mask=1) >"${log}" 2>&1
  status=$?
  # libFuzzer's own time (the wall clock would include a rebuild by `cargo fuzz run`).
  elapsed=$(grep -o 'runs in [0-9]* second' "${log}" | grep -o '[0-9]*' | tail -1)
  elapsed="${elapsed:-$(( $(date +%s) - start ))}"
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "${log}" | grep -o '[0-9]*$' | tail -1)
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "${log}" | grep -o '[0-9]*$' | tail -1)
  corpus=$(find "fuzz/${work}" -type f | wc -l)
  after=$(find "fuzz/artifacts/${target}" -type f | wc -l)
  crashes=$(( after - before ))
  total_crashes=$(( total_crashes + crashes ))
  if [ "${status}" -ne 0 ]; then
    failed_runs=$(( failed_runs + 1 ))
    echo "${target}: the run failed (status ${status}); see ${log}"
    grep -E 'panicked at|ERROR: libFuzzer|Test unit written|^error' "${log}" | head -5
  fi
  summary+=("$(printf '%-12s %7s %12s %9s %8s %8s' "${target}" "${elapsed}" "${execs:-?}" "${rate:-?}" "${corpus}" "${crashes}")")
done

echo
printf '%-12s %7s %12s %9s %8s %8s\n' target seconds executions exec/s corpus crashes
printf '%s\n' "${summary[@]}"
echo "logs: fuzz/target/logs/; crashes: fuzz/artifacts/<target>/"
[ "${total_crashes}" -eq 0 ] && [ "${failed_runs}" -eq 0 ]
