#!/usr/bin/env bash
# The official MCP conformance suite (server and client scenarios), pinned, for ahp-proxy.
#
#   scripts/conformance.sh install                 install the pinned tools, print the cache dir
#   scripts/conformance.sh commands [--json]       exact command lines: the suite, the everything
#                                                  server over stdio and over streamable HTTP
#   scripts/conformance.sh list [SUITE-ARGS...]    the scenarios a run selects
#   scripts/conformance.sh server --url URL [--out DIR] [--quiet] [-- SUITE-ARGS...]
#                                                  run the server scenarios against URL
#   scripts/conformance.sh client (--command CMD | --sdk-client | --through-proxy) [--out DIR]
#                                 [--quiet] [-- SUITE-ARGS...]
#                                                  run the client scenarios with CMD as the client
#                                                  under test (the suite appends its mock server's
#                                                  URL; --sdk-client: the SDK v2 client of
#                                                  scripts/era-tools/reference-client.mjs;
#                                                  --through-proxy: ahp-proxy as the client, that
#                                                  SDK client driving it: `proxy-client`)
#   scripts/conformance.sh proxy-client URL        ahp-proxy with URL as its HTTP server
#                                                  `conformance`, and the SDK v2 reference client
#                                                  on its /mcp/conformance, stopped after
#   scripts/conformance.sh fixture --stdio | --http PORT
#                                                  run the project's fixture (the suite's reference
#                                                  server, `ahp-proxy-example-server conformance`) in
#                                                  the foreground (HTTP: http://127.0.0.1:PORT/mcp)
#   scripts/conformance.sh everything --stdio | --http PORT
#                                                  run @modelcontextprotocol/server-everything in
#                                                  the foreground (HTTP: http://127.0.0.1:PORT/mcp)
#   scripts/conformance.sh reference [--sdk | --everything | --server-cmd CMD] [--path /mcp]
#                                    [--out DIR] [--quiet] [-- SUITE-ARGS...]
#                                                  start a server on a free port (default: the
#                                                  fixture over HTTP; --sdk: the project's reference
#                                                  server on the TypeScript SDK v2, dual-era, from
#                                                  scripts/era.sh; --everything: the everything
#                                                  server; CMD may use {port} and $PORT), run
#                                                  `server` against it, stop it
#   scripts/conformance.sh proxy [--sdk] [--upstream stdio|http] [--endpoint server|aggregate]
#                                [--out DIR] [--quiet] [-- SUITE-ARGS...]
#                                                  the fixture (--sdk: the SDK v2 reference server)
#                                                  behind ahp-proxy (a stdio child, or an HTTP
#                                                  server), the suite on /mcp/conformance (server)
#                                                  or /mcp (aggregate)
#
# `server` and `client` select `--requirements 2025-11-25` (the frozen scenario set of MCP
# 2025-11-25, run at the 2025-11-25 wire: ahp-proxy's protocol version) unless SUITE-ARGS carry
# --scenario, --suite, --spec-version or --requirements (`-- --requirements 2026-07-28`: the
# 2026-07-28 set, which of the servers here only the --sdk reference server passes). Their
# results go to DIR (default: a new temporary directory): suite.log,
# results/[server-]<scenario>-<time>/checks.json and summary.json. stdout gets one PASS/FAIL
# line per scenario with the failed and warning checks, then, last, `AHP-CONFORMANCE {json}` (the
# summary on one line). The suite's own output goes to stderr unless --quiet.
# Exit: 0 every scenario passed, 1 a scenario failed, 2 the suite did not run. With
# `-- --expected-failures FILE` (the suite's baseline, see conformance-tools/expected-failures/)
# the exit code is the suite's: 0 when exactly the listed scenarios fail.
#
# Environment:
#   AHP_PROXY_TOOLS          cache root (default: $HOME/.cache/ahp-proxy-tools)
#   AHP_CONFORMANCE_REQUIREMENTS  default requirement set (default: 2025-11-25)
#   AHP_CONFORMANCE_PORTS    LOW-HIGH range `reference` and `proxy` pick ports from (default: any
#                            free)
#   AHP_PROXY_BIN_DIR        where ahp-proxy and ahp-proxy-example-server are (default: the
#                            repository's target/debug; built with cargo when missing there)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tools_src="$here/conformance-tools"
repo="$(cd "$here/.." && pwd)"
BIN_DIR="${AHP_PROXY_BIN_DIR:-$repo/target/debug}"
REQUIREMENTS="${AHP_CONFORMANCE_REQUIREMENTS:-2025-11-25}"

