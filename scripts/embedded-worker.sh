#!/usr/bin/env bash
# The Celery worker of `make run`: one process with embedded beat, on the
# filesystem broker. Gossip, mingle and heartbeats are for clusters of workers;
# over the filesystem broker they also keep a warm shutdown waiting for a minute
# or more after Ctrl-C. Without them it stops in seconds.
set -euo pipefail
PY=${PY:-.venv/bin/python}
exec "$PY" -m celery -A config worker -B --concurrency 2 --loglevel INFO \
  --without-gossip --without-mingle --without-heartbeat
