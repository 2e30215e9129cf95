#!/usr/bin/env bash
# Make PostgreSQL and Redis reachable on loopback for the test suite: start them
# where they are installed but stopped, install them from Debian where missing.
set -euo pipefail

PG_HOST=127.0.0.1
REDIS_PORT=6379

apt_install() {
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@"
}

wait_for() {  # wait_for <description> <command...>
  local what=$1; shift
  for _ in $(seq 1 50); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  echo "ensure-services: $what did not come up" >&2
  return 1
}

if ! pg_isready -q -h "$PG_HOST" 2>/dev/null; then
  if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
    echo "ensure-services: installing PostgreSQL"
    apt_install postgresql
  fi
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  echo "ensure-services: starting PostgreSQL $version"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  wait_for "PostgreSQL" pg_isready -q -h "$PG_HOST"
fi
# The suite connects as root over TCP; a fresh Debian install has no such role.
if ! psql -w -h "$PG_HOST" -U root -d postgres -tAc "select 1" >/dev/null 2>&1; then
  echo "ensure-services: creating the PostgreSQL role root (CREATEDB, trust on loopback)"
  su postgres -c "psql -qc \"CREATE ROLE root LOGIN SUPERUSER CREATEDB\"" || true
  hba=$(su postgres -c "psql -tAc 'show hba_file'")
  if ! grep -q "ledger-test" "$hba"; then
    sed -i "1i host all root 127.0.0.1/32 trust # ledger-test\nhost all root ::1/128 trust # ledger-test" "$hba"
    su postgres -c "psql -qc 'select pg_reload_conf()'"
  fi
fi

if ! redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping >/dev/null 2>&1; then
  command -v redis-server >/dev/null || { echo "ensure-services: installing Redis"; apt_install redis-server; }
  echo "ensure-services: starting Redis"
  redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no
  wait_for "Redis" redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping
fi
echo "ensure-services: PostgreSQL and Redis are reachable"
