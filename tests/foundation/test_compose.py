"""The container deployment: docker-compose.yml, the Dockerfile and .env.example.

These read the files as text and YAML; they need neither Docker nor the
database, so they run everywhere the suite runs.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
ENV_EXAMPLE = ROOT / ".env.example"
SETTINGS = ROOT / "config" / "settings.py"

BACKING_SERVICES = ("postgres", "redis", "minio")
APP_SERVICES = ("web", "worker", "beat")
GATEWAY_SERVICES = ("gateway", "gateway-sync")
OBSERVABILITY_SERVICES = ("prometheus",)
LONG_RUNNING_SERVICES = BACKING_SERVICES + APP_SERVICES + GATEWAY_SERVICES + OBSERVABILITY_SERVICES
PROMETHEUS_CONFIG = ROOT / "docker" / "prometheus" / "prometheus.yml"
PRODUCTION_VARIABLES = (
    "DATABASE_URL",
    "CELERY_BROKER_URL",
    "SECRET_KEY",
    "ALLOWED_HOSTS",
    "AWS_STORAGE_BUCKET_NAME",
    "AWS_S3_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
)
# Top-level keys of the version 3 file format; Compose v1 rejects anything else
# (such as `name:`) apart from `x-` extension fields.
COMPOSE_V3_TOP_LEVEL_KEYS = {"version", "services", "networks", "volumes", "secrets", "configs"}
# name[:tag]@sha256:<64 hex>: Docker pulls by the digest, which no one can move.
PINNED_IMAGE = re.compile(
    r"(?P<name>[^@\s]+?)(?::(?P<tag>[^@:/\s]+))?@sha256:(?P<digest>[0-9a-f]{64})"
)
# Gateway environment that is a switch or a placeholder, never a credential.
GATEWAY_PLAIN_VALUES = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_TELEMETRY_DISABLED": "true",
    "GATEWAY_KEYLESS_API_KEY": "no-key",
}


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text())


@pytest.fixture(scope="module")
def services(compose: dict) -> dict:
    return compose["services"]


def _environment(service: dict) -> dict[str, str]:
    """A service's environment as a mapping, whichever of the two forms it uses."""
    environment = service.get("environment") or {}
    if isinstance(environment, list):
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in environment)
    return {key: "" if value is None else str(value) for key, value in environment.items()}


def _depends_on(service: dict) -> dict[str, str]:
    """Each dependency of a service with its condition (service_started when unstated)."""
    depends_on = service.get("depends_on") or {}
    if isinstance(depends_on, list):
        return dict.fromkeys(depends_on, "service_started")
    return {
        name: (options or {}).get("condition", "service_started")
        for name, options in depends_on.items()
    }


def _pinned(image: str) -> re.Match[str] | None:
    return PINNED_IMAGE.fullmatch(image)


def _healthcheck_command(service: dict) -> str:
    test = (service.get("healthcheck") or {}).get("test")
    if isinstance(test, list):
        return " ".join(test[1:]) if test and test[0] in {"CMD", "CMD-SHELL"} else ""
    return test or ""


def _documented_variables() -> set[str]:
    """Names in .env.example, set (NAME=value) or shown with their default (# NAME=value)."""
    return set(re.findall(r"^[ \t]*#?[ \t]*([A-Z][A-Z0-9_]*)=", ENV_EXAMPLE.read_text(), re.M))


def _dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    lines = [
        line for line in DOCKERFILE.read_text().splitlines() if not line.lstrip().startswith("#")
    ]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    instructions = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, arguments = line.strip().partition(" ")
            instructions.append((keyword.upper(), arguments.strip()))
    return instructions


def test_compose_defines_database_broker_object_store_and_app_services(services):
    expected = {*LONG_RUNNING_SERVICES, "createbucket"}
    assert expected <= set(services), f"missing services: {expected - set(services)}"


