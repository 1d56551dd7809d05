"""The SSRF guard: which addresses a fetch may reach, checked before connecting and on the connected socket.

Non-http(s) schemes and hosts resolving to private, loopback, link-local, reserved or multicast addresses are
refused before any connection: every range of IANA's IPv4 and IPv6 special-purpose registries that is not globally
reachable (whatever this Python's :mod:`ipaddress` knows), the deprecated site-local ``fec0::/10`` and 6to4-relay
``192.88.99.0/24``, and IPv6 forms that embed such an IPv4 address (``::a.b.c.d``, ``::ffff:a.b.c.d``, the
IPv4-translated ``::ffff:0:a.b.c.d``, NAT64, 6to4, Teredo, ISATAP). :class:`AddressPolicy` says which non-public
hosts are admitted: ``allowed_private_hosts`` admits the listed hosts or addresses, each in its own forms only
(``127.0.0.1`` admits ``127.0.0.1`` and a name resolving to it, never ``::127.0.0.1`` or ``::ffff:127.0.0.1``);
``allow_private=True`` without a list admits all private space except link-local (cloud metadata).
:meth:`AddressPolicy.check_peer` checks the address a connection actually reached
(:class:`~memento.web.guarded_adapter.GuardedAdapter`: DNS rebinding).

Example:
    >>> import ipaddress
    >>> from memento.web.address_policy import AddressPolicy, is_public
    >>> is_public(ipaddress.ip_address("::ffff:127.0.0.1")), is_public(ipaddress.ip_address("8.8.8.8"))
    (False, True)
    >>> AddressPolicy(allowed_private_hosts={"127.0.0.1"}).admits_private("::127.0.0.1")
    False
"""

from __future__ import annotations

import ipaddress
import socket
from typing import TypeAlias
from urllib.parse import urlsplit

from memento.web.errors import Blocked, FetchFailed

__all__ = ["AddressPolicy", "IPAddress", "embedded_ipv4", "host_form", "is_global", "is_public", "literal_ip"]

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215 local-use translation: never public
_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # RFC 2765 IPv4-translated (SIIT): ::ffff:0:a.b.c.d
_ISATAP_IDS = (0x00005EFE, 0x02005EFE)

#: Ranges that are not globally reachable but that some Python versions' ``ipaddress`` reports as global: IANA's
#: special-purpose registries (entries "Globally Reachable: False", and deprecated ones), checked whatever the
#: interpreter's own table holds (3.11 before 3.11.10 still took most of 192.0.0.0/24 for global).
_NOT_GLOBAL = tuple(
    ipaddress.ip_network(net)
    for net in (
        "0.0.0.0/8",  # "this network"
        "100.64.0.0/10",  # shared address space (carrier-grade NAT)
        "192.0.0.0/29",  # IETF protocol assignments (192.0.0.0/24 but the anycast .9 and .10): IPv4 service
        "192.0.0.8/32",  # continuity, dummy address (RFC 7600)
        "192.0.0.11/32",
        "192.0.0.12/30",
        "192.0.0.16/28",
        "192.0.0.32/27",
        "192.0.0.64/26",
        "192.0.0.128/25",
        "192.0.2.0/24",  # TEST-NET-1
        "192.88.99.0/24",  # deprecated 6to4 relay anycast (RFC 7526)
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # TEST-NET-2
        "203.0.113.0/24",  # TEST-NET-3
        "240.0.0.0/4",  # reserved, and the limited broadcast 255.255.255.255
        "::/128",  # unspecified
        "::1/128",  # loopback
        "::ffff:0:0/96",  # IPv4-mapped
        "::ffff:0:0:0/96",  # IPv4-translated (RFC 2765)
        "64:ff9b:1::/48",  # local-use IPv4/IPv6 translation (RFC 8215)
        "100::/64",  # discard-only (RFC 6666)
        "100:0:0:1::/64",  # dummy IPv6 prefix (RFC 9780)
        "2001::/23",  # IETF protocol assignments (Teredo's embedded client is checked too)
        "2001:db8::/32",  # documentation
        "3fff::/20",  # documentation (RFC 9637)
        "5f00::/16",  # segment routing SIDs (RFC 9602)
        "fc00::/7",  # unique local
        "fe80::/10",  # link-local
        "fec0::/10",  # site-local (deprecated by RFC 3879, still routed inside some sites)
    )
)


def embedded_ipv4(ip: IPAddress) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries: IPv4-mapped (``::ffff:a.b.c.d``), IPv4-compatible
    (``::a.b.c.d``), IPv4-translated (``::ffff:0:a.b.c.d``), NAT64 (``64:ff9b::/96`` and the local-use
    ``64:ff9b:1::/48``), 6to4 (``2002::/16``), Teredo (``2001::/32``, server and client) and ISATAP interface
    identifiers."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return []
    value = int(ip)
    low = ipaddress.IPv4Address(value & 0xFFFFFFFF)
    found: list[ipaddress.IPv4Address] = []
    if ip.ipv4_mapped is not None:
        found.append(ip.ipv4_mapped)
    if value >> 32 == 0 and value > 1:  # ::a.b.c.d (deprecated IPv4-compatible form)
        found.append(low)
    if ip in _NAT64 or ip in _NAT64_LOCAL or ip in _TRANSLATED:
        found.append(low)
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip.teredo is not None:
        found.extend(ip.teredo)
    if (value >> 32) & 0xFFFFFFFF in _ISATAP_IDS:
        found.append(low)
    return found


