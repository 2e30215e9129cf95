"""No secret leaves through a backend, and replay connects only where it is allowed.

The attacks first: a model owner's token PATCHes a backend to send the server's
own SECRET_KEY to an address of their choosing, or points it at cloud metadata
or an internal service. Then the connect-time check, with a resolver the test
controls, so a name that resolves (or re-resolves) somewhere refused never gets
a packet.
"""

from __future__ import annotations

import asyncio
import http.server
import threading

import httpcore
import httpx
import pytest

from ledger import services as ledger_services
from ledger.models import Event
from replay import outbound, services
from replay.demo import seed_replay
from replay.models import Backend, Probe
from tests.ledger.factories import RevisionFactory, ServiceFactory
from tests.replay.helpers import SECRET, backend_on, make_backend, make_set, replay_now, sample

pytestmark = pytest.mark.django_db


@pytest.fixture
def backend(team):
    return make_backend(team, name="kb-vllm")


def _patch(client, backend, body):
    return client.patch(
        f"/api/replay/backends/{backend.name}/", body, content_type="application/json"
    )


# ---------------------------------------------------------------- the attacks, over the API


@pytest.mark.parametrize("name", ["SECRET_KEY", "DATABASE_URL", "AWS_SECRET_ACCESS_KEY"])
def test_a_backend_cannot_name_the_servers_own_settings_as_its_credential(
    client, owner, backend, name
):
    client.force_login(owner)
    events = Event.objects.count()

    response = _patch(
        client, backend, {"credential_env": name, "base_url": "http://127.0.0.1:18999"}
    )

    assert response.status_code == 400
    assert response.json()["credential_env"] == [
        f"{name} is not a backend credential: name a variable that starts with "
        "LEDGER_BACKEND_KEY_ (e.g. LEDGER_BACKEND_KEY_KB_ASSISTANT), or one an administrator "
        "lists in REPLAY_CREDENTIAL_NAMES. The ledger's own settings can never be sent."
    ]
    assert Backend.objects.get(pk=backend.pk).credential_env == "LEDGER_BACKEND_KEY_KB"
    assert Event.objects.count() == events


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest",
        "http://[fd00:ec2::254]/",
        "http://[::ffff:169.254.169.254]/",
        "http://0.0.0.0:8000",
    ],
)
def test_metadata_and_link_local_addresses_are_refused_whatever_the_list_says(
    client, owner, backend, settings, url
):
    settings.REPLAY_ALLOWED_HOSTS = ["0.0.0.0/0", "::/0"]
    client.force_login(owner)

    response = _patch(client, backend, {"base_url": url})

    assert response.status_code == 400
    assert "always refused" in response.json()["base_url"][0]


@pytest.mark.parametrize("url", ["http://127.0.0.1:5432", "http://10.1.2.3:8000"])
def test_addresses_not_on_the_allow_list_are_refused_naming_the_list(
    client, owner, backend, settings, url
):
    settings.REPLAY_ALLOWED_HOSTS = ["10.20.0.0/16", "vllm.internal"]
    client.force_login(owner)

    response = _patch(client, backend, {"base_url": url})

    assert response.status_code == 400
    message = response.json()["base_url"][0]
    assert "is not in REPLAY_ALLOWED_HOSTS" in message
    assert "REPLAY_ALLOWED_HOSTS lists vllm.internal, 10.20.0.0/16" in message


def test_an_empty_allow_list_refuses_every_host_and_says_so(client, owner, backend, settings):
    settings.REPLAY_ALLOWED_HOSTS = []
    client.force_login(owner)

    response = _patch(client, backend, {"base_url": "http://127.0.0.1:8000"})

    assert (
        "REPLAY_ALLOWED_HOSTS is empty, so replay may reach no host yet"
        in (response.json()["base_url"][0])
    )


@pytest.mark.parametrize(
    ("port", "what"),
    [
        (5432, "PostgreSQL"),
        (3306, "MySQL/MariaDB"),
        (6379, "Redis"),
        (5672, "RabbitMQ"),
        (11211, "memcached"),
        (27017, "MongoDB"),
        (9200, "Elasticsearch/OpenSearch"),
        (9092, "Kafka"),
        (2379, "etcd"),
    ],
)
def test_a_data_store_port_on_an_allowed_host_is_refused_naming_the_port_and_why(
    client, owner, backend, port, what
):
    # The suite allows 127.0.0.0/8: loopback is allowed, its database is not.
    client.force_login(owner)
    events = Event.objects.count()

    response = _patch(client, backend, {"base_url": f"http://127.0.0.1:{port}"})

    assert response.status_code == 400
    message = response.json()["base_url"][0]
    assert f"127.0.0.1 port {port} ({what})" in message
    assert "unless an entry of REPLAY_ALLOWED_HOSTS names that port" in message
    assert f"e.g. 127.0.0.1:{port}" in message
    assert Backend.objects.get(pk=backend.pk).base_url != f"http://127.0.0.1:{port}"
    assert Event.objects.count() == events


