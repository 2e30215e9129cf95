#!/bin/sh
# Runs once, when the PostgreSQL volume is first initialised: creates the role the
# web, workers and beat connect as. It owns nothing; `manage.py grant_app_role`
# (the migrate job) gives it read/write on the tables and only SELECT and INSERT
# on the event table.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v app_user="$POSTGRES_APP_USER" -v app_password="$POSTGRES_APP_PASSWORD" <<'SQL'
CREATE ROLE :"app_user" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT PASSWORD :'app_password';
GRANT CONNECT ON DATABASE :"DBNAME" TO :"app_user";
SQL