def is_global(ip: IPAddress) -> bool:
    """Globally reachable unicast: ``ipaddress`` says global, and no special-purpose range says otherwise."""
    if not ip.is_global or ip.is_multicast:
        return False
    plain = ip if isinstance(ip, ipaddress.IPv4Address) else ipaddress.IPv6Address(int(ip))  # without a scope id
    return not any(plain.version == net.version and plain in net for net in _NOT_GLOBAL)


def is_public(ip: IPAddress) -> bool:
    """A global unicast address whose embedded IPv4 addresses (if any) are global unicast too."""
    return is_global(ip) and all(is_global(v4) for v4 in embedded_ipv4(ip))


def host_form(host: str) -> str:
    """How a host is compared with ``allowed_private_hosts``: a name lower-cased without brackets or a final dot,
    an address in its canonical text (``0:0::1`` and ``[::1]`` are ``::1``; ``::127.0.0.1`` stays ``::7f00:1``,
    which is not ``127.0.0.1``)."""
    text = str(host).strip().lower().strip("[]").rstrip(".")
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return text


def literal_ip(host: str) -> IPAddress | None:
    """``host`` as an address when it is one (``None`` for a name)."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


class AddressPolicy:
    """Which targets a fetcher may reach: public unicast addresses always, non-public ones as configured.

    Args:
        allow_private: admit private/loopback targets (local test servers, intranets); link-local only if listed.
        allowed_private_hosts: these hosts/IPs may be private (``{"127.0.0.1"}``), and no other.

    Example:
        >>> policy = AddressPolicy(allow_private=True)
        >>> policy.admits_private("10.0.0.1", ipaddress.ip_address("10.0.0.1"))
        True
        >>> policy.admits_private("169.254.169.254", ipaddress.ip_address("169.254.169.254"))
        False
    """

    def __init__(
        self, *, allow_private: bool = False, allowed_private_hosts: set[str] | frozenset[str] | None = None
    ) -> None:
        self.allow_private = allow_private
        self.allowed_private_hosts = frozenset(host_form(h) for h in allowed_private_hosts or ()) or None

    def check_target(self, url: str, *, original: str) -> bool:
        """Refuse non-http(s) URLs and private targets, resolving the host without connecting to it.

        Returns:
            Whether the host resolved to a non-public address that the policy admits."""
        try:
            parts = urlsplit(url)
        except ValueError as exc:
            raise Blocked(f"malformed URL {url!r}: {exc}", url=original) from None
        if parts.scheme.lower() not in ("http", "https"):
            raise Blocked(f"refused {url}: only http and https URLs are fetched", url=original)
        host = (parts.hostname or "").lower()
        if not host:
            raise Blocked(f"refused {url}: no host", url=original)
        try:
            port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
        except ValueError:
            raise Blocked(f"refused {url}: bad port", url=original) from None
        try:
            addresses = {ipaddress.ip_address(host)}
        except ValueError:
            try:
                infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
            except (socket.gaierror, UnicodeError) as exc:
                raise FetchFailed(f"cannot resolve {host}: {exc}", url=original) from None
            addresses = {ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in infos}
        for ip in addresses:
            if not self.allows(host, ip):
                raise Blocked(f"refused {url}: {host} resolves to the non-public address {ip}", url=original)
        return not all(is_public(ip) for ip in addresses)

    def allows(self, host: str, ip: IPAddress) -> bool:
        """Public unicast addresses always (an IPv6 address only when every IPv4 address it embeds is public too);
        a non-public one when its host or address is in ``allowed_private_hosts``, or under ``allow_private``
        without a list (link-local, the cloud metadata range, only when listed)."""
        if is_public(ip):
            return True
        return self.admits_private(host, ip)

    def admits_private(self, host: str, ip: IPAddress | None = None) -> bool:
        """Whether the current policy lets ``host`` (resolving to the non-public ``ip``) be fetched."""
        if self.allowed_private_hosts is not None:  # the host's own forms: its name, or the address it names
            names = {host_form(host)} | ({str(ip)} if ip is not None else set())  # never an embedded IPv4
            return bool(names & self.allowed_private_hosts)
        if not self.allow_private:
            return False
        return ip is None or not any(a.is_link_local for a in (ip, *embedded_ipv4(ip)))

    def check_peer(self, host: str, peer: str) -> None:
        """Check the address a connection actually reached (the client resolves the name again: DNS rebinding)."""
        host = host.strip("[]").lower()
        if not self.allows(host, ipaddress.ip_address(peer)):
            raise Blocked(f"refused {host}: the connection reached the non-public address {peer}", url=host)