def test_compose_file_uses_only_keys_compose_v1_accepts(compose):
    unknown = {
        key for key in compose if key not in COMPOSE_V3_TOP_LEVEL_KEYS and not key.startswith("x-")
    }
    assert not unknown, f"top-level keys Compose v1 rejects: {unknown}"
    assert str(compose.get("version", "3.8")).startswith("3")


def test_every_image_is_pulled_by_its_digest_or_built_from_the_dockerfile(services):
    """A tag can be moved to other bytes; a digest cannot. Only the app's own image,
    built here, has none."""
    for name, service in services.items():
        if "build" in service:
            continue
        image = service["image"]
        assert _pinned(image), f"{name}: {image!r} is not name:tag@sha256:<64 hex>"


@pytest.mark.parametrize("name", [*BACKING_SERVICES, "createbucket", "gateway", "prometheus"])
def test_pinned_images_keep_a_version_tag_for_people(services, name):
    image = services[name]["image"]
    pinned = _pinned(image)
    assert pinned and pinned["tag"], f"{name}: {image!r} has no tag beside its digest"
    assert pinned["tag"] != "latest", f"{name}: {image!r}"
    assert re.match(r"v?\d|RELEASE\.", pinned["tag"]), f"{name}: {image!r} tag is not a version"


def test_each_digest_names_where_it_was_read(services):
    """The comment above each pinned image names its public source (no digest here was
    pulled: Docker does not run on the project's machines)."""
    text = COMPOSE_FILE.read_text()
    for name, service in services.items():
        if "build" in service:
            continue
        before = text[: text.index(f"image: {service['image']}")]
        comment = before.rsplit(f"\n  {name}:\n", 1)[-1]
        assert re.search(r"#.*\b[\w.-]+/[\w.-]+\b", comment), f"{name}: no source named"
        # A public pin at a commit, or the registry's own page for that very name and tag.
        pinned = _pinned(service["image"])
        assert pinned
        registry_page = f"hub.docker.com/layers/{pinned['name']}/{pinned['tag']}/"
        assert re.search(r"commit [0-9a-f]{7}", comment) or registry_page in comment, (
            f"{name}: no commit named, nor {registry_page}"
        )


@pytest.mark.parametrize("name", [*APP_SERVICES, "migrate"])
def test_app_services_build_the_project_dockerfile(services, name):
    build = services[name]["build"]
    if isinstance(build, str):
        build = {"context": build}
    assert build["context"] in {".", "./"}
    assert build.get("dockerfile", "Dockerfile") == "Dockerfile"


@pytest.mark.parametrize("name", LONG_RUNNING_SERVICES)
def test_every_long_running_service_has_a_healthcheck(services, name):
    healthcheck = services[name].get("healthcheck") or {}
    assert not healthcheck.get("disable"), f"{name}: healthcheck disabled"
    assert _healthcheck_command(services[name]).strip(), f"{name}: no healthcheck command"


def test_web_is_healthy_only_when_readyz_answers(services):
    command = _healthcheck_command(services["web"])
    assert "/readyz" in command
    assert "urllib" in command, "python:3.11-slim has no curl; probe with urllib"


def test_worker_is_healthy_only_when_its_own_celery_node_answers_a_ping(services):
    command = _healthcheck_command(services["worker"])
    assert "inspect ping" in command
    assert "$$HOSTNAME" in command or "$HOSTNAME" in command


def test_beat_is_healthy_only_while_its_pidfile_names_a_live_process(services):
    command = " ".join(services["beat"]["command"])
    pidfile = re.search(r"--pidfile[ =](\S+)", command)
    assert pidfile, "beat needs --pidfile for its healthcheck"
    assert pidfile.group(1) in _healthcheck_command(services["beat"])
    assert "DatabaseScheduler" in command


@pytest.mark.parametrize("name", APP_SERVICES)
def test_app_services_wait_for_healthy_postgres_and_redis(services, name):
    depends_on = _depends_on(services[name])
    assert depends_on.get("postgres") == "service_healthy"
    assert depends_on.get("redis") == "service_healthy"


