"""Where replay may send requests, and with which credentials.

A backend's base URL is checked twice: when it is saved (`check_base_url`,
so a person learns at once), and at every connection (`PinnedAsyncTransport`):
the host name is resolved once, every address it resolves to is checked, and
the connection goes to exactly the address that was checked, so a name that
re-resolves elsewhere (DNS rebinding) cannot swap it. Redirects are not
followed, and environment proxies are ignored (a proxy would resolve the name
itself).

The allow-list, REPLAY_ALLOWED_HOSTS (webhooks have their own,
WEBHOOK_ALLOWED_HOSTS: `DestinationPolicy.for_webhooks`), names host names
(`vllm.internal`, or `.inference.internal` for a domain and its subdomains) and
networks (`10.20.0.0/16`, `127.0.0.1`), each optionally with a port
(`vllm.internal:8000`, `10.20.0.0/16:8000`, `[::1]:8080`; lib/allowlist.py). A
name on the list may resolve to any address but the always-refused ones; any other
name must resolve inside a listed network. An entry with a port admits that port
only; one without admits any port but the well-known ports of databases, brokers
and caches (`lib.allowlist.DATA_STORE_PORTS`), which only an entry naming the port
admits. Link-local addresses (cloud metadata at 169.254.169.254 among them), the
AWS IPv6 metadata address, "this host", multicast and broadcast are refused
whatever the list says.

A backend's credential is the name of an environment variable in a namespace
of its own (`LEDGER_BACKEND_KEY_…`, or a name an administrator lists in
REPLAY_CREDENTIAL_NAMES), never one the ledger's own settings read, so no
backend can be made to send SECRET_KEY or a database password anywhere.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpcore
import httpx
from django.conf import settings
from django.core.exceptions import ValidationError

from lib.allowlist import (
    DATA_STORE_PORTS,
    IPAddress,
    IPNetwork,
    host_port,
    normalised_address,
    parse_entries,
)

CREDENTIAL_PREFIX = "LEDGER_BACKEND_KEY_"

ALWAYS_REFUSED: tuple[IPNetwork, ...] = tuple(
    ipaddress.ip_network(network)
    for network in (
        "169.254.0.0/16",  # IPv4 link-local, cloud metadata (169.254.169.254) among it
        "fe80::/10",  # IPv6 link-local
        "fd00:ec2::254/128",  # AWS instance metadata over IPv6
        "100.100.100.200/32",  # Alibaba Cloud metadata
        "0.0.0.0/8",  # "this host": 0.0.0.0 reaches local services on Linux
        "::/128",
        "224.0.0.0/4",  # multicast
        "ff00::/8",
        "255.255.255.255/32",
    )
)


def _literal_ip(host: str) -> IPAddress | None:
    try:
        return normalised_address(host.strip("[]"))
    except ValueError:
        return None


# How the list for webhooks is named while WEBHOOK_ALLOWED_HOSTS is unset.
BORROWED_FOR_WEBHOOKS = (
    "REPLAY_ALLOWED_HOSTS (used for webhooks while WEBHOOK_ALLOWED_HOSTS is unset)"
)


class DestinationPolicy:
    """Which hosts, addresses and ports an outbound client may connect to, read from
    the allow-list `setting` names (in messages), for `purpose` (replay, webhooks)."""

    def __init__(
        self,
        entries: Iterable[str],
        *,
        setting: str = "REPLAY_ALLOWED_HOSTS",
        purpose: str = "replay",
    ) -> None:
        parsed = parse_entries(entries, setting=setting)
        # Names first, then networks: how a refusal lists them.
        self.entries = (
            *(entry for entry in parsed if entry.name is not None),
            *(entry for entry in parsed if entry.network is not None),
        )
        self.setting = setting
        self.purpose = purpose

    @classmethod
    def from_settings(cls) -> DestinationPolicy:
        """Replay's: backends, probes, metrics scrapes."""
        return cls(settings.REPLAY_ALLOWED_HOSTS)

    @classmethod
    def for_webhooks(cls) -> DestinationPolicy:
        """Webhook receivers': WEBHOOK_ALLOWED_HOSTS, or while it is unset (a deployment
        from before it; `check --deploy` warns) REPLAY_ALLOWED_HOSTS."""
        if settings.WEBHOOK_ALLOWED_HOSTS is None:
            return cls(
                settings.REPLAY_ALLOWED_HOSTS, setting=BORROWED_FOR_WEBHOOKS, purpose="webhooks"
            )
        return cls(
            settings.WEBHOOK_ALLOWED_HOSTS, setting="WEBHOOK_ALLOWED_HOSTS", purpose="webhooks"
        )

    def listed(self) -> str:
        if not self.entries:
            return f"{self.setting} is empty, so {self.purpose} may reach no host yet"
        return f"{self.setting} lists {', '.join(map(str, self.entries))}"

    def names_host(self, host: str) -> bool:
        return any(entry.name is not None and entry.matches(host, None) for entry in self.entries)

    def admits_by_name(self, host: str, port: int) -> bool:
        return any(
            entry.name is not None and entry.matches(host, None) and entry.admits_port(port)
            for entry in self.entries
        )

    def refusal(self, address: str | None, port: int, *, host: str) -> str:
        """Why a connection to `address` (None: not resolved, the host's name alone)
        on `port`, for a URL naming `host`, is refused ("" when it is allowed)."""
        ip = normalised_address(address) if address is not None else None
        if ip is not None and any(ip in net for net in ALWAYS_REFUSED if net.version == ip.version):
            return f"{ip} is a link-local, metadata or otherwise reserved address, always refused"
        listing = [entry for entry in self.entries if entry.matches(host, ip)]
        if any(entry.admits_port(port) for entry in listing):
            return ""
        shown = str(ip) if ip is not None else host
        if not listing:
            return f"{shown} is not in {self.setting}"
        if port in DATA_STORE_PORTS:
            return (
                f"{shown} port {port} ({DATA_STORE_PORTS[port]}) is the well-known port of a "
                "database, broker or cache, refused even on an allowed host unless an entry "
                f"of {self.setting} names that port (e.g. {host_port(host, port)})"
            )
        ports = ", ".join(str(p) for p in sorted({e.port for e in listing if e.port}))
        return f"{shown} port {port} is not allowed: {self.setting} lists it only with port {ports}"


