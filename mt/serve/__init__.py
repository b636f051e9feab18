"""`mt serve`: a Translator kept loaded behind an HTTP API (JSON) and a page, with the requests
of many clients translated together.

batcher.py holds the queue and its worker (no web code); app.py the FastAPI app, its errors and
its request log; server.py the socket and uvicorn; page.html the page at `/`. FastAPI,
uvicorn, fastapi-offline, python-multipart (the compatible APIs' form bodies, forms.py), Babel
(the languages' names, pairs.py) and py3langid (language identification, detect.py) are the
serve extra: the modules here import them, so the command calls `require` first and imports
those modules only then.
"""

from mt.errors import ConfigError

EXTRA = ('mt serve needs FastAPI, uvicorn, fastapi-offline, python-multipart, Babel and '
         'py3langid: pip install "mt[serve]"')


def require() -> None:
    """A one-line ConfigError naming the extra, unless FastAPI, uvicorn, fastapi-offline (the
    API docs' files, served without a CDN), python-multipart, Babel and py3langid can be
    imported."""
    try:
        import babel  # noqa: F401
        import fastapi  # noqa: F401
        import fastapi_offline  # noqa: F401
        import py3langid  # noqa: F401
        import python_multipart  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise ConfigError(EXTRA) from None
