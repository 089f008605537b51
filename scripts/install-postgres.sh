#!/usr/bin/env bash
# Installs a PostgreSQL server and the pgvector extension for the pgvector store tests
# (test/store/store-pgvector.test.ts starts its own throwaway server; nothing is started here).
#
# Debian 13 (trixie, PostgreSQL 17): apt has postgresql-17-pgvector, so it is installed.
# Debian 12 (bookworm, PostgreSQL 15): apt has no pgvector package, so pgvector is built
# from Debian's source tarball against postgresql-server-dev-15 (about 20 s).
#
# Idempotent: when vector.control is already in the server's extension directory it does
# nothing. Runs as root, or through sudo otherwise. Needs only deb.debian.org.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

PGVECTOR_VERSION="${PGVECTOR_VERSION:-0.8.0}"
PGVECTOR_URL="http://deb.debian.org/debian/pool/main/p/pgvector/pgvector_${PGVECTOR_VERSION}.orig.tar.gz"

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

log() { echo "install-postgres: $*"; }

APT_UPDATED=""
apt_install() {
  if [ -z "$APT_UPDATED" ]; then
    $SUDO apt-get update -q
    APT_UPDATED=1
  fi
  $SUDO apt-get install -y -q --no-install-recommends "$@"
}

# Highest major version NN with a server binary in /usr/lib/postgresql/NN/bin (empty if none).
server_major() {
  local bin
  for bin in /usr/lib/postgresql/*/bin/postgres; do
    if [ -x "$bin" ]; then basename "$(dirname "$(dirname "$bin")")"; fi
  done | sort -n | tail -n 1
}

# True when apt knows a package by this exact name.
apt_has() {
  apt-cache show "$1" >/dev/null 2>&1
}

major="$(server_major)"
if [ -z "$major" ]; then
  log "no PostgreSQL server found in /usr/lib/postgresql/*/bin; installing postgresql"
  apt_install postgresql
  major="$(server_major)"
  if [ -z "$major" ]; then
    echo "install-postgres: postgresql installed but no /usr/lib/postgresql/*/bin/postgres found" >&2
    exit 1
  fi
fi
bindir="/usr/lib/postgresql/${major}/bin"
log "PostgreSQL ${major} in ${bindir}"

# The extension directory of this server (sharedir/extension).
extension_dir() {
  if [ -x "${bindir}/pg_config" ]; then
    echo "$("${bindir}/pg_config" --sharedir)/extension"
  else
    echo "/usr/share/postgresql/${major}/extension"
  fi
}

if [ -f "$(extension_dir)/vector.control" ]; then
  log "pgvector already installed ($(extension_dir)/vector.control); nothing to do"
  exit 0
fi

# apt-cache needs fresh lists to know the package; update once before looking.
if [ -z "$APT_UPDATED" ]; then
  $SUDO apt-get update -q
  APT_UPDATED=1
fi

if apt_has "postgresql-${major}-pgvector"; then
  log "installing postgresql-${major}-pgvector from apt"
  apt_install "postgresql-${major}-pgvector"
else
  log "apt has no postgresql-${major}-pgvector; building pgvector ${PGVECTOR_VERSION} from source"
  apt_install "postgresql-server-dev-${major}" make gcc libc6-dev ca-certificates curl
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  curl -fsSL --retry 3 -o "${work}/pgvector.tar.gz" "$PGVECTOR_URL"
  tar -xzf "${work}/pgvector.tar.gz" -C "$work"
  src="$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'pgvector*' | head -n 1)"
  if [ -z "$src" ]; then
    echo "install-postgres: ${PGVECTOR_URL} did not unpack into a pgvector-* directory" >&2
    exit 1
  fi
  # OPTFLAGS="": no -march=native, so the library also runs on another CPU of the same
  # architecture. with_llvm=no: skip the JIT bitcode (it would need clang).
  make -C "$src" -j "$(nproc)" PG_CONFIG="${bindir}/pg_config" OPTFLAGS="" with_llvm=no >/dev/null
  $SUDO make -C "$src" PG_CONFIG="${bindir}/pg_config" OPTFLAGS="" with_llvm=no install >/dev/null
fi

if [ ! -f "$(extension_dir)/vector.control" ]; then
  echo "install-postgres: pgvector install finished but $(extension_dir)/vector.control is missing" >&2
  exit 1
fi
log "pgvector installed for PostgreSQL ${major} ($(extension_dir)/vector.control)"
