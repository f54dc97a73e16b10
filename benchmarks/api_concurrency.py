"""Requests per second of the OpenAI-compatible VQA backend against a local fake server, run by hand.

    python benchmarks/api_concurrency.py [--delay 0.05] [--requests 64] [--concurrency 1 8 32]

The server (127.0.0.1, random port, a thread per connection) answers every request after a fixed
``--delay``, like a serving engine (vLLM, SGLang) that is never the bottleneck; the client is
``metrics_adapters.qa.vqa.OpenAIVQA`` answering ``--requests`` questions about 64x64 images (PNG,
base64). The ceiling at concurrency ``c`` is ``c / delay`` requests/s; the table shows what the
client reaches and its share of that ceiling.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def serve(delay: float) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as a real server
        disable_nagle_algorithm = True  # headers and body in separate writes must not wait for an ACK

        def log_message(self, *a):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            time.sleep(delay)
            body = json.dumps({"choices": [{"message": {"content": "yes"}, "finish_reason": "stop"}],
                               "usage": {"prompt_tokens": 10, "completion_tokens": 1}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    class Server(ThreadingHTTPServer):
        request_queue_size = 128  # the default backlog of 5 refuses connections at concurrency > 5

    httpd = Server(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delay", type=float, default=0.05)
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    a = ap.parse_args()
    import numpy as np
    from PIL import Image

    from metrics_adapters.qa.vqa import OpenAIVQA, VQARequest

    rng = np.random.default_rng(0)
    imgs = [Image.fromarray(rng.integers(0, 255, (64, 64, 3), dtype=np.uint8)) for _ in range(8)]
    reqs = [VQARequest(f"is there a dog number {i}?", image=imgs[i % 8], image_id=f"{i}.png") for i in range(a.requests)]
    httpd = serve(a.delay)
    url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    print(f"fake server: {a.delay * 1000:.0f} ms per request; {a.requests} requests per run")
    print(f"{'concurrency':>11} {'seconds':>8} {'requests/s':>10} {'ceiling':>8} {'share':>6}")
    try:
        for c in a.concurrency:
            vqa = OpenAIVQA(url, "fake", api_key_env=None, max_concurrency=c, batch_size=16)
            vqa.load()
            vqa.answer(reqs[:c])  # warm the connections
            t0 = time.perf_counter()
            out = vqa.answer(reqs)
            dt = time.perf_counter() - t0
            if not all(x == "yes" for x in out):
                raise SystemExit(f"unexpected answers: {out[:3]}")
            rate, ceiling = a.requests / dt, c / a.delay
            print(f"{c:>11} {dt:>8.2f} {rate:>10.1f} {ceiling:>8.0f} {rate / ceiling:>6.0%}")
    finally:
        httpd.shutdown()


if __name__ == "__main__":
    main()