die() { echo "conformance.sh: $*" >&2; exit 2; }

# node_bin, install_locked, json_str, json_argv.
. "$here/tools-cache.sh"

# Installs the locked packages into $TOOLS/conformance-<hash>/ once; prints that dir.
install_tools() { install_locked conformance "$tools_src" loopback.mjs; }

conformance_js() { echo "$1/node_modules/@modelcontextprotocol/conformance/dist/index.js"; }
everything_js() { echo "$1/node_modules/@modelcontextprotocol/server-everything/dist/index.js"; }
# The project's reference server for the suite on the TypeScript SDK v2, dual-era
# (era-tools/reference-server.mjs from scripts/era.sh, installed when missing): its path.
sdk_reference_js() {
  local era
  era="$("$here/era.sh" install)" || die "scripts/era.sh install failed"
  echo "$era/reference-server.mjs"
}

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

# The path of one of the project's binaries; built with cargo when it is missing from the
# repository's own target/debug.
project_bin() {
  local bin="$BIN_DIR/$1"
  if [[ ! -x "$bin" && "$BIN_DIR" == "$repo/target/debug" ]]; then
    echo "conformance.sh: building $1 (cargo build --bin $1)" >&2
    (cd "$repo" && cargo build --quiet --bin "$1" >&2) || die "cargo build --bin $1 failed"
  fi
  [[ -x "$bin" ]] || die "no $bin (set AHP_PROXY_BIN_DIR)"
  echo "$bin"
}

# Process groups this script started (`start_group`), stopped by `stop_groups` and nothing else.
STARTED=()
start_group() { # LOG CMD...: CMD in its own process group, output to LOG; pid in STARTED_PID
  setsid "${@:2}" >"$1" 2>&1 </dev/null &
  STARTED_PID=$!
  STARTED+=("$STARTED_PID")
  trap stop_groups EXIT
}

stop_groups() {
  local pid i
  for pid in "${STARTED[@]+"${STARTED[@]}"}"; do
    kill -TERM -- "-$pid" 2>/dev/null || true
  done
  for pid in "${STARTED[@]+"${STARTED[@]}"}"; do
    for i in $(seq 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL -- "-$pid" 2>/dev/null || true
  done
  STARTED=()
}

# N distinct free ports, one a line.
free_ports() {
  local node="$1" n="$2" port seen=" "
  while ((n > 0)); do
    port="$(free_port "$node")"
    [[ "$seen" == *" $port "* ]] && continue
    seen+="$port "
    echo "$port"
    n=$((n - 1))
  done
}

# run_suite server|client ARGS...: the suite's server scenarios against --url URL, or its client
# scenarios with --command CMD (--sdk-client: the SDK v2 client, era-tools/reference-client.mjs)
# as the client under test; the summary as described at the top.
run_suite() {
  local mode="$1" target="" out="" quiet=0 sdk_client=0
  shift
  while (($#)); do
    case "$mode:$1" in
      server:--url | client:--command) target="$2"; shift 2 ;;
      server:--url=* | client:--command=*) target="${1#*=}"; shift ;;
      client:--sdk-client) sdk_client=1; shift ;;
      client:--through-proxy)
        target="$here/conformance.sh proxy-client"
        AHP_CONFORMANCE_NODE="$(node_bin)"
        AHP_CONFORMANCE_ERA="$("$here/era.sh" install)" || die "scripts/era.sh install failed"
        project_bin ahp-proxy >/dev/null
        export AHP_CONFORMANCE_NODE AHP_CONFORMANCE_ERA
        shift ;;
      *:--out) out="$2"; shift 2 ;;
      *:--out=*) out="${1#*=}"; shift ;;
      *:--quiet) quiet=1; shift ;;
      *:--) shift; break ;;
      *) die "$mode: unknown option $1 (suite options go after --)" ;;
    esac
  done
  local extra=("$@")
  has_selection "${extra[@]+"${extra[@]}"}" || extra=(--requirements "$REQUIREMENTS" "${extra[@]+"${extra[@]}"}")

  local node dir js
  node="$(node_bin)"
  dir="$(install_tools)"
  js="$(conformance_js "$dir")"
  if ((sdk_client)); then
    local era
    era="$("$here/era.sh" install)" || die "scripts/era.sh install failed"
    target="$node $era/reference-client.mjs"
  fi
  [[ -n "$target" ]] || die "$mode: --url, --command or --sdk-client is required"
  if [[ -z "$out" ]]; then
    out="$(mktemp -d "${TMPDIR:-/tmp}/ahp-conformance.XXXXXX")"
  else
    mkdir -p "$out"
    rm -rf "$out/results" "$out/suite.log" "$out/summary.json" "$out/meta.json"
  fi

  local version start end rc=0 argv
  version="$("$node" -e 'console.log(require(process.argv[1]).version)' \
    "$dir/node_modules/@modelcontextprotocol/conformance/package.json")"
  if [[ "$mode" == server ]]; then
    argv=("$node" "$js" server --url "$target" -o "$out/results" "${extra[@]}")
  else
    # The suite splits the command at spaces and appends its mock server's URL.
    argv=("$node" "$js" client --command "$target" -o "$out/results" "${extra[@]}")
  fi
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
  "$([[ $mode == server ]] && echo url || echo command)": $(json_str "$node" "$target"),
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

