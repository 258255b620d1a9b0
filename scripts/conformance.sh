#!/usr/bin/env bash
# The official MCP conformance suite (server scenarios), pinned, for ahp-proxy.
#
#   scripts/conformance.sh install                 install the pinned tools, print the cache dir
#   scripts/conformance.sh commands [--json]       exact command lines: the suite, the everything
#                                                  server over stdio and over streamable HTTP
#   scripts/conformance.sh list [SUITE-ARGS...]    the scenarios a run selects
#   scripts/conformance.sh server --url URL [--out DIR] [--quiet] [-- SUITE-ARGS...]
#                                                  run the server scenarios against URL
#   scripts/conformance.sh everything --stdio | --http PORT
#                                                  run @modelcontextprotocol/server-everything in
#                                                  the foreground (HTTP: http://127.0.0.1:PORT/mcp)
#   scripts/conformance.sh reference [--server-cmd CMD] [--path /mcp] [--out DIR] [--quiet]
#                                    [-- SUITE-ARGS...]
#                                                  start a server on a free port (default: the
#                                                  everything server over HTTP; CMD may use {port}
#                                                  and $PORT), run `server` against it, stop it
#
# `server` selects `--requirements 2025-11-25` (the frozen scenario set of MCP 2025-11-25,
# run at the 2025-11-25 wire: ahp-proxy's protocol version) unless SUITE-ARGS carry
# --scenario, --suite, --spec-version or --requirements. Its results go to DIR (default: a new
# temporary directory): suite.log, results/server-<scenario>-<time>/checks.json and
# summary.json. stdout gets one PASS/FAIL line per scenario with the failed and warning checks,
# then, last, `AHP-CONFORMANCE {json}` (the summary on one line). The suite's own output goes
# to stderr unless --quiet.
# Exit: 0 every scenario passed, 1 a scenario failed, 2 the suite did not run. With
# `-- --expected-failures FILE` (the suite's baseline, see conformance-tools/expected-failures/)
# the exit code is the suite's: 0 when exactly the listed scenarios fail.
#
# Environment:
#   AHP_PROXY_TOOLS          cache root (default: $HOME/.cache/ahp-proxy-tools)
#   AHP_CONFORMANCE_REQUIREMENTS  default requirement set (default: 2025-11-25)
#   AHP_CONFORMANCE_PORTS    LOW-HIGH range `reference` picks its port from (default: any free)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tools_src="$here/conformance-tools"
TOOLS="${AHP_PROXY_TOOLS:-$HOME/.cache/ahp-proxy-tools}"
REQUIREMENTS="${AHP_CONFORMANCE_REQUIREMENTS:-2025-11-25}"

die() { echo "conformance.sh: $*" >&2; exit 2; }

node_bin() {
  local dir
  dir="$("$here/node.sh")" || die "no Node.js >= 22 (scripts/node.sh failed)"
  echo "$dir/node"
}

# Installs the locked packages into $TOOLS/conformance-<lock hash>/ once; prints that dir.
install_tools() {
  local node hash dest tmp
  node="$(node_bin)"
  hash="$(cat "$tools_src/package.json" "$tools_src/package-lock.json" "$tools_src/loopback.mjs" |
    sha256sum | cut -c1-12)"
  dest="$TOOLS/conformance-$hash"
  if [[ -f "$dest/.installed" ]]; then
    echo "$dest"
    return
  fi
  mkdir -p "$TOOLS"
  exec 8>"$TOOLS/.conformance.lock"
  command -v flock >/dev/null 2>&1 && flock 8
  if [[ ! -f "$dest/.installed" ]]; then
    tmp="$(mktemp -d "$TOOLS/.conformance-install.XXXXXX")"
    chmod 755 "$tmp"
    cp "$tools_src/package.json" "$tools_src/package-lock.json" "$tools_src/loopback.mjs" "$tmp/"
    echo "conformance.sh: installing the pinned conformance tools into $dest" >&2
    # npm runs under the pinned node (its shebang is `env node`).
    if ! (cd "$tmp" && PATH="$(dirname "$node"):$PATH" npm ci --ignore-scripts --no-audit \
      --no-fund --loglevel=error >&2); then
      rm -rf "$tmp"
      die "npm ci failed"
    fi
    touch "$tmp/.installed"
    rm -rf "$dest"
    mv "$tmp" "$dest"
  fi
  exec 8>&-
  echo "$dest"
}

conformance_js() { echo "$1/node_modules/@modelcontextprotocol/conformance/dist/index.js"; }
everything_js() { echo "$1/node_modules/@modelcontextprotocol/server-everything/dist/index.js"; }

