# Image for every process of the Inference Release Ledger: gunicorn (the default
# command), the Celery worker, Celery beat and one-shot management commands.
# docker-compose.yml runs all of them from this one image.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

# The processes run as this unprivileged user; the code and the collected
# static files stay owned by root, so the running app cannot rewrite them.
RUN groupadd --system --gid 10001 ledger \
    && useradd --system --uid 10001 --gid ledger --create-home --home-dir /home/ledger \
        --shell /usr/sbin/nologin ledger

WORKDIR /app

# Dependencies first, so that a code change reuses this layer. The project is
# not a package (py-modules = []): installing it only pulls its dependencies,
# at the versions pinned by requirements.lock.
COPY pyproject.toml requirements.lock ./
RUN pip install -c requirements.lock . \
    && rm -rf build ./*.egg-info

COPY . .

# Collect and compress the static files (the manifest storage is the default
# when DEBUG is off). The settings need a non-development key to import; the
# throw-away DATA_DIR keeps build-time folders out of the image. /gateway is where
# compose mounts the gateway's config volume (gateway-sync): a new volume takes the
# owner of the folder it is mounted on, so the app's user can write the file.
RUN DATA_DIR=/tmp/build-data DEBUG=false SECRET_KEY=build-only \
        python manage.py collectstatic --noinput \
    && rm -rf /tmp/build-data \
    && mkdir -p /app/var /gateway \
    && chown ledger:ledger /app/var /gateway

USER ledger

# gunicorn takes its worker count from WEB_CONCURRENCY; override it per deployment.
# No gunicorn access log: the app writes one JSON line per request (lib/logs.py)
# naming the route, where gunicorn's would print the path, a reset link's token included.
ENV WEB_CONCURRENCY=3

EXPOSE 8000

CMD ["gunicorn", "config.wsgi:application", \
     "--bind", "0.0.0.0:8000", \
     "--error-logfile", "-", \
     "--worker-tmp-dir", "/dev/shm", \
     "--timeout", "60", \
     "--graceful-timeout", "30"]
