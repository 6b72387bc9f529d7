"""The page `sitp viz` serves, on FastAPI and uvicorn (``sitp serve``'s): one HTML page, its script and
its style, all in this package (no CDN), and the view (view.py) it draws as JSON.

- ``GET /``: the page (page.html); ``GET /page.js``, ``GET /page.css``: its script and style;
- ``GET /view.json``: the view's summary (the time, the stages, and a line for each realize and kernel);
- ``GET /realize/{i}.json``, ``GET /program/{key}.json``: one realize's drawing, one kernel's record, fetched
  when the page opens them (a training run's whole view is tens of megabytes).
"""

from __future__ import annotations

import json
from pathlib import Path

import uvicorn
from fastapi import FastAPI
from fastapi.responses import HTMLResponse, JSONResponse, Response

HERE = Path(__file__).parent
ASSETS = {"page.js": "text/javascript", "page.css": "text/css"}


def summary(view: dict) -> dict:
    """What the page loads first: all but the realizes' drawings and the kernels' records."""
    return {**{k: view[k] for k in ("title", "peak", "passes", "time", "stages")},
            "programs": {key: {"name": p["name"], "device": p["device"]} for key, p in view["programs"].items()},
            "realizes": [{"nodes": r["nodes"], "kernels": len(r["kernels"])} for r in view["realizes"]]}


def not_found(what: str) -> JSONResponse:
    return JSONResponse({"error": f"no such {what}"}, status_code=404)


def create_app(view: dict) -> FastAPI:
    app = FastAPI(title="sitp viz", docs_url=None, redoc_url=None, openapi_url=None)
    page = (HERE / "page.html").read_bytes()
    assets = {name: (HERE / name).read_bytes() for name in ASSETS}
    body = json.dumps(summary(view)).encode()

    @app.get("/")
    async def index() -> HTMLResponse:
        return HTMLResponse(page)

    @app.get("/view.json")
    async def view_json() -> Response:
        return Response(body, media_type="application/json")

    @app.get("/realize/{index}.json")
    async def realize(index: int) -> Response:
        if not 0 <= index < len(view["realizes"]):
            return not_found(f"realize: {index}")
        return JSONResponse(view["realizes"][index])

    @app.get("/program/{key}.json")
    async def program(key: str) -> Response:
        return JSONResponse(view["programs"][key]) if key in view["programs"] else not_found(f"kernel: {key}")

    @app.get("/{name}")
    async def asset(name: str) -> Response:
        if name not in assets:
            return not_found(f"file: {name}")
        return Response(assets[name], media_type=ASSETS[name])

    return app


def make_server(view: dict, host: str = "127.0.0.1", port: int = 8000) -> uvicorn.Server:
    return uvicorn.Server(uvicorn.Config(create_app(view), host=host, port=port, log_level="warning"))