# A free TCP port on 127.0.0.1, from AHP_CONFORMANCE_PORTS=LOW-HIGH when set.
free_port() {
  local node="$1"
  "$node" -e '
    const net = require("node:net");
    const range = process.env.AHP_CONFORMANCE_PORTS;
    let [lo, hi] = range ? range.split("-").map(Number) : [0, 0];
    const ports = range ? Array.from({ length: hi - lo + 1 }, (_, i) => lo + i) : [0];
    if (range) ports.sort(() => Math.random() - 0.5);
    (function next(i) {
      if (i >= ports.length) { console.error("no free port"); process.exit(1); }
      const s = net.createServer();
      s.once("error", () => next(i + 1));
      s.listen(ports[i], "127.0.0.1", () => { const p = s.address().port; s.close(() => console.log(p)); });
    })(0);
  '
}

wait_port() { # PORT TIMEOUT_S PID
  local deadline=$((SECONDS + $2))
  while ((SECONDS < deadline)); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    kill -0 "$3" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

has_selection() {
  local a
  for a in "$@"; do
    case "$a" in
      --scenario | --scenario=* | --suite | --suite=* | --spec-version | --spec-version=* | \
        --requirements | --requirements=*) return 0 ;;
    esac
  done
  return 1
}

has_baseline() {
  local a
  for a in "$@"; do
    case "$a" in --expected-failures | --expected-failures=*) return 0 ;; esac
  done
  return 1
}

json_str() { # a JSON string literal
  local node="$1"; shift
  "$node" -e 'process.stdout.write(JSON.stringify(process.argv[1]))' "$1"
}

json_argv() { # a JSON array of the arguments
  local node="$1"; shift
  "$node" -e 'process.stdout.write(JSON.stringify(process.argv.slice(1)))' -- "$@"
}

cmd_server() {
  local url="" out="" quiet=0
  while (($#)); do
    case "$1" in
      --url) url="$2"; shift 2 ;;
      --url=*) url="${1#*=}"; shift ;;
      --out) out="$2"; shift 2 ;;
      --out=*) out="${1#*=}"; shift ;;
      --quiet) quiet=1; shift ;;
      --) shift; break ;;
      *) die "server: unknown option $1 (suite options go after --)" ;;
    esac
  done
  [[ -n "$url" ]] || die "server: --url is required"
  local extra=("$@")
  has_selection "${extra[@]+"${extra[@]}"}" || extra=(--requirements "$REQUIREMENTS" "${extra[@]+"${extra[@]}"}")

  local node dir js
  node="$(node_bin)"
  dir="$(install_tools)"
  js="$(conformance_js "$dir")"
  if [[ -z "$out" ]]; then
    out="$(mktemp -d "${TMPDIR:-/tmp}/ahp-conformance.XXXXXX")"
  else
    mkdir -p "$out"
    rm -rf "$out/results" "$out/suite.log" "$out/summary.json" "$out/meta.json"
  fi

  local version start end rc=0
  version="$("$node" -e 'console.log(require(process.argv[1]).version)' \
    "$dir/node_modules/@modelcontextprotocol/conformance/package.json")"
  local argv=("$node" "$js" server --url "$url" -o "$out/results" "${extra[@]}")
  start=$(date +%s%N)
  if ((quiet)); then
    "${argv[@]}" >"$out/suite.log" 2>&1 || rc=$?
  else
    "${argv[@]}" 2>&1 | tee "$out/suite.log" >&2 || rc=${PIPESTATUS[0]}
  fi
  end=$(date +%s%N)

  cat >"$out/meta.json" <<EOF
{
  "suite": "@modelcontextprotocol/conformance",
  "suite_version": $(json_str "$node" "$version"),
  "url": $(json_str "$node" "$url"),
  "suite_args": $(json_argv "$node" "${extra[@]}"),
  "suite_exit_code": $rc,
  "baseline": $(has_baseline "${extra[@]}" && echo true || echo false),
  "elapsed_ms": $(((end - start) / 1000000)),
  "out_dir": $(json_str "$node" "$out")
}
EOF
  local src=0
  "$node" "$tools_src/summary.mjs" "$out" || src=$?
  return "$src"
}

cmd_everything() {
  local node dir js
  node="$(node_bin)"
  dir="$(install_tools)"
  js="$(everything_js "$dir")"
  case "${1:-}" in
    --stdio) exec "$node" "$js" stdio ;;
    --http)
      [[ -n "${2:-}" ]] || die "everything --http PORT"
      PORT="$2" exec "$node" --import "file://$dir/loopback.mjs" "$js" streamableHttp
      ;;
    *) die "everything --stdio | --http PORT" ;;
  esac
}