cmd_server() { run_suite server "$@"; }

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

cmd_fixture() {
  local bin
  bin="$(project_bin ahp-proxy-example-server)"
  case "${1:-}" in
    --stdio) exec "$bin" conformance ;;
    --http)
      [[ -n "${2:-}" ]] || die "fixture --http PORT"
      exec "$bin" conformance --http "127.0.0.1:$2"
      ;;
    *) die "fixture --stdio | --http PORT" ;;
  esac
}

cmd_reference() {
  local server_cmd="" path="/mcp" out="" quiet=() pass=() everything=0 sdk=0
  while (($#)); do
    case "$1" in
      --server-cmd) server_cmd="$2"; shift 2 ;;
      --server-cmd=*) server_cmd="${1#*=}"; shift ;;
      --everything) everything=1; shift ;;
      --sdk) sdk=1; shift ;;
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
  if [[ -z "$server_cmd" ]] && ((sdk)); then
    local js
    js="$(sdk_reference_js)"
    server_cmd="exec $(printf '%q ' "$node" "$js" --http "$port")"
  elif [[ -z "$server_cmd" ]] && ((everything)); then
    server_cmd="exec $(printf '%q ' "$node" --import "file://$dir/loopback.mjs" \
      "$(everything_js "$dir")" streamableHttp)"
  elif [[ -z "$server_cmd" ]]; then
    server_cmd="exec $(printf '%q ' "$(project_bin ahp-proxy-example-server)" conformance \
      --http "127.0.0.1:$port")"
  fi
  server_cmd="${server_cmd//\{port\}/$port}"
  [[ -n "$out" ]] || out="$(mktemp -d "${TMPDIR:-/tmp}/ahp-conformance.XXXXXX")"
  mkdir -p "$out"
  local log="$out/server.log"
  echo "conformance.sh: starting the server on 127.0.0.1:$port (log: $log)" >&2
  # Its own process group, so that stopping it stops whatever it started.
  PORT="$port" start_group "$log" bash -c "$server_cmd"
  if ! wait_port "$port" 30 "$STARTED_PID"; then
    cat "$log" >&2
    die "the server did not listen on 127.0.0.1:$port"
  fi
  local rc=0
  cmd_server --url "http://127.0.0.1:$port$path" --out "$out" "${quiet[@]+"${quiet[@]}"}" \
    -- "${pass[@]+"${pass[@]}"}" || rc=$?
  stop_groups
  return "$rc"
}

