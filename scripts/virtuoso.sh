#!/usr/bin/env bash
# A private Virtuoso server for memq: install the Debian package, start, bulk-load, stop.
#
#   scripts/virtuoso.sh install                 # apt-get install virtuoso-opensource if virtuoso-t is missing
#   scripts/virtuoso.sh start DB_DIR [--http-port N] [--isql-port N] [--memory-gb G] [--max-rows N]
#   scripts/virtuoso.sh load  DB_DIR FILE.nq.gz [--graph IRI]
#   scripts/virtuoso.sh stop  DB_DIR
#
# start writes DB_DIR/virtuoso.ini (127.0.0.1 only, free ports unless given), starts virtuoso-t
# in the background (no system service), waits until SPARQL answers and prints the endpoint URL.
# load bulk-loads with ld_dir + rdf_loader_run; stop shuts the server down. See docs/virtuoso.md.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-}"
if [[ -z "$PYTHON" ]]; then
  if [[ -x "$here/.venv/bin/python" ]]; then PYTHON="$here/.venv/bin/python"; else PYTHON=python3; fi
fi
PACKAGES="${MEMQ_VIRTUOSO_PACKAGES:-virtuoso-opensource}"

install() {
  if command -v virtuoso-t >/dev/null && command -v isql-vt >/dev/null; then
    echo "virtuoso: $(virtuoso-t -? 2>&1 | sed -n 2p)"
    return 0
  fi
  local sudo=""
  if [[ "$(id -u)" != 0 ]]; then sudo="sudo"; fi
  # an empty or stale package list has no candidate: update it once
  if ! apt-cache policy virtuoso-opensource 2>/dev/null | grep -q 'Candidate: [0-9]'; then
    $sudo apt-get update -qq
  fi
  # the package's own service start is refused in containers (policy-rc.d) and not needed:
  # memq runs its own server on free ports with its own database directory
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q $PACKAGES
  command -v virtuoso-t >/dev/null && command -v isql-vt >/dev/null
}

cmd="${1:-}"
case "$cmd" in
  install)
    install ;;
  start|load|stop)
    [[ "$cmd" == start ]] && install >/dev/null
    cd "$here"
    exec "$PYTHON" -m memq.kg.virtuoso "$@" ;;
  *)
    sed -n '2,11p' "$0" >&2
    exit 2 ;;
esac
