"""A local API Gateway (REST API, Lambda proxy integration) routing to the template's functions."""

from __future__ import annotations

import base64
import json
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TextIO
from urllib.parse import parse_qsl, unquote, urlsplit

from devstack.auth import LocalUserPool
from devstack.runtime import FunctionPool
from devstack.template import Route, Stack

MAX_BODY = 10 * 1024 * 1024  # API Gateway's payload limit
LISTEN_BACKLOG = 128  # socketserver's default of 5 drops SYNs under a burst (clients stall 1-63 s, then time out)


class ApiServer(ThreadingHTTPServer):
    """One thread per connection, a listen backlog that holds a burst of clients, no join on close."""

    request_queue_size = LISTEN_BACKLOG
    daemon_threads = True
    block_on_close = False

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client hanging up is not a server error
            super().handle_error(request, client_address)


def proxy_event(
    route: Route, method: str, raw_path: str, headers: dict[str, list[str]], body: bytes, stage: str, params: dict[str, str]
) -> dict[str, Any]:
    """An API Gateway REST proxy event, shaped like ``sam local generate-event apigateway aws-proxy``."""
    split = urlsplit(raw_path)
    query: dict[str, list[str]] = {}
    for key, value in parse_qsl(split.query, keep_blank_values=True):
        query.setdefault(key, []).append(value)
    text_body: str | None
    encoded = False
    if not body:
        text_body = None
    else:
        try:
            text_body = body.decode("utf-8")
        except UnicodeDecodeError:
            text_body, encoded = base64.b64encode(body).decode(), True
    now = time.time()
    return {
        "resource": route.path,
        "path": split.path,  # REST APIs pass the path still percent-encoded (pathParameters decoded)
        "httpMethod": method,
        "headers": {k: v[-1] for k, v in headers.items()},
        "multiValueHeaders": headers,
        "queryStringParameters": {k: v[-1] for k, v in query.items()} or None,
        "multiValueQueryStringParameters": query or None,
        "pathParameters": params or None,
        "stageVariables": None,
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "local",
            "resourceId": "local",
            "resourcePath": route.path,
            "httpMethod": method,
            "path": f"/{stage}{split.path}",
            "stage": stage,
            "protocol": "HTTP/1.1",
            "requestId": str(uuid.uuid4()),
            "requestTime": time.strftime("%d/%b/%Y:%H:%M:%S +0000", time.gmtime(now)),
            "requestTimeEpoch": int(now * 1000),
            "identity": {"sourceIp": "127.0.0.1", "userAgent": headers.get("User-Agent", [""])[-1]},
            "domainName": "localhost",
        },
        "body": text_body,
        "isBase64Encoded": encoded,
    }


def match(routes: list[Route], method: str, path: str) -> tuple[Route | None, dict[str, str], list[str]]:
    """The route for (method, path), its path parameters, and the methods the path allows."""
    allowed: list[str] = []
    for route in routes:
        found = route.regex.match(path)
        if not found:
            continue
        allowed.append(route.method)
        if route.method in (method, "ANY"):
            return route, {k: unquote(v) for k, v in found.groupdict().items()}, allowed
    return None, {}, allowed


class LocalApi:
    def __init__(
        self, stack: Stack, host: str, port: int, stage: str = "dev", concurrency: int = 4, access_log: TextIO | None = None
    ) -> None:
        self.stack = stack
        self.access_log = access_log  # one line per request: method path status ms
        self.stage = stage
        self.user_pool = LocalUserPool() if stack.authorizer_header else None
        self.pools = {
            name: FunctionPool(fn, concurrency) for name, fn in stack.functions.items() if any(r.function == name for r in stack.routes)
        }
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            status: int | str = "-"
            began: float = 0.0
            logged: bool = False

            def log_message(self, fmt: str, *args: Any) -> None:  # the access log below replaces it
                pass

            def send_response(self, code: int, message: str | None = None) -> None:
                self.status = code
                super().send_response(code, message)

            def end_headers(self) -> None:
                # the access line goes out before the response does: a client that got its answer
                # (and then stops the stack) finds the line already written
                self._log()
                super().end_headers()

            def _log(self) -> None:
                if not self.logged:
                    self.logged = True
                    api.log_request(self.command, self.path, self.status, time.perf_counter() - self.began)

            def _handle(self) -> None:
                self.began, self.logged = time.perf_counter(), False
                self.status = "-"
                try:
                    api.handle(self)
                finally:
                    self._log()

            def __getattr__(self, name: str) -> Any:  # any method (TRACE, QUERY...) reaches the router
                if name.startswith("do_"):
                    return self._handle
                raise AttributeError(name)

        self.server = ApiServer((host, port), Handler)
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def warm(self) -> None:
        threads = [threading.Thread(target=p.warm) for p in self.pools.values()]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def start(self) -> None:
        self.thread = threading.Thread(target=self.server.serve_forever, name="local-api", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        for pool in self.pools.values():
            pool.close()

    def log_request(self, method: str, path: str, status: int | str, seconds: float) -> None:
        if self.access_log is not None:
            self.access_log.write(f"{method} {path} {status} {seconds * 1000:.0f}ms\n")
            self.access_log.flush()

    def handle(self, req: BaseHTTPRequestHandler) -> None:
        length = int(req.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            return self._send(req, 413, {"Content-Type": "application/json"}, b'{"message":"Request Too Long"}')
        body = req.rfile.read(length) if length else b""
        path = urlsplit(req.path).path
        route, params, allowed = match(self.stack.routes, req.command, path)
        if route is None:
            if allowed:  # a known resource, another method
                headers = {"Content-Type": "application/json", "Allow": ", ".join(sorted(set(allowed)))}
                return self._send(req, 405, headers, b'{"message":"Method Not Allowed"}')
            # API Gateway answers unknown resources with 403 "Missing Authentication Token".
            return self._send(req, 403, {"Content-Type": "application/json"}, b'{"message":"Missing Authentication Token"}')
        headers: dict[str, list[str]] = {}
        for key, value in req.headers.items():
            headers.setdefault(key, []).append(value)
        event = proxy_event(route, req.command, req.path, headers, body, self.stage, params)
        if self.user_pool is not None and self.stack.authorizer_header:
            claims = self.user_pool.verify(req.headers.get(self.stack.authorizer_header))
            if claims is None:  # API Gateway refuses before the function runs
                return self._send(req, 401, {"Content-Type": "application/json"}, b'{"message":"Unauthorized"}')
            event["requestContext"]["authorizer"] = {"claims": claims}
        status, payload = self.pools[route.function].invoke(event)
        if status != "ok" or not isinstance(payload, dict) or "statusCode" not in payload:
            code = 504 if status == "timeout" else 502
            return self._send(req, code, {"Content-Type": "application/json"}, b'{"message": "Internal server error"}')
        out_headers = dict(payload.get("headers") or {})
        for key, values in (payload.get("multiValueHeaders") or {}).items():
            out_headers[key] = ", ".join(values)
        raw = payload.get("body") or ""
        data = base64.b64decode(raw) if payload.get("isBase64Encoded") else raw.encode()
        self._send(req, int(payload["statusCode"]), out_headers, data)

    @staticmethod
    def _send(req: BaseHTTPRequestHandler, status: int, headers: dict[str, str], data: bytes) -> None:
        req.send_response(status)
        for key, value in headers.items():
            if key.lower() != "content-length":
                req.send_header(key, value)
        req.send_header("Content-Length", str(len(data)))
        req.end_headers()
        if req.command != "HEAD":
            req.wfile.write(data)


def dumps(obj: Any) -> bytes:
    return json.dumps(obj).encode()
