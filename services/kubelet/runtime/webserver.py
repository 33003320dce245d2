"""kubelite's built-in static web server: what the image catalog runs for ``nginx`` images.

It is not nginx, and says so: its ``Server`` header is ``kubelite-webserver/<kubelite version>``
whatever tag the pod asked for (``nginx:1.25`` and ``nginx:1.27`` run the same program). It
stands in for the stock nginx image in what people do with it in a tutorial: it binds the pod's
IP (``POD_IP``) on the container port (``KUBELITE_PORT``, else 80), answers ``/`` and
``/index.html`` with a page headed like nginx's welcome page (scripts look for "Welcome to
nginx!"), files under ``./html`` (the container's working directory) when present, a 404 page
otherwise, writes nginx-style access log lines to stdout and exits 0 on SIGTERM/SIGQUIT
(nginx's graceful shutdown). No configuration files, no proxying, no TLS, HTTP/1.1 only.

Run as a script with the standard library only; never imported by the kubelet.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path


def _software() -> str:
    try:
        return f"kubelite-webserver/{version('kubelite')}"
    except PackageNotFoundError:  # run from a tree that was never installed
        return "kubelite-webserver"


SOFTWARE = _software()

WELCOME = b"""<!DOCTYPE html>
<html>
<head>
<title>Welcome to nginx!</title>
<style>
html { color-scheme: light dark; }
body { width: 35em; margin: 0 auto;
font-family: Tahoma, Verdana, Arial, sans-serif; }
</style>
</head>
<body>
<h1>Welcome to nginx!</h1>
<p>If you see this page, the pod is running and serving on its IP. This is not nginx:
kubelite runs its own small static web server for every <code>nginx</code> image.</p>

<p>Put files under <code>html/</code> in the container's working directory to serve them.</p>
</body>
</html>
"""

NOT_FOUND = (
    b"<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n"
    b"<center><h1>404 Not Found</h1></center>\r\n<hr><center>"
    + SOFTWARE.encode()
    + b"</center>\r\n</body>\r\n</html>\r\n"
)


class Handler(BaseHTTPRequestHandler):
    server_version = SOFTWARE
    protocol_version = "HTTP/1.1"

    def version_string(self) -> str:
        return SOFTWARE  # not "<server_version> Python/3.x"

    def _body(self) -> tuple[int, bytes, str]:
        path = self.path.split("?", 1)[0]
        root = Path.cwd() / "html"
        if path in ("/", "/index.html") and not (root / "index.html").is_file():
            return 200, WELCOME, "text/html"
        candidate = (root / path.lstrip("/")).resolve()
        if candidate.is_dir():
            candidate = candidate / "index.html"
        if root.is_dir() and candidate.is_file() and root.resolve() in candidate.parents:
            ctype = "text/html" if candidate.suffix in (".html", ".htm") else "text/plain"
            return 200, candidate.read_bytes(), ctype
        return 404, NOT_FOUND, "text/html"

    def _serve(self, *, head: bool) -> None:
        code, body, ctype = self._body()
        self._size = len(body)
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def do_GET(self) -> None:
        self._serve(head=False)

    def do_HEAD(self) -> None:
        self._serve(head=True)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        stamp = time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime())
        agent = self.headers.get("User-Agent", "-")
        line = (
            f'{self.client_address[0]} - - [{stamp}] "{self.requestline}" {code} '
            f'{getattr(self, "_size", 0)} "-" "{agent}" "-"\n'
        )
        sys.stdout.write(line)
        sys.stdout.flush()

    def log_message(self, format: str, *args: object) -> None:
        stamp = time.strftime("%Y/%m/%d %H:%M:%S")
        sys.stderr.write(f"{stamp} [error] {format % args}\n")
        sys.stderr.flush()


def main() -> int:
    host = os.environ.get("POD_IP", "127.0.0.1")
    port = int(os.environ.get("KUBELITE_PORT", "80"))
    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True

    def stop(*_: object) -> None:
        stamp = time.strftime("%Y/%m/%d %H:%M:%S")
        sys.stderr.write(f"{stamp} [notice] 1#1: signal 15 (SIGTERM) received, exiting\n")
        sys.stderr.flush()
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGQUIT, stop)
    stamp = time.strftime("%Y/%m/%d %H:%M:%S")
    sys.stderr.write(f"{stamp} [notice] 1#1: {SOFTWARE}, standing in for the nginx image\n")
    bound = server.server_address[1]  # KUBELITE_PORT=0 binds any free port
    sys.stderr.write(f"{stamp} [notice] 1#1: start worker processes on {host}:{bound}\n")
    sys.stderr.flush()
    server.serve_forever(poll_interval=0.1)
    server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
