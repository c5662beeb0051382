"""Fetching a serving engine's /metrics for the Your server page, within bounds: http(s) only, redirects only to the
same host, at most MAX_BYTES read in chunks, at most TIMEOUT seconds in all, and a Prometheus text content type.
Every way it can fail is one line (ScrapeError), never a traceback. The endpoint is the server owner's
(SPECVIZ_METRICS_URL); a typed one only on a loopback server (ui/your_server.py), since a fetch from an exposed
server could reach addresses only it can see.
"""

from __future__ import annotations

import os
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from http.client import HTTPException

from specviz.lessons.server_metrics import Scrape, ServerMetricsError, read_exposition

METRICS_URL_ENV = "SPECVIZ_METRICS_URL"
MAX_BYTES = 2 * 1024 * 1024
TIMEOUT = 5.0  # seconds for the whole fetch: connecting, waiting and reading
CHUNK = 64 * 1024
MAX_URL_CHARS = 2_000
TEXT_TYPES = ("text/plain", "application/openmetrics-text")
ACCEPT = "text/plain;version=0.0.4;q=0.9, application/openmetrics-text;version=1.0.0;q=0.5"


class ScrapeError(ServerMetricsError):
    """An endpoint that could not be read: refused, too slow, too large, not Prometheus text. One line."""


def configured_url() -> str:
    """The endpoint whoever started the server named (SPECVIZ_METRICS_URL), or ''."""
    return os.environ.get(METRICS_URL_ENV, "").strip()


def check_url(url: str) -> str:
    """The URL, if it is one this page fetches: http or https with a host; else ScrapeError."""
    url = url.strip()
    if len(url) > MAX_URL_CHARS:
        raise ScrapeError(f"the address is {len(url)} characters long; the limit is {MAX_URL_CHARS}")
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError as exc:
        raise ScrapeError(f"not an address: {exc}") from exc
    if parts.scheme not in ("http", "https"):
        raise ScrapeError(f"only http:// and https:// addresses are read, not {parts.scheme or 'one without a scheme'}")
    if not parts.hostname:
        raise ScrapeError("the address names no host")
    return url


class _SameHost(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to the same scheme, host and port (a /metrics that moved), never elsewhere."""

    max_redirections = 3

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # noqa: ANN001, ANN201 - urllib's signature
        old, new = urllib.parse.urlsplit(req.full_url), urllib.parse.urlsplit(newurl)
        if (new.scheme, new.hostname, new.port) != (old.scheme, old.hostname, old.port):
            raise ScrapeError(f"the endpoint redirects to another host ({new.scheme}://{new.hostname}): not followed")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _opener() -> urllib.request.OpenerDirector:
    # no proxy from the environment: the address is the one the owner named, fetched directly
    return urllib.request.build_opener(urllib.request.ProxyHandler({}), _SameHost())


def _body(response, started: float, timeout: float, limit: int) -> bytes:  # noqa: ANN001 - an http.client.HTTPResponse
    """The body, read a chunk at a time (read1: whatever one receive gives), within the deadline and the limit. A
    stalled body is cut by the socket's own timeout (set when it opened), a slow trickle by the deadline."""
    chunks, size, deadline = [], 0, started + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise ScrapeError(f"the endpoint took longer than {timeout:g} s to send its metrics")
        chunk = response.read1(CHUNK)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise ScrapeError(f"the endpoint sent more than {limit // (1024 * 1024)} MB: not a metrics page this reads")
        chunks.append(chunk)


def _content_type(response) -> tuple[str, bool]:  # noqa: ANN001
    """(charset, whether it is OpenMetrics) for a Prometheus text type; ScrapeError for any other type."""
    full = response.headers.get("Content-Type", "") or ""
    kind = full.split(";")[0].strip().lower()
    if kind not in TEXT_TYPES:
        shown = kind[:60] or "no content type"
        raise ScrapeError(
            f"the endpoint answered with {shown}, not Prometheus text (text/plain): is it the /metrics address?"
        )
    return response.headers.get_content_charset() or "utf-8", kind == "application/openmetrics-text"


def fetch_text(url: str, timeout: float | None = None, limit: int | None = None) -> tuple[str, bool]:
    """(text, whether it is OpenMetrics) of an endpoint; ScrapeError, one line, for anything else. The caps are
    TIMEOUT and MAX_BYTES unless given."""
    url = check_url(url)
    timeout = TIMEOUT if timeout is None else timeout
    started = time.monotonic()
    limit = MAX_BYTES if limit is None else limit
    request = urllib.request.Request(url, headers={"Accept": ACCEPT, "User-Agent": "specviz"})
    try:
        with _opener().open(request, timeout=timeout) as response:
            charset, openmetrics = _content_type(response)
            body = _body(response, started, timeout, limit)
    except ScrapeError:
        raise
    except urllib.error.HTTPError as exc:
        raise ScrapeError(f"the endpoint answered HTTP {exc.code} ({str(exc.reason)[:80]})") from exc
    except urllib.error.URLError as exc:
        raise ScrapeError(_unreachable(exc.reason, url, timeout)) from exc
    except (TimeoutError, socket.timeout) as exc:
        raise ScrapeError(f"the endpoint took longer than {timeout:g} s to answer") from exc
    except (OSError, HTTPException, ValueError) as exc:
        raise ScrapeError(f"the endpoint could not be read ({exc.__class__.__name__}: {str(exc)[:120]})") from exc
    try:
        return body.decode(charset), openmetrics
    except (LookupError, UnicodeDecodeError) as exc:
        raise ScrapeError(f"the endpoint's answer is not {charset[:20]} text") from exc


def _unreachable(reason: object, url: str, timeout: float) -> str:
    host = urllib.parse.urlsplit(url).netloc
    if isinstance(reason, ConnectionRefusedError):
        return f"nothing answers at {host} (connection refused): is the server running, on that port?"
    if isinstance(reason, (TimeoutError, socket.timeout)):
        return f"the endpoint took longer than {timeout:g} s to answer"
    if isinstance(reason, socket.gaierror):
        return f"the host of {host} is not known here"
    if isinstance(reason, ScrapeError):
        return str(reason)
    return f"the endpoint could not be reached ({str(reason)[:120]})"


def scrape(url: str, prefer: str | None = None, timeout: float | None = None, limit: int | None = None) -> Scrape:
    """One reading of an endpoint, timed now (time.monotonic), of the series `prefer` where it is there;
    ScrapeError or ServerMetricsError, one line."""
    text, openmetrics = fetch_text(url, timeout, limit)
    return read_exposition(text, time.monotonic(), openmetrics, prefer)
