"""`mt serve`: a Translator kept loaded behind an HTTP API (JSON) and a page, with the requests
of many clients translated together.

batcher.py holds the queue and its worker (no web code); app.py the FastAPI app, its errors and
its request log; server.py the socket and uvicorn; page.html the page at `/`. FastAPI,
uvicorn and fastapi-offline are the serve extra: app.py and server.py import them, so the
command calls `require` first and imports those modules only then.
"""

from mt.errors import ConfigError

EXTRA = 'mt serve needs FastAPI, uvicorn and fastapi-offline: pip install "mt[serve]"'


def require() -> None:
    """A one-line ConfigError naming the extra, unless FastAPI, uvicorn and fastapi-offline (the
    API docs' files, served without a CDN) can be imported."""
    try:
        import fastapi  # noqa: F401
        import fastapi_offline  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise ConfigError(EXTRA) from None