@pytest.mark.parametrize("name", APP_SERVICES)
def test_app_services_start_after_migrations_have_run(services, name):
    assert _depends_on(services[name]).get("migrate") == "service_completed_successfully"
    command = " ".join(services["migrate"]["command"])
    assert "manage.py migrate --noinput --database owner" in command
    assert _depends_on(services["migrate"]).get("postgres") == "service_healthy"


def test_the_app_connects_as_a_role_that_cannot_rewrite_events(services):
    """Privilege separation: migrations as the owner, the app as the role
    `grant_app_role` restrains (tests/ledger/test_app_role.py shows the grants hold)."""

    def user_of(url: str) -> str:
        return url.split("://", 1)[1].split(":", 1)[0]

    migrate = _environment(services["migrate"])
    owner = user_of(migrate["DATABASE_MIGRATE_URL"])
    app_users = {user_of(_environment(services[name])["DATABASE_URL"]) for name in APP_SERVICES}
    assert owner == "${POSTGRES_USER"
    assert app_users == {"${POSTGRES_APP_USER"}
    # $$ is Compose's escape: the shell in the container expands the variable.
    command = " ".join(services["migrate"]["command"])
    assert command.endswith(
        '&& python manage.py grant_app_role --database owner "$$POSTGRES_APP_USER"'
    )
    init_scripts = [v for v in services["postgres"]["volumes"] if "docker-entrypoint-initdb.d" in v]
    assert init_scripts == [
        "./docker/postgres/create-app-role.sh:/docker-entrypoint-initdb.d/10-create-app-role.sh:ro"
    ]
    script = (ROOT / "docker" / "postgres" / "create-app-role.sh").read_text()
    assert "NOSUPERUSER" in script and "POSTGRES_APP_USER" in script


@pytest.mark.parametrize("name", ["web", "worker"])
def test_services_that_store_files_wait_for_the_bucket(services, name):
    depends_on = _depends_on(services[name])
    assert depends_on.get("minio") == "service_healthy"
    assert depends_on.get("createbucket") == "service_completed_successfully"


@pytest.mark.parametrize("name", [*APP_SERVICES, "migrate"])
def test_app_environment_has_everything_production_settings_need(services, name):
    environment = _environment(services[name])
    missing = [variable for variable in PRODUCTION_VARIABLES if not environment.get(variable)]
    assert not missing, f"{name} lacks {missing}"
    assert environment["DATABASE_URL"].startswith("postgres://")
    assert environment["CELERY_BROKER_URL"].startswith("redis://")
    assert environment.get("DEBUG", "false").lower() in {"false", "0", "no", "off"}


def test_app_services_share_one_environment(services):
    environments = [_environment(services[name]) for name in [*APP_SERVICES, "migrate"]]
    for variable in PRODUCTION_VARIABLES:
        assert len({environment[variable] for environment in environments}) == 1, variable


def test_secret_key_must_be_supplied_rather_than_defaulted(services):
    secret_key = _environment(services["web"])["SECRET_KEY"]
    assert re.fullmatch(r"\$\{SECRET_KEY:?\?.*\}", secret_key), secret_key


def test_every_app_process_signs_with_the_one_key_of_the_deployment(compose, services):
    """Each event is signed: a key each container generated for itself would not verify
    in the others, and would be lost with the container."""
    assert compose["secrets"]["ledger_signing_key"]["file"].startswith(
        "${LEDGER_SIGNING_KEY_PATH:-"
    )
    for name in [*APP_SERVICES, "migrate"]:
        assert "ledger_signing_key" in services[name]["secrets"], name
        environment = _environment(services[name])
        assert environment["LEDGER_SIGNING_KEY_FILE"] == "/run/secrets/ledger_signing_key", name


def test_the_signing_key_never_enters_git_or_the_image():
    assert "secrets/" in (ROOT / ".gitignore").read_text().splitlines()
    assert "secrets" in (ROOT / ".dockerignore").read_text().splitlines()