# Wait until LOG says the proxy's server NAME is ready (JSON or text logs, colours or not).
wait_ready() { # LOG NAME TIMEOUT_S PID
  local deadline=$((SECONDS + $3))
  while ((SECONDS < deadline)); do
    if sed 's/\x1b\[[0-9;]*m//g' "$1" 2>/dev/null | grep "server ready" |
      grep -qE "(server|name)[=\":]+$2([^A-Za-z0-9_.-]|$)"; then
      return 0
    fi
    kill -0 "$4" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

cmd_proxy() {
  local upstream=stdio endpoint=server out="" quiet=() pass=() sdk=0
  while (($#)); do
    case "$1" in
      --sdk) sdk=1; shift ;;
      --upstream) upstream="$2"; shift 2 ;;
      --upstream=*) upstream="${1#*=}"; shift ;;
      --endpoint) endpoint="$2"; shift 2 ;;
      --endpoint=*) endpoint="${1#*=}"; shift ;;
      --out) out="$2"; shift 2 ;;
      --out=*) out="${1#*=}"; shift ;;
      --quiet) quiet=(--quiet); shift ;;
      --) shift; pass=("$@"); break ;;
      *) die "proxy: unknown option $1" ;;
    esac
  done
  [[ "$upstream" == stdio || "$upstream" == http ]] || die "proxy: --upstream stdio|http"
  [[ "$endpoint" == server || "$endpoint" == aggregate ]] || die "proxy: --endpoint server|aggregate"
  local node proxy ports ahp_port mcp_port up_port bin fixture=()
  node="$(node_bin)"
  install_tools >/dev/null
  proxy="$(project_bin ahp-proxy)"
  # The upstream: the project's fixture, or (--sdk) the SDK v2 reference server; stdio with no
  # further argument, HTTP with --http ADDR or PORT.
  if ((sdk)); then
    bin="$(sdk_reference_js)"
    fixture=("$node" "$bin")
  else
    bin="$(project_bin ahp-proxy-example-server)"
    fixture=("$bin" conformance)
  fi
  mapfile -t ports < <(free_ports "$node" 3)
  ahp_port="${ports[0]}" mcp_port="${ports[1]}" up_port="${ports[2]}"
  [[ -n "$out" ]] || out="$(mktemp -d "${TMPDIR:-/tmp}/ahp-conformance.XXXXXX")"
  mkdir -p "$out"
  if [[ "$upstream" == http ]]; then
    echo "conformance.sh: starting the fixture on 127.0.0.1:$up_port (log: $out/fixture.log)" >&2
    if ((sdk)); then
      start_group "$out/fixture.log" "${fixture[@]}" --http "$up_port"
    else
      start_group "$out/fixture.log" "${fixture[@]}" --http "127.0.0.1:$up_port"
    fi
    wait_port "$up_port" 30 "$STARTED_PID" || die "the fixture did not listen on $up_port"
    printf '[servers.conformance]\nurl = "http://127.0.0.1:%s/mcp"\n' "$up_port" >"$out/proxy.toml"
  else
    local args=("${fixture[@]:1}")
    ((sdk)) && args+=(--stdio)
    printf '[servers.conformance]\ncommand = %s\nargs = %s\n' "$(json_str "$node" "${fixture[0]}")" \
      "$(json_argv "$node" "${args[@]}")" >"$out/proxy.toml"
  fi
  echo "conformance.sh: starting ahp-proxy, MCP on 127.0.0.1:$mcp_port (log: $out/proxy.log)" >&2
  start_group "$out/proxy.log" "$proxy" --log-format json --config "$out/proxy.toml" serve \
    --listen "127.0.0.1:$ahp_port" --mcp-listen "127.0.0.1:$mcp_port"
  local proxy_pid="$STARTED_PID"
  wait_port "$mcp_port" 30 "$proxy_pid" || { cat "$out/proxy.log" >&2; die "the proxy did not listen"; }
  wait_ready "$out/proxy.log" conformance 30 "$proxy_pid" ||
    echo "conformance.sh: no 'server ready' for conformance in the proxy log; going on" >&2
  local url="http://127.0.0.1:$mcp_port/mcp"
  [[ "$endpoint" == server ]] && url+="/conformance"
  local rc=0
  cmd_server --url "$url" --out "$out" "${quiet[@]+"${quiet[@]}"}" \
    -- "${pass[@]+"${pass[@]}"}" || rc=$?
  stop_groups
  return "$rc"
}