# httpx's own default pool size.
DEFAULT_LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20)


class DestinationRefused(httpcore.ConnectError):
    """The destination is not allowed; httpx raises it as an httpx.ConnectError."""


Resolver = Callable[[str, int], Awaitable[list[str]]]


async def resolve(host: str, port: int) -> list[str]:
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    return list(dict.fromkeys(str(info[4][0]).split("%", 1)[0] for info in infos))


class PinnedNetworkBackend(httpcore.AsyncNetworkBackend):
    """connect_tcp(host): resolve once, refuse unless every address passes the policy,
    connect to a checked address (never the name), and check the peer once connected."""

    def __init__(
        self,
        policy: DestinationPolicy,
        *,
        resolver: Resolver = resolve,
        inner: httpcore.AsyncNetworkBackend | None = None,
    ) -> None:
        self.policy = policy
        self.resolver = resolver
        self.inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            with anyio.fail_after(timeout):
                addresses = await self.resolver(host, port)
        except TimeoutError as error:
            raise httpcore.ConnectTimeout(f"resolving {host!r} timed out") from error
        except OSError as error:
            raise httpcore.ConnectError(f"cannot resolve {host!r}: {error}") from error
        if not addresses:
            raise httpcore.ConnectError(f"{host!r} resolves to no address")
        # One refused answer spoils the set: a mix of good and bad is an attack.
        for address in addresses:
            reason = self.policy.refusal(address, port, host=host)
            if reason:
                raise DestinationRefused(f"{host} resolves to {reason}")
        last_error: Exception | None = None
        for address in addresses:
            try:
                stream = await self.inner.connect_tcp(
                    address,
                    port,
                    timeout=timeout,
                    local_address=local_address,
                    socket_options=socket_options,
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as error:
                last_error = error
                continue
            peer = stream.get_extra_info("server_addr")
            if peer is None or self.policy.refusal(str(peer[0]), int(peer[1]), host=host):
                await stream.aclose()
                raise DestinationRefused(f"connected to {peer!r}, which is not allowed")
            return stream
        assert last_error is not None
        raise last_error

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise DestinationRefused("unix sockets are not allowed")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)