def test_database_and_broker_are_not_published_on_the_host(services):
    assert not services["postgres"].get("ports")
    assert not services["redis"].get("ports")
    assert any(str(port).endswith(":8000") for port in services["web"]["ports"])


def test_every_variable_the_settings_read_is_documented_in_env_example():
    read = set(
        re.findall(
            r"\benv_(?:str|bool|int|list)\(\s*[\"']([A-Z][A-Z0-9_]*)[\"']", SETTINGS.read_text()
        )
    )
    assert {"SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL"} <= read, "settings regex broke"
    undocumented = read - _documented_variables()
    assert not undocumented, f"add to .env.example: {sorted(undocumented)}"


def test_every_variable_compose_substitutes_is_documented_in_env_example():
    lines = [
        line for line in COMPOSE_FILE.read_text().splitlines() if not line.lstrip().startswith("#")
    ]
    substituted = set(re.findall(r"(?<!\$)\$\{([A-Z][A-Z0-9_]*)", "\n".join(lines)))
    undocumented = substituted - _documented_variables()
    assert not undocumented, f"add to .env.example: {sorted(undocumented)}"


def test_env_example_leaves_the_secret_key_for_the_operator_to_fill_in():
    assert re.search(r"^SECRET_KEY=$", ENV_EXAMPLE.read_text(), re.M)


def test_dockerfile_builds_on_python_311_slim():
    base = next(arguments for keyword, arguments in _dockerfile_instructions() if keyword == "FROM")
    assert base.startswith("python:3.11-slim")


def test_dockerfile_installs_pinned_dependencies_and_collects_static_files():
    runs = " ".join(
        arguments for keyword, arguments in _dockerfile_instructions() if keyword == "RUN"
    )
    assert re.search(r"pip install -c requirements\.lock \.(\s|$)", runs)
    assert "collectstatic --noinput" in runs


def test_dockerfile_runs_gunicorn_with_the_project_wsgi_app_on_port_8000():
    instructions = _dockerfile_instructions()
    cmd = [arguments for keyword, arguments in instructions if keyword == "CMD"][-1]
    argv = json.loads(cmd)
    assert argv[0] == "gunicorn"
    assert "config.wsgi:application" in argv
    assert "0.0.0.0:8000" in argv
    assert ("EXPOSE", "8000") in instructions


def test_dockerfile_does_not_run_as_root():
    users = [arguments for keyword, arguments in _dockerfile_instructions() if keyword == "USER"]
    assert users, "no USER line: the container would run as root"
    assert users[-1].split(":")[0] not in {"root", "0"}


# --- The LLM gateway: a LiteLLM proxy fed by gateway-sync -------------------------


def _gateway_config_path(services: dict) -> str:
    return _environment(services["gateway-sync"])["GATEWAY_CONFIG"]


def _volume_mounts(service: dict) -> dict[str, tuple[str, str]]:
    """Named volume or host path -> (folder in the container, mode)."""
    mounts = {}
    for volume in service.get("volumes") or []:
        source, target, *mode = volume.split(":")
        mounts[source] = (target, mode[0] if mode else "rw")
    return mounts


def test_the_gateway_runs_litellms_image_under_the_supervisor(services):
    gateway = services["gateway"]
    assert _pinned(gateway["image"])["name"] == "ghcr.io/berriai/litellm"
    assert gateway["entrypoint"] == ["python3", "/opt/gateway/supervise.py"]
    mounts = _volume_mounts(gateway)
    assert mounts["./docker/gateway/supervise.py"] == ("/opt/gateway/supervise.py", "ro")
    command = gateway["command"]
    supervisor_args, proxy = command[: command.index("--")], command[command.index("--") + 1 :]
    assert proxy[0] == "litellm"
    # The supervisor watches the very file the proxy reads, the one gateway-sync writes.
    config = _gateway_config_path(services)
    assert supervisor_args == ["--config", config]
    assert proxy[proxy.index("--config") + 1] == config
    assert proxy[proxy.index("--port") + 1] == "4000"


