"""Open every page of the built site (site/) in headless Chromium and fail on what a reader would
meet: a broken link (an internal href whose page, file or #anchor does not exist), an empty page,
or markup left unrendered in the page's text (a reST role such as ``:class:``, a cross-reference
``[Name][counters.x]`` that did not resolve, a raw ``{{``, a ``<!-- docs:`` marker shown as text).
Code blocks and code spans are not searched: a page may show those as examples.

``python scripts/check_site.py [site]`` (``make docs`` runs it after the build). One browser for
every page, driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``: no port, no
websocket), the site served on a loopback port; the network is not needed.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

ROOT = Path(__file__).resolve().parent.parent
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
LEFT_MARKUP = {
    "a reST role": re.compile(r":(?:class|func|meth|mod|attr|exc|data|obj|ref|py:\w+):`"),
    "an unresolved cross-reference": re.compile(r"\[[^\]\n]+\]\[[\w.]+\]"),
    "a raw {{": re.compile(r"\{\{"),
    "a docs marker shown as text": re.compile(r"<!-- docs:"),
}
MIN_TEXT = 80  # characters of prose below which a page counts as empty

# What the page tells us: its prose (without code), every href, every id.
PROBE = """(() => {
  const main = document.querySelector('article') || document.body;
  const copy = main.cloneNode(true);
  copy.querySelectorAll('pre, code, script, style, .headerlink').forEach(e => e.remove());
  return {
    title: document.title,
    text: copy.innerText || '',
    hrefs: Array.from(document.querySelectorAll('a[href]'), a => a.href),
    ids: Array.from(document.querySelectorAll('[id]'), e => e.id),
    names: Array.from(document.querySelectorAll('a[name]'), e => e.name),
  };
})()"""


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise SystemExit("Chromium not found: scripts/ensure-chromium.sh installs it (Debian: apt-get install chromium)")


class Browser:
    """Headless Chromium driven over the DevTools protocol on fds 3 and 4 (NUL-separated JSON)."""

    def __init__(self) -> None:
        self.profile = tempfile.mkdtemp(prefix="check-site-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def fds() -> None:
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        self.process = subprocess.Popen(  # noqa: S603 - a fixed command line
            [chromium(), *FLAGS, f"--user-data-dir={self.profile}", "--remote-debugging-pipe", "about:blank"],
            preexec_fn=fds,  # noqa: PLW1509 - dup2 only, before exec
            close_fds=False,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.call("Page.enable", session=True)

    def _read(self) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed the DevTools pipe")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        decoded: dict[str, Any] = json.loads(message)
        return decoded

    def call(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        self._next += 1
        request: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session:
            request["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(request).encode() + b"\0")
        while True:
            message = self._read()
            if message.get("id") == self._next:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            self.events.append(message)

    def wait_for(self, event: str, timeout: float = 60) -> None:
        began = time.monotonic()
        while not any(e.get("method") == event for e in self.events):
            if time.monotonic() - began > timeout:
                raise RuntimeError(f"no {event} within {timeout} s")
            self.events.append(self._read())

    def open(self, url: str) -> dict[str, Any]:
        self.events.clear()
        self.call("Page.navigate", session=True, url=url)
        self.wait_for("Page.domContentEventFired")
        answer = self.call("Runtime.evaluate", session=True, expression=PROBE, returnByValue=True)
        value: dict[str, Any] = answer["result"]["value"]
        return value

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.profile, ignore_errors=True)


@dataclass
class Page:
    path: str
    text: str = ""
    hrefs: list[str] = field(default_factory=list)
    anchors: set[str] = field(default_factory=set)


def site_pages(site: Path) -> list[str]:
    """Every page's URL path (``/``, ``/likes/``...), 404.html aside."""
    return sorted(
        "/" + str(p.parent.relative_to(site)).removeprefix(".") + ("/" if p.parent != site else "") for p in site.rglob("index.html")
    )


def problems(pages: dict[str, Page], site: Path, origin: str) -> list[str]:
    """What a reader would meet, page by page (pure: unit-tested without a browser)."""
    found = []
    for page in pages.values():
        if len(page.text.strip()) < MIN_TEXT:
            found.append(f"{page.path}: an empty page ({len(page.text.strip())} characters of text)")
        for what, pattern in LEFT_MARKUP.items():
            for hit in pattern.findall(page.text):
                found.append(f"{page.path}: {what} left in the text: {hit!r}")
        for href in page.hrefs:
            parts = urlsplit(href)
            if f"{parts.scheme}://{parts.netloc}" != origin:
                continue  # external: not checked (the network is closed)
            path = unquote(parts.path)
            target = pages.get(path)
            if target is None:
                file = site / path.lstrip("/")
                if not (file.is_file() or (file / "index.html").is_file()):
                    found.append(f"{page.path}: a link to {path}, which the site does not have")
                continue
            if parts.fragment and unquote(parts.fragment) not in target.anchors:
                found.append(f"{page.path}: a link to {path}#{parts.fragment}, which that page has no anchor for")
    return found


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        """Nothing: one line per request would bury the problems."""


def serve(site: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def check(site: Path) -> tuple[list[str], int]:
    server, origin = serve(site)
    browser = Browser()
    try:
        pages = {}
        for path in site_pages(site):
            seen = browser.open(origin + path)
            pages[path] = Page(path, seen["text"], seen["hrefs"], set(seen["ids"]) | set(seen["names"]))
    finally:
        browser.close()
        server.shutdown()
    return problems(pages, site, origin), len(pages)


if __name__ == "__main__":
    site = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "site"
    if not (site / "index.html").is_file():
        raise SystemExit(f"{site} has no index.html: build the site first (make docs)")
    began = time.monotonic()
    bad, count = check(site)
    for line in bad:
        print(line)
    print(f"{count} pages opened in headless Chromium in {time.monotonic() - began:.1f} s: {len(bad)} problems")
    sys.exit(1 if bad else 0)
