#!/usr/bin/env bash
# `make run`: migrate, load the demo data, then run one Celery worker with
# embedded beat beside the web app, all on the embedded defaults.
set -euo pipefail
PY=${PY:-.venv/bin/python}
HOST=${HOST:-127.0.0.1}
PORT=${PORT:-8000}

scripts/write-local-env.sh var/local.env
"$PY" manage.py migrate --noinput
"$PY" manage.py seed_demo

PY="$PY" scripts/embedded-worker.sh &
worker=$!
trap 'kill "$worker" 2>/dev/null; wait "$worker" 2>/dev/null' EXIT INT TERM

cat <<MSG

  Inference Release Ledger is starting at  http://$HOST:$PORT/
  Log in as owner, sre, security, business, auditor or admin — password: demo
  Stop with Ctrl-C.

MSG
"$PY" manage.py runserver --noreload "$HOST:$PORT"
