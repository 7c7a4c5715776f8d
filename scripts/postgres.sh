#!/usr/bin/env bash
# A local PostgreSQL cluster for kiln's shared journal (--store), started
# without systemd: for trying workers on one machine and for the README's
# example. Idempotent: `start` on a running cluster only prints its URL.
#
#   scripts/postgres.sh [start|stop|status|url]
#
#   KILN_PG_DIR   cluster folder (default /var/lib/kiln-pg): data/, run/ (socket), log
#   KILN_PG_PORT  TCP port on 127.0.0.1 (default 5432)
#   KILN_PG_DB    database created for kiln (default kiln)
#
# The server listens on loopback and on a unix socket in $KILN_PG_DIR/run,
# with trust authentication for local connections only: a test and
# rehearsal cluster, not a production one (docs/store.md says how to run that).
set -euo pipefail

dir=${KILN_PG_DIR:-/var/lib/kiln-pg}
port=${KILN_PG_PORT:-5432}
db=${KILN_PG_DB:-kiln}
cmd=${1:-start}

bindir=${KILN_PG_BINDIR:-}
if [ -z "$bindir" ]; then
  bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)
fi
if [ -z "$bindir" ] || [ ! -x "$bindir/pg_ctl" ]; then
  echo "postgres: no PostgreSQL server under /usr/lib/postgresql/*/bin (scripts/setup.sh installs it)" >&2
  exit 1
fi

# PostgreSQL refuses to run as root: run its tools as the postgres user.
if [ "$(id -u)" -eq 0 ]; then
  owner=postgres
  as_owner() { runuser -u postgres -- "$@"; }
else
  owner=$(id -un)
  as_owner() { "$@"; }
fi

url="postgresql://postgres@127.0.0.1:$port/$db"
pg_ctl() { as_owner "$bindir/pg_ctl" -D "$dir/data" "$@"; }
running() { [ -f "$dir/data/postmaster.pid" ] && pg_ctl status >/dev/null 2>&1; }

case "$cmd" in
  start)
    if [ ! -f "$dir/data/PG_VERSION" ]; then
      mkdir -p "$dir/run"
      chown "$owner" "$dir" "$dir/run"
      chmod 0700 "$dir"
      as_owner "$bindir/initdb" -D "$dir/data" -U postgres -A trust --no-locale -E UTF8 >"$dir/initdb.log"
      # Local connections only: the socket and loopback.
      cat >"$dir/data/pg_hba.conf" <<HBA
local all all trust
host all all 127.0.0.1/32 trust
host all all ::1/128 trust
HBA
      chown "$owner" "$dir/data/pg_hba.conf"
    fi
    if ! running; then
      # -w -t: a bounded wait until the server accepts connections.
      pg_ctl -w -t 60 -l "$dir/server.log" \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir/run -c max_connections=200" start >/dev/null
    fi
    if [ "$(as_owner "$bindir/psql" -h "$dir/run" -p "$port" -U postgres -d postgres -Atc \
          "SELECT count(*) FROM pg_database WHERE datname = '$db'")" = 0 ]; then
      as_owner "$bindir/createdb" -h "$dir/run" -p "$port" -U postgres "$db"
    fi
    echo "$url"
    ;;
  stop)
    if running; then pg_ctl -m fast -w -t 60 stop >/dev/null; fi
    ;;
  status)
    if running; then echo "running: $url"; else echo "stopped"; exit 3; fi
    ;;
  url)
    echo "$url"
    ;;
  *)
    echo "usage: scripts/postgres.sh [start|stop|status|url]" >&2
    exit 2
    ;;
esac
