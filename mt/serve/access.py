"""Who may use `mt serve`, and how much: API keys (`Authorization: Bearer KEY`) and a limit on
the lines each client may send per minute. Both are off unless `mt serve` is given them
(--api-key-file, --lines-per-minute). A client without a key is its address: the connection's,
or the X-Forwarded-For header's only from the proxies --forwarded-allow-ips names (else any
client could name itself anew with each request, and dodge the limit)."""

from __future__ import annotations

import hmac
import ipaddress
import math
import time
from collections import deque
from pathlib import Path

from mt.errors import ConfigError, DataError
from mt.textio import read_error

WINDOW_S = 60.0  # the limit counts the lines of the last minute
MAX_CLIENTS = 10_000  # clients remembered before those with nothing in the window are forgotten


def read_keys(path: Path) -> list[str]:
    """The keys of a file, one a line (blank lines and `#` comments skipped); a DataError for a
    file that cannot be read, a ConfigError for one with no key."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise read_error(e, path) from None
    except UnicodeDecodeError:
        raise DataError(f"--api-key-file {path}: not UTF-8 text; give one key a line") from None
    keys = [line.strip() for line in text.splitlines()]
    keys = [k for k in keys if k and not k.startswith("#")]
    if not keys:
        raise ConfigError(f"--api-key-file {path}: no key in the file; give one key a line")
    return keys


def proxies(given: str) -> tuple[str, ...]:
    """`--forwarded-allow-ips`: the proxies whose X-Forwarded-For names the client, as uvicorn
    takes them (addresses, networks as 10.0.0.0/8, or * for any), comma-separated; "" for
    none. A ValueError naming the first item that is none of these."""
    items = tuple(x.strip() for x in given.split(",") if x.strip())
    for item in items:
        try:
            if item != "*":
                ipaddress.ip_network(item)  # an address is a network of one
        except ValueError:
            raise ValueError(f"{item!r} is not an IP address or network (10.0.0.1, "
                             "10.0.0.0/8, ::1), nor *") from None
    return items


class ClientError(Exception):
    """A request the client must change: answered with status, {"error": message} and headers
    (401 and 429 say how: WWW-Authenticate, Retry-After)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.headers = status, headers or {}


class Access:
    """The keys a request must hold one of (none: open to all) and the lines per minute a
    client may send (0: no limit). A client is its key when keys are asked for, else its
    address."""

    def __init__(self, keys: list[str] = (), lines_per_minute: int = 0,
                 clock=time.monotonic):
        self.keys = [k.encode() for k in keys]
        self.lines_per_minute, self.clock = lines_per_minute, clock
        self._sent: dict[str, deque[tuple[float, int]]] = {}  # client: (time, lines) in window

    def client(self, headers: dict[str, str], address: str | None) -> str:
        """Who sends the request: its key (else its address); a ClientError 401 if keys are
        asked for and it holds none of them (mt's API: `Authorization: Bearer KEY`)."""
        scheme, _, key = headers.get("authorization", "").partition(" ")
        return self.holder(key if scheme.lower() == "bearer" else None, address,
                           "send the header `Authorization: Bearer KEY`")

    def holder(self, key: str | None, address: str | None, how: str) -> str:
        """Who holds key (else its address): a ClientError 401 if keys are asked for and key
        is none of them. how: where the API wants the key, for the message."""
        if not self.keys:
            return address or "?"
        given = (key or "").strip().encode()
        # compare_digest with every key: the time taken does not tell how much of a key matched
        if not any([hmac.compare_digest(given, k) for k in self.keys]):
            why = "a wrong API key" if given else "no API key"
            raise ClientError(401, f"{why}: {how} with a key this server was given",
                              {"WWW-Authenticate": "Bearer"})
        return given.decode()

    def admit(self, client: str, lines: int) -> None:
        """Count a request's lines against its client's minute, or a ClientError 429 (with
        Retry-After, the seconds until they fit) if they do not fit; 413 for more lines than
        the limit."""
        limit = self.lines_per_minute
        if not limit:
            return
        if lines > limit:
            raise ClientError(413, f"text: {lines} lines, more than this server takes from a "
                                   f"client in a minute ({limit}, --lines-per-minute); send "
                                   "them in parts")
        now = self.clock()
        if len(self._sent) > MAX_CLIENTS:
            self._forget(now)
        sent = self._sent.setdefault(client, deque())
        while sent and sent[0][0] <= now - WINDOW_S:
            sent.popleft()
        used = sum(n for _, n in sent)
        if used + lines > limit:
            freed, wait = used + lines - limit, WINDOW_S
            for t, n in sent:  # the oldest lines leave the window first
                freed -= n
                if freed <= 0:
                    wait = t + WINDOW_S - now
                    break
            seconds = max(1, math.ceil(wait))
            raise ClientError(429, f"{used} of this client's {limit} lines a minute are used "
                                   f"(--lines-per-minute); retry in {seconds} s",
                              {"Retry-After": str(seconds)})
        sent.append((now, lines))

    def _forget(self, now: float) -> None:
        for client in [c for c, sent in self._sent.items()
                       if not sent or sent[-1][0] <= now - WINDOW_S]:
            del self._sent[client]
