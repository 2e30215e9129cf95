#!/bin/sh
# The gateway's config, kept up to date from the ledger (the gateway-sync service of
# docker-compose.yml, in the app's image, from /app).
#
# Every GATEWAY_SYNC_INTERVAL seconds, render the LiteLLM config of every live service
# into the volume the gateway reads. render_gateway replaces the file only when its
# sha256 changes (written beside it, then renamed, so a reader never sees half a file)
# and prints `written|unchanged PATH SHA256`. Nothing here signals the gateway: its
# supervisor (docker/gateway/supervise.py) sees the new sha256 and restarts the proxy.
# A failed render (the database restarting) keeps the last file, so the gateway keeps
# routing as it did.
set -u

output="${GATEWAY_CONFIG:-/gateway/config.yaml}"
interval="${GATEWAY_SYNC_INTERVAL:-15}"

while :; do
    if result=$(python manage.py render_gateway --output "$output"); then
        case "$result" in
            written*)
                # The file holds no credential (only os.environ/NAME), and the proxy
                # may run as another user than this one: let every user read it.
                chmod a+r "$output"
                echo "gateway-sync: $result"
                ;;
        esac
    else
        echo "gateway-sync: render_gateway failed; the gateway keeps the last config" >&2
    fi
    sleep "$interval"
done