def test_a_data_store_port_is_refused_on_a_host_listed_by_name_too(
    client, owner, backend, settings
):
    settings.REPLAY_ALLOWED_HOSTS = ["localhost", ".inference.internal"]
    client.force_login(owner)

    for url in ("http://localhost:6379", "http://redis.inference.internal:6379/0"):
        response = _patch(client, backend, {"base_url": url})
        assert response.status_code == 400, url
        assert "port 6379 (Redis)" in response.json()["base_url"][0]


@pytest.mark.parametrize(
    ("entry", "url"),
    [
        ("127.0.0.1:5432", "http://127.0.0.1:5432"),
        ("127.0.0.0/8:6379", "http://127.0.0.2:6379"),
        ("localhost:9200", "http://localhost:9200"),
        ("[::1]:5432", "http://[::1]:5432"),
    ],
)
def test_an_entry_that_names_the_port_admits_it(client, owner, backend, settings, entry, url):
    settings.REPLAY_ALLOWED_HOSTS = ["127.0.0.0/8", "::1", "localhost", entry]
    client.force_login(owner)

    response = _patch(client, backend, {"base_url": url})

    assert response.status_code == 200, response.json()
    assert Backend.objects.get(pk=backend.pk).base_url == url


@pytest.mark.parametrize(
    ("entries", "url", "allowed"),
    [
        (["10.0.0.5:8000"], "http://10.0.0.5:8000", True),
        (["10.0.0.5:8000"], "http://10.0.0.5:8001", False),
        (["10.0.0.5:8000"], "http://10.0.0.5", False),  # port 80
        (["10.20.0.0/16:8000"], "http://10.20.3.4:8000/v1", True),
        (["10.20.0.0/16:8000"], "https://10.20.3.4", False),  # port 443
        (["[fd00:1::/64]:8080"], "http://[fd00:1::7]:8080", True),
        (["[fd00:1::/64]:8080"], "http://[fd00:1::7]:8081", False),
        (["[fd00:1::7]"], "http://[fd00:1::7]:8081", True),
        (["vllm.internal:8000"], "http://vllm.internal:8000", True),
        (["vllm.internal:8000", "10.0.0.5:9000"], "http://10.0.0.5:9000", True),
    ],
)
def test_an_entry_with_a_port_admits_that_port_only(
    client, owner, backend, settings, entries, url, allowed
):
    settings.REPLAY_ALLOWED_HOSTS = entries
    client.force_login(owner)

    response = _patch(client, backend, {"base_url": url})

    assert (response.status_code == 200) is allowed, response.json()
    if not allowed:
        assert "lists it only with port" in response.json()["base_url"][0]


def test_moving_a_backend_drops_its_credential_unless_named_again(client, owner, backend, fake):
    client.force_login(owner)

    moved = _patch(client, backend, {"base_url": fake.base_url})

    assert moved.status_code == 200
    assert Backend.objects.get(pk=backend.pk).credential_env == ""
    event = Event.objects.filter(action="replay.backend_updated").latest("sequence")
    assert event.payload_data["after"] == {"base_url": fake.base_url, "credential_env": ""}
    assert event.payload_data["credential_cleared"] == (
        "base_url changed without the credential, so LEDGER_BACKEND_KEY_KB is no longer sent"
    )

    again = _patch(
        client,
        backend,
        {"base_url": "http://127.0.0.1:9", "credential_env": "LEDGER_BACKEND_KEY_KB"},
    )
    assert again.status_code == 200
    assert Backend.objects.get(pk=backend.pk).credential_env == "LEDGER_BACKEND_KEY_KB"


def test_a_row_written_before_the_namespace_never_sends_its_variable(fake, monkeypatch):
    # A backend saved before the rule (or written around the verb) names SECRET_KEY.
    backend = backend_on(fake)
    Backend.objects.filter(pk=backend.pk).update(credential_env="SECRET_KEY")
    monkeypatch.setenv("SECRET_KEY", SECRET)

    probe = services.probe_backend(Backend.objects.get(pk=backend.pk), actor=None)

    assert "SECRET_KEY is not a backend credential" in probe.error
    assert fake.requests == []  # nothing was sent anywhere