cmd_reference() {
  local server_cmd="" path="/mcp" out="" quiet=() pass=()
  while (($#)); do
    case "$1" in
      --server-cmd) server_cmd="$2"; shift 2 ;;
      --server-cmd=*) server_cmd="${1#*=}"; shift ;;
      --path) path="$2"; shift 2 ;;
      --path=*) path="${1#*=}"; shift ;;
      --out) out="$2"; shift 2 ;;
      --out=*) out="${1#*=}"; shift ;;
      --quiet) quiet=(--quiet); shift ;;
      --) shift; pass=("$@"); break ;;
      *) die "reference: unknown option $1" ;;
    esac
  done
  local node dir port
  node="$(node_bin)"
  dir="$(install_tools)"
  port="$(free_port "$node")"
  if [[ -z "$server_cmd" ]]; then
    server_cmd="exec $(printf '%q ' "$node" --import "file://$dir/loopback.mjs" \
      "$(everything_js "$dir")" streamableHttp)"
  fi
  server_cmd="${server_cmd//\{port\}/$port}"
  [[ -n "$out" ]] || out="$(mktemp -d "${TMPDIR:-/tmp}/ahp-conformance.XXXXXX")"
  mkdir -p "$out"
  local log="$out/server.log"
  echo "conformance.sh: starting the server on 127.0.0.1:$port (log: $log)" >&2
  # Its own process group, so that stopping it stops whatever it started.
  PORT="$port" setsid bash -c "$server_cmd" >"$log" 2>&1 </dev/null &
  REF_PID=$!
  trap stop_reference EXIT
  if ! wait_port "$port" 30 "$REF_PID"; then
    cat "$log" >&2
    die "the server did not listen on 127.0.0.1:$port"
  fi
  local rc=0
  cmd_server --url "http://127.0.0.1:$port$path" --out "$out" "${quiet[@]+"${quiet[@]}"}" \
    -- "${pass[@]+"${pass[@]}"}" || rc=$?
  stop_reference
  trap - EXIT
  return "$rc"
}

REF_PID=""
stop_reference() { # the process group `reference` started, and nothing else
  [[ -n "$REF_PID" ]] || return 0
  kill -TERM -- "-$REF_PID" 2>/dev/null || true
  local i
  for i in $(seq 50); do
    kill -0 "$REF_PID" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL -- "-$REF_PID" 2>/dev/null || true
  REF_PID=""
}

cmd_commands() {
  local node dir js ev lb
  node="$(node_bin)"
  dir="$(install_tools)"
  js="$(conformance_js "$dir")"
  ev="$(everything_js "$dir")"
  lb="file://$dir/loopback.mjs"
  if [[ "${1:-}" == --json ]]; then
    cat <<EOF
{"node": $(json_str "$node" "$node"),
 "conformance": $(json_argv "$node" "$node" "$js" server --url "http://127.0.0.1:<port>/mcp" --requirements "$REQUIREMENTS"),
 "everything_stdio": $(json_argv "$node" "$node" "$ev" stdio),
 "everything_http": {"argv": $(json_argv "$node" "$node" --import "$lb" "$ev" streamableHttp), "env": {"PORT": "<port>"}, "url": "http://127.0.0.1:<port>/mcp"}}
EOF
    return
  fi
  cat <<EOF
# Conformance suite, server scenarios (streamable HTTP only):
$node $js server --url http://127.0.0.1:<port>/mcp --requirements $REQUIREMENTS -o <dir>

# Everything server (@modelcontextprotocol/server-everything) over stdio, e.g. as a proxy child:
$node $ev stdio
#   proxy.toml:
#   [servers.everything]
#   command = "$node"
#   args = ["$ev", "stdio"]

# Everything server over streamable HTTP at http://127.0.0.1:<port>/mcp (loopback only):
PORT=<port> $node --import $lb $ev streamableHttp
EOF
}

cmd_list() {
  local node dir
  node="$(node_bin)"
  dir="$(install_tools)"
  local args=("$@")
  has_selection "${args[@]+"${args[@]}"}" || args=(--requirements "$REQUIREMENTS" "${args[@]+"${args[@]}"}")
  "$node" "$(conformance_js "$dir")" list "${args[@]}"
}

case "${1:-}" in
  install) install_tools ;;
  commands) shift; cmd_commands "$@" ;;
  list) shift; cmd_list "$@" ;;
  server) shift; cmd_server "$@" ;;
  everything) shift; cmd_everything "$@" ;;
  reference) shift; cmd_reference "$@" ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
