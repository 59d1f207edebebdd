"""Checking that a server can listen on an address before any work starts (``trnprof serve``, ``record --serve``)."""

from __future__ import annotations

from profiler.errors import CommandError


def check_can_listen(host: str, port: int) -> None:
    """CommandError naming the address when ``host:port`` cannot be bound (not a TCP port, in use, no such
    address)."""
    import socket

    if not 0 < port < 65536:
        raise CommandError(f"--port {port} is not a TCP port (1-65535)")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise CommandError(f"cannot resolve --host {host}: {exc}") from None
    family, _type, _proto, _name, addr = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(addr)
        except OSError as exc:
            raise CommandError(f"cannot listen on {host}:{port}: {exc.strerror or exc} (pick another --port, or "
                               "stop the program using it)") from None


__all__ = ["check_can_listen"]