def test_an_administrator_may_list_extra_credential_names(settings, team):
    settings.REPLAY_CREDENTIAL_NAMES = ["VENDOR_GATEWAY_TOKEN"]

    assert outbound.credential_problem("VENDOR_GATEWAY_TOKEN") == ""
    assert outbound.credential_problem("LEDGER_BACKEND_KEY_") != ""  # the prefix alone is no name


@pytest.mark.parametrize(
    ("variable", "value", "said"),
    [
        ("REPLAY_ALLOWED_HOSTS", "10.0.0.5:http", "10.0.0.5:http"),
        ("REPLAY_ALLOWED_HOSTS", "10.0.0.5:0", "a port is a number from 1 to 65535"),
        ("REPLAY_ALLOWED_HOSTS", "10.0.0.5:70000", "a port is a number from 1 to 65535"),
        ("REPLAY_ALLOWED_HOSTS", "[::1:8080", "[::1:8080"),
        ("REPLAY_ALLOWED_HOSTS", "fd00::1/64:8080", "write an IPv6 address with a port as"),
        ("WEBHOOK_ALLOWED_HOSTS", "hooks.example.com:", "hooks.example.com:"),
        ("WEBHOOK_ALLOWED_HOSTS", "*.example.com", "*.example.com"),
    ],
)
def test_settings_refuse_a_malformed_allow_list_entry_naming_it(scratch_dir, variable, value, said):
    from tests.support.processes import child_env, run_manage

    env = child_env(DEBUG="true", DATA_DIR=str(scratch_dir), **{variable: f"127.0.0.1,{value}"})

    result = run_manage("check", env=env)

    assert result.returncode != 0
    assert f"{variable} lists {value!r}" in result.stderr
    assert said in result.stderr


def test_settings_refuse_listing_the_ledgers_own_variables(scratch_dir):
    from tests.support.processes import child_env, run_manage

    env = child_env(
        DEBUG="true", DATA_DIR=str(scratch_dir), REPLAY_CREDENTIAL_NAMES="SECRET_KEY,OK_NAME"
    )

    result = run_manage("check", env=env)

    assert result.returncode != 0
    assert "REPLAY_CREDENTIAL_NAMES lists SECRET_KEY, which hold" in result.stderr


# ---------------------------------------------------------------- at connect time


class _Guard(httpcore.AsyncNetworkBackend):
    """Records every address a connection is attempted to; fails on any but loopback."""

    def __init__(self) -> None:
        self.inner = httpcore.AnyIOBackend()
        self.attempts: list[str] = []

    async def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        self.attempts.append(host)
        assert host in ("127.0.0.1", "::1"), f"a connection to {host} was attempted"
        return await self.inner.connect_tcp(host, port, timeout, local_address, socket_options)

    async def sleep(self, seconds):
        await self.inner.sleep(seconds)


def _get(url: str, policy: outbound.DestinationPolicy, answers: list[list[str]]):
    """GET `url` through the pinned backend, the name resolving to each of `answers` in turn."""
    guard = _Guard()
    lookups = iter(answers)

    async def resolver(host: str, port: int) -> list[str]:
        return next(lookups)

    async def go():
        backend = outbound.PinnedNetworkBackend(policy, resolver=resolver)
        backend.inner = guard
        pool = httpcore.AsyncConnectionPool(network_backend=backend)
        async with pool:
            response = await pool.request("GET", url)
            return response.status

    try:
        return asyncio.run(go()), guard.attempts
    except httpcore.ConnectError as error:
        return error, guard.attempts


def test_a_listed_network_admits_a_name_that_resolves_into_it(fake):
    status, attempts = _get(
        f"http://svc.test:{fake.port}/v1/models",
        outbound.DestinationPolicy(["127.0.0.0/8"]),
        [["127.0.0.1"]],
    )

    assert status == 200
    assert attempts == ["127.0.0.1"]  # the checked address, never the name


@pytest.mark.parametrize(
    "answer", [["169.254.169.254"], ["127.0.0.1", "169.254.169.254"], ["::ffff:169.254.169.254"]]
)
def test_a_name_resolving_to_metadata_gets_no_packet_even_when_listed_by_name(fake, answer):
    error, attempts = _get(
        f"http://vllm.internal:{fake.port}/",
        outbound.DestinationPolicy(["vllm.internal"]),
        [answer],
    )

    assert isinstance(error, outbound.DestinationRefused)
    assert "always refused" in str(error)
    assert attempts == []


