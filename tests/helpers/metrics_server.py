"""A local HTTP server a test starts, serving each serving engine's /metrics text and the ways an endpoint can fail
(tests/lessons/test_your_server.py, tests/ui/test_your_server_page.py, tests/browser/test_your_server_browser.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PROM = "text/plain; version=0.0.4; charset=utf-8"


def vllm_text(drafts: int, tokens: int, accepted: int, per_position=(), engine: str = "0", model: str = "m") -> str:
    """vLLM's spec_decode counters as its /metrics writes them (prometheus-client: _total and _created samples)."""
    lines = []
    for name, value in (("num_drafts", drafts), ("num_draft_tokens", tokens), ("num_accepted_tokens", accepted)):
        lines += [
            f"# HELP vllm:spec_decode_{name} Number of {name}.",
            f"# TYPE vllm:spec_decode_{name} counter",
            f'vllm:spec_decode_{name}_total{{engine="{engine}",model_name="{model}"}} {float(value)}',
            f'vllm:spec_decode_{name}_created{{engine="{engine}",model_name="{model}"}} 1.7e9',
        ]
    if per_position:
        lines.append("# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter")
        lines += [
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="{engine}",model_name="{model}",'
            f'position="{i}"}} {float(k)}'
            for i, k in enumerate(per_position)
        ]
    lines += ["# TYPE vllm:num_requests_running gauge", 'vllm:num_requests_running{model_name="m"} 3.0']
    return "\n".join(lines) + "\n"


LLAMA_CPP = """# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 6886
# TYPE llamacpp:spec_decode_num_drafts counter
llamacpp:spec_decode_num_drafts 87
# TYPE llamacpp:spec_decode_num_draft_tokens counter
llamacpp:spec_decode_num_draft_tokens 261
# TYPE llamacpp:spec_decode_num_accepted_tokens counter
llamacpp:spec_decode_num_accepted_tokens 167
# TYPE llamacpp:spec_decode_num_accepted_tokens_per_pos counter
llamacpp:spec_decode_num_accepted_tokens_per_pos{position="0"} 70
llamacpp:spec_decode_num_accepted_tokens_per_pos{position="1"} 55
llamacpp:spec_decode_num_accepted_tokens_per_pos{position="2"} 42
"""
LLAMA_CPP_PLAIN = "# TYPE llamacpp:prompt_tokens_total counter\nllamacpp:prompt_tokens_total 6886\n"
SGLANG = """# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{model_name="m"} 2.8
# TYPE sglang:spec_accept_rate gauge
sglang:spec_accept_rate{model_name="m"} 0.6
"""
OTHER = '# TYPE http_requests_total counter\nhttp_requests_total{code="200"} 1027\n'


class Handler(BaseHTTPRequestHandler):
    routes: dict = {}

    def log_message(self, *args) -> None:  # noqa: ANN002 - quiet
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        route = self.routes.get(self.path)
        if route is None:
            self.send_error(404)
            return
        route(self)


def answer(body: str, content_type: str = PROM):
    def send(handler: BaseHTTPRequestHandler) -> None:
        data = body.encode()
        handler.send_response(200)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    return send


def endless(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", PROM)
    handler.end_headers()
    line = b"# " + b"x" * 1022 + b"\n"
    try:
        for _ in range(100_000):  # 100 MB at most, should the reader never stop
            handler.wfile.write(line)
    except OSError:
        pass


def stalled(handler: BaseHTTPRequestHandler) -> None:
    time.sleep(3)


def stalled_body(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", PROM)
    handler.send_header("Content-Length", "100000")
    handler.end_headers()
    handler.wfile.write(b"# a start\n")
    handler.wfile.flush()
    time.sleep(3)


def redirect(to: str):
    def send(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(302)
        handler.send_header("Location", to)
        handler.end_headers()

    return send


@contextmanager
def metrics_server(extra: dict | None = None) -> Iterator[str]:
    """The server on a free localhost port, its routes below plus `extra`; yields its http://127.0.0.1:port."""
    sequence = iter([vllm_text(100, 300, 150, (80, 50, 20)), vllm_text(5, 15, 9, (4, 3, 2))])
    routes = {
        "/vllm": answer(vllm_text(10, 30, 15, (8, 5, 2))),
        "/llamacpp": answer(LLAMA_CPP),
        "/sglang": answer(SGLANG),
        "/openmetrics": answer(vllm_text(10, 30, 15) + "# EOF\n", "application/openmetrics-text; version=1.0.0"),
        "/restart": lambda h: answer(next(sequence))(h),
        "/html": answer("<html>hello</html>", "text/html; charset=utf-8"),
        "/json": answer("{}", "application/json"),
        "/other": answer(OTHER),
        "/endless": endless,
        "/stalled": stalled,
        "/stalled-body": stalled_body,
        "/same-host": redirect("/vllm"),
        "/elsewhere": redirect("http://metrics.example.invalid/metrics"),
        "/no-positions": answer(vllm_text(10, 30, 15)),
        **(extra or {}),
    }
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), type("Routes", (Handler,), {"routes": routes}))
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
