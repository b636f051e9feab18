"""A loopback HTTP server for the tests of mt's downloads (mt import hf's Hub, mt data's corpora
and test sets): files at URL paths, Range requests answered as file hosts answer them (206 and
Content-Range), and misbehaviour on demand: a connection cut halfway, or no answer at all."""

from __future__ import annotations

import http.server
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Collection

# What a path serves: its bytes, or a function of the query ({name: value}) giving them (None:
# a 404), as an API answers.
Content = bytes | Callable[[dict[str, str]], bytes | None]


class FileServer:
    """Serves `files` (URL path -> Content) on 127.0.0.1 at `url`; anything else is a 404.

    cut: paths whose body stops halfway, after a full Content-Length, for their first `cuts`
    requests. silent: every request waits 5 s and ends with no answer. ranges: answer Range
    requests (else the whole file, 200, as servers without range support do). `requests` lists
    (path with query, Range header or None) in arrival order."""

    def __init__(self, files: dict[str, Content], cut: Collection[str] = (),
                 cuts: int = 1_000_000, silent: bool = False, ranges: bool = True):
        self.files, self.cuts_left = files, dict.fromkeys(cut, cuts)
        self.silent, self.ranges = silent, ranges
        self.requests: list[tuple[str, str | None]] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                server.requests.append((self.path, self.headers.get("Range")))
                if server.silent:
                    time.sleep(5)
                    return
                data = server.content(self.path)
                if data is None:
                    self.send_error(404, "Not Found")
                    return
                start = server.range_start(self.headers.get("Range"), len(data))
                if start is not None and start >= len(data):
                    self.send_error(416, "Range Not Satisfiable")
                    return
                body = data[start or 0:]
                self.send_response(206 if start is not None else 200)
                self.send_header("Content-Length", str(len(body)))
                if start is not None:
                    self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
                self.end_headers()
                path = urllib.parse.urlsplit(self.path).path
                if server.cuts_left.get(path, 0) > 0:
                    server.cuts_left[path] -= 1
                    body = body[: len(body) // 2]
                    self.close_connection = True
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        # shutdown() waits up to one poll interval: the default 0.5 s, paid by every test
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02},
                         daemon=True).start()

    def content(self, path_and_query: str) -> bytes | None:
        parts = urllib.parse.urlsplit(path_and_query)
        found = self.files.get(parts.path)
        if callable(found):
            return found(dict(urllib.parse.parse_qsl(parts.query)))
        return found

    def range_start(self, header: str | None, size: int) -> int | None:
        found = re.fullmatch(r"bytes=(\d+)-", header or "")
        return int(found[1]) if found and self.ranges else None

    def ranged(self) -> list[str]:
        """The Range headers received."""
        return [r for _, r in self.requests if r]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> FileServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