def test_a_name_that_rebinds_elsewhere_is_refused_on_the_next_connection(fake):
    policy = outbound.DestinationPolicy(["127.0.0.0/8"])
    answers = [["127.0.0.1"], ["10.9.9.9"]]
    lookups = iter(answers)
    attempts: list[str] = []

    async def resolver(host, port):
        return next(lookups)

    async def go():
        backend = outbound.PinnedNetworkBackend(policy, resolver=resolver)
        guard = _Guard()
        backend.inner = guard
        first = await backend.connect_tcp("svc.test", fake.port)
        await first.aclose()
        try:
            await backend.connect_tcp("svc.test", fake.port)
        finally:
            attempts.extend(guard.attempts)

    with pytest.raises(
        outbound.DestinationRefused, match=r"10\.9\.9\.9 is not in REPLAY_ALLOWED_HOSTS"
    ):
        asyncio.run(go())
    assert attempts == ["127.0.0.1"]


def test_a_listed_name_gets_no_packet_on_a_data_store_port(fake):
    # Checked at connect time too: vllm.internal:5432 here would reach PostgreSQL.
    error, attempts = _get(
        "http://vllm.internal:5432/", outbound.DestinationPolicy(["vllm.internal"]), [["127.0.0.1"]]
    )

    assert isinstance(error, outbound.DestinationRefused)
    assert "127.0.0.1 port 5432 (PostgreSQL)" in str(error)
    assert attempts == []


def test_a_row_written_before_the_port_rule_never_reaches_the_database(fake):
    # A backend saved before the rule (or written around the verb) names PostgreSQL.
    backend = backend_on(fake)
    Backend.objects.filter(pk=backend.pk).update(base_url="http://127.0.0.1:5432")

    probe = services.probe_backend(Backend.objects.get(pk=backend.pk), actor=None)

    assert probe.reachable is False
    assert "127.0.0.1 port 5432 (PostgreSQL)" in probe.error


def test_a_redirect_elsewhere_is_not_followed():
    hits: list[str] = []

    class Redirect(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            hits.append(self.path)
            self.send_response(302)
            self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        backend = services.create_backend(
            actor=None,
            name="redirector",
            revision=RevisionFactory(),
            base_url=f"http://127.0.0.1:{server.server_port}",
            model_name="m",
        )
        run = replay_now(backend, make_set("redirected", [sample("q1")]))
    finally:
        server.shutdown()

    result = run.results.get()
    assert result.error_code == "http_302"
    assert hits == ["/v1/chat/completions"]  # one request, and nothing followed it


def test_the_replay_client_refuses_a_destination_the_list_does_not_allow(fake, settings):
    backend = backend_on(fake)  # saved while loopback was allowed (the suite's default)
    settings.REPLAY_ALLOWED_HOSTS = ["10.20.0.0/16"]  # and then the list changed

    run = replay_now(backend, make_set("smoke", [sample("q1")]))

    result = run.results.get()
    assert result.error_code == "connect_error"
    assert "127.0.0.1 is not in REPLAY_ALLOWED_HOSTS" in result.error_detail
    assert fake.requests == []


def test_probes_go_through_the_same_check(fake, settings):
    backend = backend_on(fake)
    settings.REPLAY_ALLOWED_HOSTS = ["10.20.0.0/16"]

    probe = services.probe_backend(backend, actor=None)

    assert probe.reachable is False
    assert "127.0.0.1 is not in REPLAY_ALLOWED_HOSTS" in probe.error
    assert fake.requests == []
    assert Probe.objects.filter(backend=backend).count() == 1


def test_httpx_clients_made_for_replay_ignore_proxies_and_redirects(settings):
    client = outbound.guarded_client(timeout=1)

    assert client.follow_redirects is False
    assert client._trust_env is False
    assert isinstance(client._transport, outbound.PinnedAsyncTransport)
    asyncio.run(client.aclose())
    assert httpx.__version__ == "0.28.1"  # PinnedAsyncTransport rebuilds its private pool


def test_demo_backends_are_made_only_where_replay_may_reach_them(settings, team):
    service = ServiceFactory(slug="kb-assistant", team=team)
    revision = RevisionFactory(service=service)
    ledger_services.set_live_revision(service, revision, actor=None)
    settings.REPLAY_ALLOWED_HOSTS = []  # a production default: nothing listed yet

    sets, backends = seed_replay(["kb-assistant"])

    assert sets == 7 and backends == 0
    assert not Backend.objects.exists()