def test_gateway_sync_renders_the_config_from_the_app_image_into_the_shared_volume(
    compose, services
):
    sync, gateway = services["gateway-sync"], services["gateway"]
    assert sync["build"]["context"] in {".", "./"}
    assert sync["command"] == ["python", "docker/gateway/sync.py"]
    assert '"render_gateway", output=' in (ROOT / "docker" / "gateway" / "sync.py").read_text()
    folder = str(Path(_gateway_config_path(services)).parent)
    assert _volume_mounts(sync)["gateway-config"] == (folder, "rw")
    assert _volume_mounts(gateway)["gateway-config"] == (folder, "ro")
    assert "gateway-config" in compose["volumes"]
    assert _depends_on(sync)["migrate"] == "service_completed_successfully"
    # The app's user writes the file: the image gives it the folder the volume is mounted on.
    runs = " ".join(
        arguments for keyword, arguments in _dockerfile_instructions() if keyword == "RUN"
    )
    assert re.search(rf"mkdir -p [^&]*{folder}\b", runs)
    assert re.search(rf"chown ledger:ledger [^&]*{folder}\b", runs)


def test_the_gateway_starts_once_the_first_config_is_written(services):
    assert _depends_on(services["gateway"]) == {"gateway-sync": "service_healthy"}
    assert (
        _healthcheck_command(services["gateway-sync"])
        == f"test -s {_gateway_config_path(services)}"
    )
    assert "/health/liveliness" in _healthcheck_command(services["gateway"])


