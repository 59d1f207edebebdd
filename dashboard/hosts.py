"""Which ``Host`` and ``Origin`` a request may carry: the defence against DNS rebinding and cross-site requests.

A server bound to 127.0.0.1 is still reachable from a hostile web page through DNS rebinding: the page's own name
(``evil.example``) is made to resolve to 127.0.0.1, and the browser then lets the page read the answers, since to
it they come from the page's origin.  Such requests carry ``Host: evil.example``.  So the dashboard answers only
requests whose ``Host`` is a loopback name or address (``localhost``, ``*.localhost``, ``127.x.x.x``, ``[::1]``,
``0.0.0.0``, any port) or a name it was told to accept, and whose ``Origin``, when the browser sends one, is such a
host too: anything else gets HTTP 403 with one line saying how to allow it.

``trnprof serve --host ADDRESS`` on a non-loopback address accepts that address as a host too; on every interface
(``0.0.0.0``, ``::``) it accepts any IP address as the host (a rebinding page can only send its own *name*), and
names only when ``--allow-host`` lists them (``*``: any name).  The environment
variable :data:`ALLOW_HOSTS_ENV` (comma-separated names, ``*`` for any) does the same for apps built by
:func:`dashboard.app.create_app` without ``allowed_hosts`` (a notebook's dashboard behind a proxy).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from flask import Flask, request

#: Extra host names for apps created without ``allowed_hosts`` (comma-separated; ``*``: any).
ALLOW_HOSTS_ENV = "TRNPROF_DASHBOARD_ALLOW_HOSTS"
#: Addresses that mean "every interface" (``0`` is how ``inet_aton`` spells 0.0.0.0).
WILDCARD_ADDRESSES = frozenset({"0.0.0.0", "::", "0", ""})
ANY_HOST = "*"


def strip_brackets(host: str) -> str:
    """``[::1]`` -> ``::1`` (an IPv6 address as written in URLs and Host headers)."""
    host = host.strip()
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def is_loopback(host: str) -> bool:
    """True for ``localhost``, ``*.localhost`` (which browsers resolve to loopback themselves) and loopback
    addresses (127.0.0.0/8, ::1), with or without IPv6 brackets."""
    name = strip_brackets(host).lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def is_address(host: str) -> bool:
    """True for an IP address (v4 or v6, with or without brackets), not a name."""
    try:
        ipaddress.ip_address(strip_brackets(host))
    except ValueError:
        return False
    return True


def url_host(host: str) -> str:
    """``host`` as written in a URL: IPv6 addresses in brackets (``[::1]``)."""
    name = strip_brackets(host)
    try:
        return f"[{name}]" if ipaddress.ip_address(name).version == 6 else name
    except ValueError:
        return name


def host_name(value: str) -> str | None:
    """The host of a ``Host`` header value (``name``, ``name:port``, ``[v6]:port``), lower-case without brackets;
    None when it is malformed."""
    if not value or any(c.isspace() or c in "/@?#\\" for c in value):
        return None
    try:
        parts = urlsplit("//" + value)
        name = parts.hostname
        _ = parts.port  # raises ValueError for a bad port
    except ValueError:
        return None
    return name.lower() if name else None


@dataclass(frozen=True)
class HostPolicy:
    """The hosts a server answers: loopback ones always, plus ``names``; any host when ``any_host``, any IP
    address when ``any_address`` (an ``Origin`` must then be the requested host itself, or a loopback one)."""

    names: frozenset[str] = frozenset()
    any_host: bool = False
    any_address: bool = False

    @classmethod
    def from_names(cls, names: Iterable[str]) -> HostPolicy:
        """A policy accepting ``names`` (``*``: any host) besides the loopback ones."""
        cleaned = {strip_brackets(n).lower() for n in names if n and n.strip()}
        return cls(frozenset(cleaned - {ANY_HOST}), ANY_HOST in cleaned)

    @classmethod
    def from_environment(cls) -> HostPolicy:
        """The policy :data:`ALLOW_HOSTS_ENV` asks for (loopback only when it is unset)."""
        return cls.from_names(os.environ.get(ALLOW_HOSTS_ENV, "").split(","))

    @classmethod
    def for_server(cls, bind_host: str, allowed: Iterable[str] = ()) -> HostPolicy:
        """What ``trnprof serve --host bind_host [--allow-host NAME ...]`` accepts: loopback hosts and ``allowed``;
        also ``bind_host`` when it is one non-loopback address; any host when it is every interface and no
        ``allowed`` names restrict it -- any IP address, that is: a DNS-rebinding page sends its own name, so names
        (``box.lan``) need ``--allow-host`` (``*`` for any)."""
        names = [n for n in allowed if n and n.strip()]
        bind = strip_brackets(bind_host)
        if bind in WILDCARD_ADDRESSES:
            return cls.from_names(names) if names else cls(any_address=True)
        return cls.from_names([*names, bind] if not is_loopback(bind) else names)

    def allows(self, name: str | None) -> bool:
        """Whether requests for host ``name`` (from :func:`host_name`) are answered: loopback ones, the
        every-interface addresses (``http://0.0.0.0:PORT`` reaches a local server; no hostile name can appear as
        one), ``names``, or any when ``any_host``."""
        if name is None:
            return False
        return self.any_host or is_loopback(name) or name in WILDCARD_ADDRESSES or name in self.names or \
            (self.any_address and is_address(name))

    def refusal(self, host: str | None, origin: str | None) -> str | None:
        """Why a request with these ``Host`` and ``Origin`` headers is refused; None when it is not."""
        served = host_name(host or "")
        if not self.allows(served):
            if self.any_address:
                return (f"Host {str(host)[:80]!r} is not served: the dashboard answers the machine's IP addresses "
                        "and localhost, not names (this protects it from DNS rebinding); open it at "
                        "http://ADDRESS:PORT/, or start it with `trnprof serve --allow-host NAME`")
            return (f"Host {str(host)[:80]!r} is not served: the dashboard answers localhost / 127.0.0.1 / [::1] "
                    "(this protects it from DNS rebinding); open it at http://localhost:PORT/, or start it with "
                    "`trnprof serve --allow-host NAME`")
        if origin is None:
            return None
        parts = urlsplit(origin)
        try:
            name = parts.hostname if parts.scheme in ("http", "https") else None
            _ = parts.port
        except ValueError:
            name = None
        name = name.lower() if name else None
        # Serving any host, a page may still only call the dashboard from the dashboard's own origin.
        local = name is not None and (is_loopback(name) or name in WILDCARD_ADDRESSES)
        if not (self.allows(name) and (not (self.any_host or self.any_address) or name == served or local)):
            return (f"Origin {origin[:80]!r} may not use the dashboard (a page of another site); open the dashboard "
                    "itself, or start it with `trnprof serve --allow-host NAME`")
        return None


def install_host_check(server: Flask, policy: HostPolicy) -> None:
    """Refuse (HTTP 403, one line) every request :meth:`HostPolicy.refusal` refuses."""

    @server.before_request
    def _check_host() -> Any:
        reason = policy.refusal(request.headers.get("Host"), request.headers.get("Origin"))
        if reason is not None:
            return reason + "\n", 403, {"Content-Type": "text/plain; charset=utf-8"}
        return None
