"""The socket and uvicorn. The socket is bound before the model loads, so a port that is taken is
a one-line error at once (not after the load, and not uvicorn's traceback); SIGTERM or Ctrl-C
stops accepting, answers every request already read, lets the batcher finish, and returns.
"""

from __future__ import annotations

import errno
import logging
import signal
import socket
from collections.abc import Callable

import uvicorn

from mt.errors import ServerError

BACKLOG = 2048  # connections the kernel holds for uvicorn to accept (uvicorn's default)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_ADVICE = {
    errno.EADDRINUSE: "another program listens there; stop it or give another --port",
    errno.EACCES: "ports below 1024 need privileges; give a --port above 1023",
    errno.EADDRNOTAVAIL: "not an address of this machine; give one of its addresses, e.g. "
                         "--host 127.0.0.1",
}


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to host:port (port 0: one the system picks), not yet listening; a
    ServerError for a host that is not an address or a port that cannot be had."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except (socket.gaierror, UnicodeError) as e:
        raise ServerError(f"--host {host}: {getattr(e, 'strerror', None) or e}; give an address "
                          "or name of this machine, e.g. 127.0.0.1") from None
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # restart at once, as uvicorn
    try:
        sock.bind(address)
    except OSError as e:
        sock.close()
        advice = _ADVICE.get(e.errno)
        raise ServerError(f"{url(host, port)}: {e.strerror or e}" + (f"; {advice}" if advice
                                                                      else "")) from None
    return sock


def url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class _Server(uvicorn.Server):
    """uvicorn's server, telling once that it is stopping."""

    def __init__(self, config: uvicorn.Config, on_stop: Callable[[], None]):
        super().__init__(config)
        self.on_stop = on_stop

    def handle_exit(self, sig, frame) -> None:
        if not self.should_exit:
            self.on_stop()
        super().handle_exit(sig, frame)


class _Quiet(logging.Filter):
    """Drops uvicorn's line on the requests it cancels when the grace period ends: the request
    log has a line for each (503)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith("Cancel ")


def _stopped(signum, frame) -> None:
    """The signal handler while the server runs and just after: uvicorn (0.29 and later) raises
    the signal that stopped it again once it has stopped; it has stopped gracefully by then,
    which is a normal end (exit 0), not an interruption."""


def serve(app, sock: socket.socket, grace_s: float, on_start: Callable[[], None],
          on_stop: Callable[[], None], proxies: tuple[str, ...] = ()) -> None:
    """Serve app on sock (bound) until SIGTERM or Ctrl-C: then stop accepting, answer every
    request already read, end the app's lifespan, and return. Requests not answered within
    grace_s seconds (a client that stalls half-way through sending one, say) are cancelled and
    their connections closed. A second Ctrl-C stops at once. on_start: called once listening
    (a client may connect from then on, and is answered as soon as uvicorn runs); on_stop:
    called once, when the signal comes. proxies: the addresses whose X-Forwarded-For and
    X-Forwarded-Proto headers are believed (mt.serve.access.proxies); none: no one's (uvicorn
    would believe loopback's, so a client on this host could name itself anew each request)."""
    sock.listen(BACKLOG)
    on_start()
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on",
                            backlog=BACKLOG, timeout_graceful_shutdown=grace_s,
                            proxy_headers=bool(proxies), forwarded_allow_ips=list(proxies))
    logging.getLogger("uvicorn.error").addFilter(_Quiet())
    handlers = {s: signal.signal(s, _stopped) for s in STOP_SIGNALS}
    try:
        _Server(config, on_stop).run(sockets=[sock])
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