def test_the_gateway_runs_offline_and_without_the_apps_database(services):
    environment = _environment(services["gateway"])
    assert environment["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert environment["LITELLM_TELEMETRY_DISABLED"] == "true"
    # LiteLLM with a DATABASE_URL reaches for Prisma and its downloaded engines.
    assert "DATABASE_URL" not in environment
    assert not set(environment) & set(PRODUCTION_VARIABLES)
    assert "secrets" not in services["gateway"], "the ledger's signing key is not the gateway's"


def test_the_gateway_holds_no_credential_only_references_to_them(services):
    from releases.gateway.litellm import KEYLESS_API_KEY_ENV, MASTER_KEY_ENV

    gateway = services["gateway"]
    environment = _environment(gateway)
    for name, value in environment.items():
        if name in GATEWAY_PLAIN_VALUES:
            assert value == GATEWAY_PLAIN_VALUES[name], name
        else:
            assert re.fullmatch(rf"\$\{{{name}(:?[-?].*)?\}}", value), f"{name}={value!r}"
    # The names the rendered config gives (os.environ/NAME) are the ones set here.
    assert re.fullmatch(rf"\$\{{{MASTER_KEY_ENV}:\?.*\}}", environment[MASTER_KEY_ENV])
    assert KEYLESS_API_KEY_ENV in environment
    # Each backend's key comes from a file kept out of git and of the image.
    [env_file] = gateway["env_file"]
    assert env_file == "${GATEWAY_ENV_FILE:-./secrets/gateway.env}"


def test_the_gateway_is_published_on_loopback_only(services):
    assert services["gateway"]["ports"] == ["127.0.0.1:${GATEWAY_PORT:-4000}:4000"]


def _prometheus_config() -> dict:
    return yaml.safe_load(PROMETHEUS_CONFIG.read_text())


def _scrape_job(name: str) -> dict:
    (job,) = [job for job in _prometheus_config()["scrape_configs"] if job["job_name"] == name]
    return job


def test_prometheus_reads_its_config_from_the_repository_and_keeps_its_data(compose, services):
    prometheus = services["prometheus"]
    mounts = _volume_mounts(prometheus)
    assert mounts["./docker/prometheus/prometheus.yml"] == ("/etc/prometheus/prometheus.yml", "ro")
    assert mounts["prometheus-data"] == ("/prometheus", "rw")
    assert "prometheus-data" in compose["volumes"]
    command = prometheus["command"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in command
    assert "--storage.tsdb.path=/prometheus" in command
    # Anyone on the project network could stop or reload it through the lifecycle API.
    assert "--web.enable-lifecycle" not in command
    assert prometheus["ports"] == ["127.0.0.1:${PROMETHEUS_PORT:-9090}:9090"]
    assert "/-/ready" in _healthcheck_command(prometheus)


def test_prometheus_scrapes_the_gateway_and_the_ledger_with_its_token(compose, services):
    gateway_port = services["gateway"]["command"][-1]
    assert _scrape_job("gateway")["static_configs"] == [{"targets": [f"gateway:{gateway_port}"]}]
    # LiteLLM serves /metrics/ (and redirects /metrics) once the config the ledger
    # renders lists its prometheus callback, which compose asks for, open to the
    # project network (docs/gateway.md, "The gateway's metrics").
    assert _scrape_job("gateway")["metrics_path"] == "/metrics/"
    assert "authorization" not in _scrape_job("gateway")
    sync = _environment(services["gateway-sync"])
    assert sync["GATEWAY_PROMETHEUS_METRICS"] == "${GATEWAY_PROMETHEUS_METRICS:-true}"
    assert sync["GATEWAY_METRICS_REQUIRE_AUTH"] == "${GATEWAY_METRICS_REQUIRE_AUTH:-false}"

    web = _scrape_job("ledger-web")
    assert web["static_configs"] == [{"targets": ["web:8000"]}]
    worker = _scrape_job("ledger-worker")
    assert worker["dns_sd_configs"] == [
        {
            "names": ["worker"],
            "type": "A",
            "port": int(_environment(services["worker"])["WORKER_METRICS_PORT"]),
        }
    ]
    # The ledger asks other hosts for METRICS_TOKEN (config/metrics.py): one file, read
    # by Prometheus as its bearer and by web and worker as METRICS_TOKEN_FILE.
    assert compose["secrets"]["metrics_token"]["file"].startswith("${METRICS_TOKEN_PATH:-")
    assert "metrics_token" in services["prometheus"]["secrets"]
    for job in (web, worker):
        assert job["authorization"] == {
            "type": "Bearer",
            "credentials_file": "/run/secrets/metrics_token",
        }
    for name in ("web", "worker"):
        assert {"ledger_signing_key", "metrics_token"} <= set(services[name]["secrets"]), name
        environment = _environment(services[name])
        assert environment["METRICS_TOKEN_FILE"] == "/run/secrets/metrics_token", name
    # Django checks the Host header: Prometheus asks for web by its service name.
    allowed = _environment(services["web"])["ALLOWED_HOSTS"]
    assert "web" in re.fullmatch(r"\$\{ALLOWED_HOSTS:-(.*)\}", allowed).group(1).split(",")


def test_the_prometheus_config_shows_how_to_scrape_the_engines():
    """Rollout analysis (issue 30) reads vLLM's own series: the job is there to uncomment."""
    text = PROMETHEUS_CONFIG.read_text()
    example = "\n".join(
        line.lstrip()[2:] for line in text.splitlines() if line.lstrip().startswith("# ")
    )
    assert "job_name: engines" in example
    assert "vllm:time_to_first_token_seconds" in text
    assert "engines" not in {job["job_name"] for job in _prometheus_config()["scrape_configs"]}


def test_promtool_accepts_the_prometheus_config(tmp_path):
    """Checked by promtool of Debian's prometheus (make prometheus), with the secret's
    path pointing at a file that exists here."""
    token = tmp_path / "metrics_token"
    token.write_text("test-only-token\n")
    config = tmp_path / "prometheus.yml"
    config.write_text(
        PROMETHEUS_CONFIG.read_text().replace("/run/secrets/metrics_token", str(token))
    )
    result = subprocess.run(
        ["/usr/bin/promtool", "check", "config", str(config)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout
