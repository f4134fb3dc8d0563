"""An SSRF guard for tools that open URLs the model (and so anyone in a chat) chose.

Two checks, both needed on every hop of a fetch, redirects included:
- `check_url`: the URL's form — http(s) only, no `user:pass@`, a host and a sane port;
- `resolve_public`: the host's addresses — every one must be public, or the URL is refused.
The caller then connects to an address this returned (never re-resolving the name), so a
DNS answer that changes between check and connect (rebinding) cannot reach an inner address.

Blocked ranges are listed explicitly instead of using `ipaddress.is_private`/`is_global`:
their exact contents vary between Python versions. Tests never rely on an allowance here: they
inject a `Resolver` that maps fake names to stand-in public addresses, and the fetch tool's
test-only `connect_override` dials those at a local server.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import Protocol

import httpx

from pallas.product.llm.tools.base import ToolError

ALLOWED_SCHEMES = frozenset({"http", "https"})
DEFAULT_PORTS = {"http": 80, "https": 443}

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_BLOCKED_V4 = tuple(
    ipaddress.IPv4Network(net)
    for net in (
        "0.0.0.0/8",  # "this network", includes the unspecified 0.0.0.0
        "10.0.0.0/8",  # RFC 1918
        "100.64.0.0/10",  # carrier-grade NAT; includes 100.100.100.200 (Alibaba metadata)
        "127.0.0.0/8",  # loopback
        "169.254.0.0/16",  # link-local; includes 169.254.169.254 (cloud metadata)
        "172.16.0.0/12",  # RFC 1918
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # TEST-NET-1 (documentation): never a real public host
        "192.88.99.0/24",  # 6to4 relay anycast
        "192.168.0.0/16",  # RFC 1918
        "198.18.0.0/15",  # benchmarking, used inside some networks
        "198.51.100.0/24",  # TEST-NET-2 (documentation)
        "203.0.113.0/24",  # TEST-NET-3 (documentation)
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, includes broadcast 255.255.255.255
    )
)
_BLOCKED_V6 = tuple(
    ipaddress.IPv6Network(net)
    for net in (
        "::/128",  # unspecified
        "::1/128",  # loopback
        "::/96",  # IPv4-compatible (deprecated): ::127.0.0.1 and friends
        "100::/64",  # discard-only
        "2001::/32",  # Teredo: tunnels to an obfuscated IPv4 address
        "2001:db8::/32",  # documentation: never a real public host
        "fc00::/7",  # unique local; includes fd00:ec2::254 (AWS metadata)
        "fe80::/10",  # link-local
        "fec0::/10",  # site-local (deprecated)
        "ff00::/8",  # multicast
    )
)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class BlockedAddressError(ToolError):
    """The URL leads to an inner address (loopback, private, metadata...)."""


class UnsafeUrlError(ToolError):
    """The URL's form is refused: not http(s), credentials in it, no host, bad port."""


class Resolver(Protocol):
    async def resolve(self, host: str, port: int) -> list[str]:
        """The addresses of `host`, as IP strings; raise `OSError` when it does not resolve."""
        ...


class SystemResolver:
    """The operating system's resolver, off the event loop."""

    async def resolve(self, host: str, port: int) -> list[str]:
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        return [str(info[4][0]) for info in infos]


def check_url(url: str | httpx.URL) -> httpx.URL:
    """Parse `url` the way the HTTP client will, and refuse forms that are never fetched.

    Parsing with httpx itself (not urllib) means the host checked is the host connected to.
    """
    try:
        parsed = url if isinstance(url, httpx.URL) else httpx.URL(url.strip())
    except (httpx.InvalidURL, TypeError, ValueError):
        raise UnsafeUrlError("网址格式不对") from None
    if parsed.scheme not in ALLOWED_SCHEMES:
        raise UnsafeUrlError(f"只能打开 http 或 https 网址，不支持：{parsed.scheme or '（空）'}")
    if parsed.userinfo:
        raise UnsafeUrlError("网址里带有用户名或密码，不能打开")
    if not parsed.raw_host:
        raise UnsafeUrlError("网址缺少主机名")
    if parsed.port is not None and not 0 < parsed.port < 65536:
        raise UnsafeUrlError(f"网址端口不对：{parsed.port}")
    return parsed


def url_port(url: httpx.URL) -> int:
    return url.port or DEFAULT_PORTS[url.scheme]


def url_host(url: httpx.URL) -> str:
    """The ASCII (IDNA) host, without IPv6 brackets: what DNS and the IP parser take."""
    return url.raw_host.decode("ascii")


async def resolve_public(host: str, port: int, resolver: Resolver) -> list[str]:
    """The host's addresses, if every one is public; otherwise `BlockedAddressError`.

    One inner address among public ones is enough to refuse: which one a client would pick
    is not ours to predict.
    """
    literal = _parse_ip(host.strip("[]"))
    if literal is not None:
        addresses = [literal]
    else:
        addresses = await _lookup(host, port, resolver)
    for address in addresses:
        if is_blocked(address):
            raise BlockedAddressError(f"拒绝访问内网或本机地址：{address}")
    return list(dict.fromkeys(str(address) for address in addresses))


async def _lookup(host: str, port: int, resolver: Resolver) -> list[IPAddress]:
    try:
        answers = await resolver.resolve(host, port)
    except (OSError, UnicodeError):
        raise ToolError(f"无法解析域名：{host[:100]}") from None
    addresses = [parsed for answer in answers if (parsed := _parse_ip(answer)) is not None]
    if not addresses or len(addresses) != len(answers):
        raise ToolError(f"无法解析域名：{host[:100]}")
    return addresses


def is_blocked(address: IPAddress) -> bool:
    """Whether connecting to `address` could reach this machine or its inner network."""
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_v4(address)
        if embedded is not None:
            return is_blocked(embedded)
        return address.is_reserved or any(address in net for net in _BLOCKED_V6)
    return address.is_reserved or any(address in net for net in _BLOCKED_V4)


def _embedded_v4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 form stands for: IPv4-mapped, 6to4 or NAT64."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _parse_ip(text: str) -> IPAddress | None:
    # getaddrinfo may answer link-local IPv6 with a zone ("fe80::1%eth0"); the zone is
    # irrelevant to the range check.
    try:
        return ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