class PinnedAsyncTransport(httpx.AsyncHTTPTransport):
    """An AsyncHTTPTransport whose pool connects through PinnedNetworkBackend.

    httpx 0.28 takes no network backend, so the pool is rebuilt with one (httpx
    and httpcore are pinned in requirements.lock; tests/replay/test_outbound.py
    fails if a version changes what this relies on).
    """

    def __init__(
        self,
        policy: DestinationPolicy,
        *,
        resolver: Resolver = resolve,
        verify: Any = True,
        limits: httpx.Limits = DEFAULT_LIMITS,
    ) -> None:
        super().__init__(verify=verify, limits=limits, trust_env=False)
        built = self._pool
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=built._ssl_context,
            max_connections=built._max_connections,
            max_keepalive_connections=built._max_keepalive_connections,
            keepalive_expiry=built._keepalive_expiry,
            http1=True,
            http2=False,
            network_backend=PinnedNetworkBackend(policy, resolver=resolver),
        )


def guarded_client(
    *,
    timeout: httpx.Timeout | float,
    limits: httpx.Limits = DEFAULT_LIMITS,
    verify: Any = True,
    policy: DestinationPolicy | None = None,
) -> httpx.AsyncClient:
    """The only way replay and probes make an HTTP client: the allow-list at every connect,
    no redirects followed, no environment proxies."""
    transport = PinnedAsyncTransport(
        policy or DestinationPolicy.from_settings(), verify=verify, limits=limits
    )
    return httpx.AsyncClient(
        transport=transport, timeout=timeout, follow_redirects=False, trust_env=False
    )


# ---------------------------------------------------------------- checks when saving


def _resolve_now(host: str) -> list[str]:
    infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]).split("%", 1)[0] for info in infos))


def base_url_problem(url: str, policy: DestinationPolicy | None = None) -> str:
    """Why an outbound client may not use `url` ("" when it may, or when it is no
    http(s) URL at all, which the URL field itself refuses). `policy`: replay's
    unless given (webhooks pass theirs).

    A host on the list by name (for the URL's port) passes as it is; a literal
    address must be in a listed network; any other name must resolve, now, inside
    the listed networks (and is checked again at every connection).
    """
    policy = policy or DestinationPolicy.from_settings()
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
    except ValueError:
        return ""  # not a URL at all: the field's own validation says so
    if parts.scheme not in ("http", "https") or not host:
        return ""
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return f"{url} names no port from 1 to 65535."
    listed = policy.listed()
    literal = _literal_ip(host)
    if literal is not None:
        reason = policy.refusal(str(literal), port, host=host)
        return f"{reason}; {listed}." if reason else ""
    if policy.admits_by_name(host, port):
        return ""
    try:
        addresses = _resolve_now(host)
    except OSError:
        if policy.names_host(host):
            return f"{policy.refusal(None, port, host=host)}; {listed}."
        return f"{host} is not in {policy.setting} and does not resolve; {listed}."
    for address in addresses:
        reason = policy.refusal(address, port, host=host)
        if reason:
            return f"{host} resolves to {reason}; {listed}."
    return ""


def check_base_url(url: str) -> None:
    problem = base_url_problem(url)
    if problem:
        raise ValidationError({"base_url": problem}, code="destination_refused")


# ---------------------------------------------------------------- credentials


def credential_problem(name: str) -> str:
    """Why a backend may not name this environment variable as its credential ("" if it may)."""
    if not name:
        return ""
    if name.startswith(CREDENTIAL_PREFIX) and len(name) > len(CREDENTIAL_PREFIX):
        return ""
    if name in settings.REPLAY_CREDENTIAL_NAMES:
        return ""
    return (
        f"{name} is not a backend credential: name a variable that starts with "
        f"{CREDENTIAL_PREFIX} (e.g. {CREDENTIAL_PREFIX}KB_ASSISTANT), or one an administrator "
        "lists in REPLAY_CREDENTIAL_NAMES. The ledger's own settings can never be sent."
    )
