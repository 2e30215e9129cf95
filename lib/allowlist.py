"""Entries of an outbound allow-list (REPLAY_ALLOWED_HOSTS, WEBHOOK_ALLOWED_HOSTS):
how one is written, and which host, address and port it admits.

An entry is a host name (`vllm.internal`), a domain and its subdomains
(`.inference.internal`), an address or a network (`10.0.0.5`, `10.20.0.0/16`,
`::1`, `fd00::/8`), each optionally with a port: `vllm.internal:8000`,
`10.20.0.0/16:8000`, and IPv6 in brackets, `[::1]:8080`, `[fd00::/8]:8080`. An
entry with a port admits that port only; one without admits every port but the
well-known ports of databases, brokers, caches and coordination stores
(`DATA_STORE_PORTS`): a request sent there reaches a service that holds data and
may read the request's lines as commands, so such a port must be named to be reached.

No settings are read here: config/settings.py parses the lists at start-up to
refuse a malformed entry, and replay.outbound matches destinations with the same
reading.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

# Refused on any allowed host unless an entry names the port. Ports of HTTP services
# an inference fleet runs (8000, 8080, 9090 Prometheus, 11434 Ollama) are not here.
DATA_STORE_PORTS: dict[int, str] = {
    1433: "SQL Server",
    1521: "Oracle",
    1883: "MQTT",
    2181: "ZooKeeper",
    2379: "etcd",
    2380: "etcd peers",
    3306: "MySQL/MariaDB",
    4222: "NATS",
    5432: "PostgreSQL",
    5671: "RabbitMQ over TLS",
    5672: "RabbitMQ",
    5984: "CouchDB",
    6379: "Redis",
    6432: "PgBouncer",
    6650: "Pulsar",
    7687: "Neo4j",
    8086: "InfluxDB",
    8123: "ClickHouse HTTP",
    8200: "Vault",
    8300: "Consul",
    8500: "Consul HTTP",
    8883: "MQTT over TLS",
    9000: "ClickHouse, MinIO",
    9042: "Cassandra",
    9092: "Kafka",
    9200: "Elasticsearch/OpenSearch",
    9300: "Elasticsearch transport",
    11211: "memcached",
    15672: "RabbitMQ management",
    26379: "Redis Sentinel",
    27017: "MongoDB",
}

_NAME = re.compile(r"^\.?[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*$")
_BRACKETED = re.compile(r"^\[(?P<inside>[^\[\]]+)\](?::(?P<port>[^:]*))?$")


def normalised_address(address: str) -> IPAddress:
    """An address as it is checked: no IPv6 zone, IPv4-mapped IPv6 as IPv4
    (::ffff:169.254.169.254 is 169.254.169.254). Raises ValueError if it is none."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def host_port(host: str, port: int) -> str:
    """`10.0.0.5:5432`, `[::1]:5432`: how an entry naming this port is written."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(frozen=True)
class Entry:
    """One allow-list entry: a name or a network, and a port or None (any port but
    DATA_STORE_PORTS)."""

    name: str | None
    network: IPNetwork | None
    port: int | None

    def __str__(self) -> str:
        if self.name is not None:
            where = self.name
        else:
            assert self.network is not None
            single = self.network.prefixlen == self.network.max_prefixlen
            where = str(self.network.network_address if single else self.network)
        if self.port is None:
            return where
        if self.network is not None and self.network.version == 6:
            return f"[{where}]:{self.port}"
        return f"{where}:{self.port}"

    def matches(self, host: str, address: IPAddress | None) -> bool:
        """Whether the entry names this host, or its network holds this address."""
        if self.name is not None:
            host = host.lower().rstrip(".")
            if self.name.startswith("."):
                return host.endswith(self.name) or host == self.name[1:]
            return host == self.name
        assert self.network is not None
        return (
            address is not None
            and address.version == self.network.version
            and address in self.network
        )

    def admits_port(self, port: int) -> bool:
        if self.port is not None:
            return port == self.port
        return port not in DATA_STORE_PORTS


def _port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise ValueError("a port is a number from 1 to 65535")
    return int(text)


def _network(text: str) -> IPNetwork | None:
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        return None


def parse_entry(text: str) -> Entry:
    """One entry as written (case and a trailing dot ignored). Raises ValueError
    saying what is expected."""
    entry = text.strip().lower()
    bracketed = _BRACKETED.match(entry)
    if bracketed:
        network = _network(bracketed["inside"])
        if network is None or network.version != 6:
            raise ValueError("brackets hold an IPv6 address or network, e.g. [::1]:8080")
        port = bracketed["port"]
        return Entry(None, network, None if port is None else _port(port))
    network = _network(entry)
    if network is not None:
        return Entry(None, network, None)
    if entry.count(":") > 1 or "[" in entry or "]" in entry:
        raise ValueError(
            "it is no address or network; write an IPv6 address with a port as "
            "[address]:port, e.g. [::1]:8080 or [fd00::/8]:8080"
        )
    where, colon, port = entry.partition(":")
    where = where.rstrip(".")
    network = _network(where)
    if network is None and not _NAME.match(where):
        raise ValueError(
            "it is no host name, .domain, address or network (e.g. vllm.internal, "
            ".inference.internal, 10.20.0.0/16, each with an optional :port)"
        )
    return Entry(None if network else where, network, _port(port) if colon else None)


def parse_entries(entries: Iterable[str], *, setting: str) -> tuple[Entry, ...]:
    """Every entry of the list `setting` names, blank ones skipped. Raises ValueError
    naming the list and the first malformed entry."""
    parsed = []
    for entry in entries:
        if not entry.strip():
            continue
        try:
            parsed.append(parse_entry(entry))
        except ValueError as error:
            raise ValueError(f"{setting} lists {entry.strip()!r}: {error}.") from error
    return tuple(parsed)
