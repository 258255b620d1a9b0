#!/usr/bin/env bash
# Proxy instructions per tools/call, legacy (2025-11-25 session) and modern (2026-07-28
# stateless POST), through /mcp/echo to the stdio echo: valgrind's callgrind counts the
# proxy's instructions over FEW and MANY calls, one at a time; the difference over the calls
# between is the cost of one call, start-up and shutdown cancelled out. Counts, not time:
# repeatable on a busy machine. Needs valgrind and python3, and a release build:
#   cargo build --release && scripts/bench/call-instructions.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
few=${FEW:-200}
many=${MANY:-1400}
proxy=target/release/ahp-proxy
echo_server=target/release/ahp-proxy-example-server
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '[servers.echo]\ncommand = "%s"\nargs = ["echo"]\n' "$PWD/$echo_server" > "$work/proxy.toml"

# Total instructions of one proxy run serving $2 calls of era $1.
instructions() {
  local era=$1 calls=$2
  # %p: the watchdog (a fork of the proxy) writes a file of its own.
  rm -f "$work"/cg.*.out
  valgrind --tool=callgrind --callgrind-out-file="$work/cg.%p.out" "$proxy" serve \
    --config "$work/proxy.toml" --listen 127.0.0.1:0 --mcp-listen 127.0.0.1:0 \
    --log-format json 2> "$work/log" &
  local pid=$! url=""
  for _ in $(seq 1 300); do
    url=$(grep '"MCP endpoint listening"' "$work/log" 2>/dev/null | grep -o '"url":"[^"]*"' | cut -d'"' -f4 || true)
    [[ -n $url ]] && grep -q '"server ready"' "$work/log" && break
    sleep 0.1
  done
  python3 scripts/bench/call_driver.py "${url%/mcp}" "$era" "$calls" > /dev/null
  kill -INT "$pid"
  wait "$pid" || true
  callgrind_annotate "$work/cg.$pid.out" 2> /dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}'
}

for era in legacy modern; do
  a=$(instructions "$era" "$few")
  b=$(instructions "$era" "$many")
  echo "$era: $(( (b - a) / (many - few) )) instructions per call ($few calls: $a, $many calls: $b)"
done
