# Sourced by scripts/conformance.sh and scripts/era.sh: the pinned Node (scripts/node.sh) and npm
# packages installed from a committed lockfile into the tools cache, once per content hash.
#
# The sourcing script sets `here` (the scripts folder) and `die` (prints an error, exits 2).
# Environment: AHP_PROXY_TOOLS, the cache root (default: $HOME/.cache/ahp-proxy-tools).

TOOLS="${AHP_PROXY_TOOLS:-$HOME/.cache/ahp-proxy-tools}"

# The pinned node binary (Node >= 22).
node_bin() {
  local dir
  dir="$("$here/node.sh")" || die "no Node.js >= 22 (scripts/node.sh failed)"
  echo "$dir/node"
}

# The first 12 hex digits of the sha256 of the named files' contents, in order.
content_hash() {
  cat "$@" | sha256sum | cut -c1-12
}

# install_locked NAME SRC FILE...: `npm ci` of SRC/package.json and SRC/package-lock.json, with
# SRC/FILE... copied beside them, into $TOOLS/NAME-<hash of those files>/ unless it is there
# already; prints that directory. One installer at a time (flock); the others wait and reuse it.
install_locked() {
  local name="$1" src="$2" node hash dest tmp f
  shift 2
  local files=(package.json package-lock.json "$@") paths=()
  for f in "${files[@]}"; do paths+=("$src/$f"); done
  node="$(node_bin)"
  hash="$(content_hash "${paths[@]}")"
  dest="$TOOLS/$name-$hash"
  if [[ -f "$dest/.installed" ]]; then
    echo "$dest"
    return
  fi
  mkdir -p "$TOOLS"
  exec 8>"$TOOLS/.$name.lock"
  command -v flock >/dev/null 2>&1 && flock 8
  if [[ ! -f "$dest/.installed" ]]; then
    tmp="$(mktemp -d "$TOOLS/.$name-install.XXXXXX")"
    chmod 755 "$tmp"
    cp "${paths[@]}" "$tmp/"
    echo "${0##*/}: installing the pinned $name packages into $dest" >&2
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

# copy_scripts DIR SRC FILE...: SRC/FILE... copied into DIR/s-<hash of them>/ unless there
# already (node resolves their imports from DIR/node_modules); prints that directory.
copy_scripts() {
  local dir="$1" src="$2" hash dest tmp f
  shift 2
  local paths=()
  for f in "$@"; do paths+=("$src/$f"); done
  hash="$(content_hash "${paths[@]}")"
  dest="$dir/s-$hash"
  if [[ ! -f "$dest/.copied" ]]; then
    tmp="$(mktemp -d "$dir/.s-copy.XXXXXX")"
    chmod 755 "$tmp"
    cp "${paths[@]}" "$tmp/"
    touch "$tmp/.copied"
    # Another copier may have won the race: its copy is the same.
    mv -T "$tmp" "$dest" 2>/dev/null || rm -rf "$tmp"
  fi
  echo "$dest"
}

json_str() { # NODE STRING: a JSON string literal
  local node="$1"; shift
  "$node" -e 'process.stdout.write(JSON.stringify(process.argv[1]))' "$1"
}

json_argv() { # NODE ARG...: a JSON array of the arguments
  local node="$1"; shift
  "$node" -e 'process.stdout.write(JSON.stringify(process.argv.slice(1)))' -- "$@"
}