# ahp-proxy as the client under test: the suite's mock server at URL is its HTTP server
# `conformance`, and the SDK v2 reference client (the scenario's environment passed on) drives
# it on /mcp/conformance.
cmd_proxy_client() {
  local url="${1:-}" node era proxy out rc=0 mcp="" deadline
  [[ -n "$url" ]] || die "proxy-client URL"
  # Set once by `client --through-proxy`: the suite gives each client 30 s, and every node
  # start counts on a loaded machine.
  node="${AHP_CONFORMANCE_NODE:-$(node_bin)}"
  era="${AHP_CONFORMANCE_ERA:-$("$here/era.sh" install)}" || die "scripts/era.sh install failed"
  proxy="$(project_bin ahp-proxy)"
  out="$(mktemp -d "${TMPDIR:-/tmp}/ahp-conformance-client.XXXXXX")"
  printf '[servers.conformance]\nurl = "%s"\n' "${url//\"/}" >"$out/proxy.toml"
  echo "conformance.sh: ahp-proxy in front of $url (log: $out/proxy.log)" >&2
  # OS-chosen ports; the MCP one read from the proxy's log.
  start_group "$out/proxy.log" "$proxy" --log-format json --config "$out/proxy.toml" serve \
    --listen 127.0.0.1:0 --mcp-listen 127.0.0.1:0
  local proxy_pid="$STARTED_PID"
  deadline=$((SECONDS + 30))
  while [[ -z "$mcp" ]] && ((SECONDS < deadline)) && kill -0 "$proxy_pid" 2>/dev/null; do
    mcp="$(grep -o '"MCP endpoint listening","addr":"[^"]*"' "$out/proxy.log" | head -1 | sed 's/.*"addr":"//; s/"$//' || true)"
    [[ -n "$mcp" ]] || sleep 0.1
  done
  [[ -n "$mcp" ]] || { cat "$out/proxy.log" >&2; die "the proxy did not listen"; }
  wait_ready "$out/proxy.log" conformance 30 "$proxy_pid" ||
    echo "conformance.sh: no 'server ready' for conformance in the proxy log; going on" >&2
  "$node" "$era/reference-client.mjs" "http://$mcp/mcp/conformance" || rc=$?
  stop_groups
  # The suite starts one of these per scenario: a passing one leaves nothing behind, a failing
  # one keeps its folder (the proxy's log) and says where.
  if ((rc == 0)); then
    rm -rf "$out"
  else
    echo "conformance.sh: the client through ahp-proxy failed ($rc); kept $out" >&2
  fi
  return "$rc"
}

cmd_commands() {
  local node dir js ev lb fx
  node="$(node_bin)"
  dir="$(install_tools)"
  js="$(conformance_js "$dir")"
  ev="$(everything_js "$dir")"
  lb="file://$dir/loopback.mjs"
  # The fixture's path, without building it (commands only prints).
  fx="$BIN_DIR/ahp-proxy-example-server"
  if [[ "${1:-}" == --json ]]; then
    cat <<EOF
{"node": $(json_str "$node" "$node"),
 "conformance": $(json_argv "$node" "$node" "$js" server --url "http://127.0.0.1:<port>/mcp" --requirements "$REQUIREMENTS"),
 "everything_stdio": $(json_argv "$node" "$node" "$ev" stdio),
 "everything_http": {"argv": $(json_argv "$node" "$node" --import "$lb" "$ev" streamableHttp), "env": {"PORT": "<port>"}, "url": "http://127.0.0.1:<port>/mcp"},
 "fixture_stdio": $(json_argv "$node" "$fx" conformance),
 "fixture_http": {"argv": $(json_argv "$node" "$fx" conformance --http "127.0.0.1:<port>"), "url": "http://127.0.0.1:<port>/mcp"}}
EOF
    return
  fi
  cat <<EOF
# Conformance suite, server scenarios (streamable HTTP only):
$node $js server --url http://127.0.0.1:<port>/mcp --requirements $REQUIREMENTS -o <dir>

# The project's fixture (the suite's reference server) over stdio, e.g. as a proxy child:
$fx conformance
#   proxy.toml:
#   [servers.conformance]
#   command = "$fx"
#   args = ["conformance"]

# The fixture over streamable HTTP at http://127.0.0.1:<port>/mcp:
$fx conformance --http 127.0.0.1:<port>

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
  client) shift; run_suite client "$@" ;;
  proxy-client) shift; cmd_proxy_client "$@" ;;
  everything) shift; cmd_everything "$@" ;;
  reference) shift; cmd_reference "$@" ;;
  fixture) shift; cmd_fixture "$@" ;;
  proxy) shift; cmd_proxy "$@" ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
