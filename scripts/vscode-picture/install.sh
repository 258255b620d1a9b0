#!/usr/bin/env bash
# One-time installs for scripts/vscode-picture/shoot.mjs (the VS Code pictures in
# docs/approvals.md), into a tools folder outside the repository:
#
#   - Node.js 24.21.0: the npm package node-linux-<arch>@24.21.0 (the official binary as
#     bin/node; code-server 4.139.1 needs Node 24, and its native modules are built for it)
#   - code-server 4.139.1 (= VS Code 1.139.1, browser build) from npm, installed with
#     --ignore-scripts and then its own postinstall run with Node 24 on PATH (that is
#     `npm install` in lib/vscode and lib/vscode/extensions; it builds native modules and
#     needs libkrb5-dev) and npm_config_nodedir naming that Node's own headers (the package
#     carries them in include/node), so that an npm configured for another Node (a `nodedir`
#     in ~/.npmrc, say the system's Node 20 in /usr) does not build them against its headers
#   - puppeteer-core 24.43.1 from npm, to drive the browser
#   - from Debian (apt-get, as root): chromium and libkrb5-dev, when missing
#
#   scripts/vscode-picture/install.sh      # prints the tools folder at the end
#
# Environment: VSCODE_PICTURE_TOOLS, the tools folder (default
# $HOME/.cache/ahp-proxy-tools/vscode-picture); CHROMIUM, the browser (default /usr/bin/chromium).
set -euo pipefail

NODE_VERSION=24.21.0
CODE_SERVER_VERSION=4.139.1
PUPPETEER_VERSION=24.43.1
TOOLS="${VSCODE_PICTURE_TOOLS:-$HOME/.cache/ahp-proxy-tools/vscode-picture}"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"

die() { echo "install.sh: $*" >&2; exit 2; }

missing=()
[[ -x "$CHROMIUM" ]] || missing+=(chromium)
dpkg -s libkrb5-dev >/dev/null 2>&1 || missing+=(libkrb5-dev)
if (( ${#missing[@]} )); then
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
    apt-get update
    apt-get install -y "${missing[@]}"
  else
    die "install ${missing[*]} first (Debian: apt-get install -y ${missing[*]})"
  fi
fi

case "$(uname -m)" in
  x86_64) arch=x64 ;;
  aarch64 | arm64) arch=arm64 ;;
  *) die "no Node.js package for $(uname -m)" ;;
esac
[[ "$(uname -s)" == Linux ]] || die "Linux only (code-server's native modules are built here)"
command -v npm >/dev/null || die "npm is needed once, to fetch Node.js $NODE_VERSION"

mkdir -p "$TOOLS"
cd "$TOOLS"
stamp="node-$NODE_VERSION code-server-$CODE_SERVER_VERSION puppeteer-core-$PUPPETEER_VERSION"
if [[ -f .installed && "$(cat .installed)" == "$stamp" ]]; then
  echo "$TOOLS"
  exit 0
fi
rm -f .installed

npm install --no-audit --no-fund --save-exact "node-linux-$arch@$NODE_VERSION" >&2
export PATH="$TOOLS/node_modules/node-linux-$arch/bin:$PATH"
export npm_config_nodedir="$TOOLS/node_modules/node-linux-$arch"
[[ -f "$npm_config_nodedir/include/node/node_version.h" ]] || die "no Node.js headers in $npm_config_nodedir/include/node"
[[ "$(node --version)" == "v$NODE_VERSION" ]] || die "node on PATH is $(node --version), not v$NODE_VERSION"

npm install --no-audit --no-fund --save-exact --ignore-scripts \
  "code-server@$CODE_SERVER_VERSION" "puppeteer-core@$PUPPETEER_VERSION" >&2
(cd node_modules/code-server && npm run postinstall) >&2

echo "$stamp" > .installed
echo "$TOOLS"
