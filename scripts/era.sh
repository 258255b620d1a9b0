#!/usr/bin/env bash
# The official MCP TypeScript SDKs of both eras, pinned, and the test servers and client driver
# built on them (scripts/era-tools/), for ahp-proxy's era tests.
#
#   scripts/era.sh install              install the pinned SDKs (once per lockfile) and the era
#                                       scripts (once per content); print the scripts' folder
#   scripts/era.sh commands [--json]    exact command lines: the driver, every server kind over
#                                       stdio and over streamable HTTP
#   scripts/era.sh server KIND --stdio | --http PORT
#                                       run a server in the foreground; KIND is one of
#                                         legacy          SDK v1 1.32.2, 2025-11-25 only (HTTP: sessions)
#                                         dual            SDK v2 2.4.0, both eras (HTTP: legacy on sessions)
#                                         dual-stateless  SDK v2, both eras, HTTP legacy stateless (the
#                                                         SDK's default; over stdio the same as dual)
#                                         modern          SDK v2, 2026-07-28 only
#                                         conformance     a reference server for the conformance suite
#                                                         on SDK v2, both eras (reference-server.mjs)
#                                       HTTP: http://127.0.0.1:PORT/mcp; PORT 0 lets the OS pick, and
#                                       the server prints `AHP-ERA-LISTENING <url>` on stdout
#   scripts/era.sh drive DRIVER-ARGS... the client driver (see era-tools/driver.mjs):
#                                       --sdk v1|v2 --mode legacy|modern|auto
#                                       (--url URL | --command CMD ARGS...) --scenario NAME[,NAME]|all
#
# Environment: AHP_PROXY_TOOLS, the cache root (default: $HOME/.cache/ahp-proxy-tools).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tools_src="$here/era-tools"

die() { echo "era.sh: $*" >&2; exit 2; }

# node_bin, install_locked, copy_scripts, json_str, json_argv.
. "$here/tools-cache.sh"

SCRIPTS=(common.mjs v2-serving.mjs era-server.mjs legacy-server.mjs reference-fixture.mjs reference-server.mjs reference-client.mjs driver.mjs)

# The folder holding the era scripts, beside the installed packages.
install_era() {
  local dir
  dir="$(install_locked era "$tools_src")"
  copy_scripts "$dir" "$tools_src" "${SCRIPTS[@]}"
}

# server_argv DIR KIND stdio|http NODE: the command line of one server in ARGV (HTTP: the port as
# `<port>`).
server_argv() {
  local dir="$1" kind="$2" transport="$3" node="$4" tail
  if [[ "$transport" == stdio ]]; then tail=(--stdio); else tail=(--http "<port>"); fi
  case "$kind" in
    legacy) ARGV=("$node" "$dir/legacy-server.mjs" "${tail[@]}") ;;
    dual) ARGV=("$node" "$dir/era-server.mjs" "${tail[@]}") ;;
    dual-stateless)
      ARGV=("$node" "$dir/era-server.mjs" "${tail[@]}")
      [[ "$transport" == stdio ]] || ARGV+=(--legacy-http stateless)
      ;;
    modern) ARGV=("$node" "$dir/era-server.mjs" "${tail[@]}" --modern-only) ;;
    conformance) ARGV=("$node" "$dir/reference-server.mjs" "${tail[@]}") ;;
    *) die "unknown server kind $kind (legacy, dual, dual-stateless, modern, conformance)" ;;
  esac
}

KINDS=(legacy dual dual-stateless modern conformance)

cmd_commands() {
  local node dir kind t argv
  node="$(node_bin)"
  dir="$(install_era)"
  if [[ "${1:-}" == --json ]]; then
    printf '{"node": %s,\n "dir": %s,\n "driver": %s,\n "servers": {' "$(json_str "$node" "$node")" \
      "$(json_str "$node" "$dir")" "$(json_argv "$node" "$node" "$dir/driver.mjs")"
    local sep=""
    for kind in "${KINDS[@]}"; do
      printf '%s\n  %s: {' "$sep" "$(json_str "$node" "$kind")"
      local tsep=""
      for t in stdio http; do
        server_argv "$dir" "$kind" "$t" "$node"
        printf '%s%s: %s' "$tsep" "$(json_str "$node" "$t")" "$(json_argv "$node" "${ARGV[@]}")"
        tsep=", "
      done
      printf '}'
      sep=","
    done
    printf '},\n "url": "http://127.0.0.1:<port>/mcp"}\n'
    return
  fi
  echo "# The client driver (one JSON line per scenario on stdout):"
  echo "$(printf '%q ' "$node" "$dir/driver.mjs")--sdk v1|v2 --mode legacy|modern|auto (--url URL | --command CMD ARGS...) --scenario all"
  for kind in "${KINDS[@]}"; do
    echo
    echo "# $kind server over stdio, then over streamable HTTP at http://127.0.0.1:<port>/mcp:"
    for t in stdio http; do
      server_argv "$dir" "$kind" "$t" "$node"
      printf '%q ' "${ARGV[@]}" | sed 's/\\<port\\>/<port>/g'
      echo
    done
  done
}

cmd_server() {
  local kind="${1:-}" node dir
  shift || true
  node="$(node_bin)"
  dir="$(install_era)"
  case "${1:-}" in
    --stdio) server_argv "$dir" "$kind" stdio "$node" ;;
    --http)
      [[ -n "${2:-}" ]] || die "server KIND --http PORT"
      server_argv "$dir" "$kind" http "$node"
      ARGV=("${ARGV[@]/<port>/$2}")
      ;;
    *) die "server KIND --stdio | --http PORT" ;;
  esac
  exec "${ARGV[@]}"
}

cmd_drive() {
  local node dir
  node="$(node_bin)"
  dir="$(install_era)"
  exec "$node" "$dir/driver.mjs" "$@"
}

case "${1:-}" in
  install) install_era ;;
  commands) shift; cmd_commands "$@" ;;
  server) shift; cmd_server "$@" ;;
  drive) shift; cmd_drive "$@" ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
