"""A real headless Chromium, started by the tests and driven over the Chrome DevTools Protocol
with aiohttp's WebSocket client (already a dependency: nothing more to install from PyPI).

Flags: the set known to work on our machines (headless, no sandbox as root, no GPU, and every
background connection off, which this closed network would refuse), a fresh profile, and a host
resolver that resolves nothing, so a page that tried to fetch anything could not reach it. The
Network domain reports every request the page makes, which the tests then assert is none.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--remote-debugging-port=0",
         "--remote-allow-origins=*", "--hide-scrollbars", "--mute-audio"]


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Chromium:
    def __init__(self, binary: str):
        self.profile = tempfile.mkdtemp(prefix="tokenpace-chromium-")
        self.proc = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.ws_url = self._devtools_url()

    def _devtools_url(self, timeout_s: float = 30.0) -> str:
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode}")
            if port_file.exists():
                lines = port_file.read_text().split()
                if len(lines) >= 2:
                    return f"ws://127.0.0.1:{lines[0]}{lines[1]}"
            time.sleep(0.05)
        raise RuntimeError("chromium did not open its DevTools port")

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


class Page:
    """One tab, attached with a flat session; events are collected while it lives."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse):
        self.ws, self.session = ws, None
        self.ids = itertools.count(1)
        self.pending: dict[int, asyncio.Future] = {}
        self.events: list[dict[str, Any]] = []
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for msg in self.ws:
            data = msg.json()
            if "id" in data and data["id"] in self.pending:
                self.pending.pop(data["id"]).set_result(data)
            elif "method" in data:
                self.events.append(data)

    async def send(self, method: str, params: dict | None = None, *, session: bool = True) -> dict:
        message_id = next(self.ids)
        message = {"id": message_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        future = asyncio.get_running_loop().create_future()
        self.pending[message_id] = future
        await self.ws.send_json(message)
        reply = await asyncio.wait_for(future, 30)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    async def open(self, width: int, height: int) -> None:
        target = await self.send("Target.createTarget", {"url": "about:blank"}, session=False)
        attached = await self.send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True},
                                   session=False)
        self.session = attached["sessionId"]
        for domain in ("Page", "Network", "Runtime", "Log"):
            await self.send(f"{domain}.enable")
        await self.send("Emulation.setDeviceMetricsOverride",
                        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    async def navigate(self, url: str, timeout_s: float = 30.0) -> None:
        seen = len(self.events)
        await self.send("Page.navigate", {"url": url})
        deadline = time.monotonic() + timeout_s
        while not any(e["method"] == "Page.loadEventFired" for e in self.events[seen:]):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not finish loading")
            await asyncio.sleep(0.05)

    async def evaluate(self, expression: str) -> Any:
        result = await self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        return result["result"].get("value")

    async def screenshot(self, path: Path, width: int) -> Path:
        metrics = await self.send("Page.getLayoutMetrics")
        height = min(int(metrics["cssContentSize"]["height"]) + 1, 16000)
        await self.send("Emulation.setDeviceMetricsOverride",
                        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        shot = await self.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e["method"] == "Network.requestWillBeSent"]

    def errors(self) -> list[str]:
        out = []
        for e in self.events:
            p = e["params"]
            if e["method"] == "Runtime.exceptionThrown":
                out.append(str(p["exceptionDetails"].get("text")))
            elif e["method"] == "Runtime.consoleAPICalled" and p["type"] in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description"))) for a in p["args"]))
            elif e["method"] == "Log.entryAdded" and p["entry"]["level"] == "error":
                out.append(p["entry"]["text"])
            elif e["method"] == "Network.loadingFailed":
                out.append(f"loading failed: {p.get('errorText')}")
        return out


async def visit(binary: str, html: Path, screenshot: Path, probe: str, width: int = 1280) -> dict[str, Any]:
    """Open ``html`` in a fresh Chromium; return what ``probe`` (a JS expression) evaluates to,
    every request the page made, every console error, and the screenshot's path."""
    browser = Chromium(binary)
    try:
        async with aiohttp.ClientSession() as http, http.ws_connect(browser.ws_url, max_msg_size=0) as ws:
            page = Page(ws)
            await page.open(width, 900)
            await page.navigate(html.resolve().as_uri())
            await asyncio.sleep(0.3)  # let late console messages arrive
            probe_value = await page.evaluate(probe)
            shot = await page.screenshot(screenshot, width)
            page.reader.cancel()
            return {"probe": probe_value, "requests": page.requests(), "errors": page.errors(), "screenshot": shot}
    finally:
        browser.close()


def artifacts_dir() -> Path:
    """Where screenshots are kept: $TOKENPACE_ARTIFACTS, else test-artifacts/ in the repository
    (ignored by git)."""
    return Path(os.environ.get("TOKENPACE_ARTIFACTS") or Path(__file__).resolve().parents[2] / "test-artifacts")
