#!/usr/bin/env python3
"""HTTP and HTTPS test server for kiln's HTTP client tests (stdlib only).

Listens on 127.0.0.1, on free ports it picks, and prints "HTTP_PORT HTTPS_PORT"
on one line once both accept connections (HTTPS_PORT is 0 without --cert).
Exits when its stdin closes, so a test that dies leaves no server behind.

Routes (any method):
  /echo            JSON of what arrived: method, path, query, headers, body, client_port;
                   ?close=1 closes the connection after the reply, without saying so
                   (a server dropping an idle keep-alive connection)
  /status/<code>   that status (503 adds Retry-After: 7)
  /stall?s=N       waits N seconds before answering
  /big?n=N         N bytes of 'x'; &chunked=1 sends them chunked, without Content-Length
  /multipart       parses a multipart/form-data body, answers JSON per part with sha256
  /auth            JSON of the Basic credentials received
"""
import argparse
import base64
import hashlib
import json
import os
import ssl
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so the client can reuse connections

    def setup(self):
        ctx = getattr(self.server, "ssl_ctx", None)
        if ctx is not None:
            # Handshake in this connection's thread, not the accept loop.
            self.request = ctx.wrap_socket(self.request, server_side=True)
        super().setup()

    def log_message(self, *args):
        pass

    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _send(self, status, body, ctype="text/plain", extra=()):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, obj, status=200, extra=()):
        self._send(status, json.dumps(obj).encode(), "application/json", extra)

    def _route(self):
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        body = self._body()
        if url.path == "/echo":
            self._json({
                "method": self.command,
                "path": url.path,
                "query": url.query,
                "headers": [[k, v] for k, v in self.headers.items()],
                "body": body.decode("latin-1"),
                "client_port": self.client_address[1],
            }, extra=[("X-Kiln-Echo", "1"), ("X-Multi", "first"), ("x-multi", "second")])
            if query.get("close", ["0"])[0] == "1":
                self.close_connection = True
        elif url.path.startswith("/status/"):
            code = int(url.path.rsplit("/", 1)[1])
            extra = [("Retry-After", "7")] if code == 503 else []
            self._send(code, ("status %d" % code).encode(), extra=extra)
        elif url.path == "/stall":
            time.sleep(float(query.get("s", ["10"])[0]))
            self._send(200, b"late")
        elif url.path == "/big":
            n = int(query.get("n", ["0"])[0])
            if query.get("chunked", ["0"])[0] == "1":
                self.send_response(200)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                left = n
                while left > 0:
                    k = min(left, 16384)
                    self.wfile.write(b"%x\r\n" % k + b"x" * k + b"\r\n")
                    left -= k
                self.wfile.write(b"0\r\n\r\n")
            else:
                self._send(200, b"x" * n)
        elif url.path == "/multipart":
            self._json(parse_multipart(self.headers.get("Content-Type", ""), body))
        elif url.path == "/auth":
            auth = self.headers.get("Authorization", "")
            user = password = None
            if auth.startswith("Basic "):
                user, _, password = base64.b64decode(auth[6:]).decode().partition(":")
            self._json({"user": user, "password": password})
        else:
            self._send(404, b"no such route")

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _route


def parse_multipart(content_type, body):
    """Splits a multipart/form-data body by hand (the cgi module is gone in 3.13)."""
    ctype, _, params = content_type.partition(";")
    boundary = None
    for p in params.split(";"):
        k, _, v = p.strip().partition("=")
        if k == "boundary":
            boundary = v.strip('"')
    if ctype.strip() != "multipart/form-data" or not boundary:
        return {"error": "not multipart/form-data: " + content_type}
    delim = b"--" + boundary.encode()
    chunks = body.split(b"\r\n" + delim)
    # The first chunk starts with the first delimiter; the last is "--\r\n".
    first = chunks[0]
    if not first.startswith(delim):
        return {"error": "body does not start with the boundary"}
    chunks[0] = first[len(delim):]
    parts = []
    for chunk in chunks:
        if chunk.startswith(b"--"):
            break
        head, _, data = chunk[2:].partition(b"\r\n\r\n")  # [2:]: the CRLF after the delimiter
        headers = {}
        for line in head.decode("latin-1").split("\r\n"):
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        disp = headers.get("content-disposition", "")
        fields = {}
        for item in disp.split(";")[1:]:
            k, _, v = item.strip().partition("=")
            fields[k] = v.strip('"')
        parts.append({
            "name": fields.get("name"),
            "filename": fields.get("filename"),
            "content_type": headers.get("content-type"),
            "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        })
    return {"parts": parts}


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # clients that reject our certificate or time out are expected here


def start(ssl_ctx=None):
    srv = Server(("127.0.0.1", 0), Handler)
    srv.ssl_ctx = ssl_ctx
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv.server_address[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cert")
    ap.add_argument("--key")
    args = ap.parse_args()
    http_port = start()
    https_port = 0
    if args.cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.cert, args.key)
        https_port = start(ctx)
    print(http_port, https_port, flush=True)
    sys.stdin.read()  # until the test closes our stdin or dies
    os._exit(0)


if __name__ == "__main__":
    main()
