#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for the tests, from Debian's `postgresql`
# package: `pg-cluster.sh start DIR` makes one in DIR (say, from `mktemp -d`),
# listening on 127.0.0.1 at a free port and on a Unix socket in DIR, and
# prints its URL; `pg-cluster.sh stop DIR` stops it and removes DIR.
# PostgreSQL refuses to run as root, so as root the cluster runs as the
# package's `postgres` user. Authentication is `trust`: it listens on the
# loopback only and lives as long as the test run.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$bin" ] && [ -x "$bin/initdb" ] || die "PostgreSQL is missing (Debian package postgresql)"

as_cluster_user() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "${1:-}" in
  start)
    dir=${2:?usage: pg-cluster.sh start DIR}
    mkdir -p "$dir"
    if [ "$(id -u)" = 0 ]; then chown postgres: "$dir"; fi
    port=$(free_port)
    as_cluster_user "$bin/initdb" -D "$dir/data" -U runcell --auth=trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 \
      || { cat "$dir/initdb.log" >&2; die "initdb failed"; }
    as_cluster_user "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start \
      -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=200" >/dev/null \
      || { cat "$dir/server.log" >&2; die "PostgreSQL did not start"; }
    echo "postgres://runcell@127.0.0.1:$port/postgres"
    ;;
  stop)
    dir=${2:?usage: pg-cluster.sh stop DIR}
    if [ -d "$dir/data" ]; then
      as_cluster_user "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
  *) die "usage: pg-cluster.sh start|stop DIR" ;;
esac
