#!/usr/bin/env bash
# Write the development settings `make run` leaves for this checkout (once): the
# settings read the file for variables the environment leaves unset, so that
# `.venv/bin/python manage.py …` works afterwards as the README shows.
# Usage: scripts/write-local-env.sh [PATH]   (default var/local.env)
set -euo pipefail
file=${1:-var/local.env}
[ -f "$file" ] && exit 0
mkdir -p "$(dirname "$file")"
key=$(python3 -c 'import secrets; print(secrets.token_urlsafe(50))')
(umask 077 && printf '# Written by make run: development settings for this checkout only.\nDEBUG=true\nSECRET_KEY=%s\n' "$key" > "$file")
echo "wrote $file (development settings for manage.py commands in this checkout)"
