"""The page `sitp viz` serves, on FastAPI and uvicorn (``sitp serve``'s): one HTML page, its script and
its style, all in this package (no CDN), and the view (view.py) it draws as JSON.

- ``GET /``: the page (page.html); ``GET /page.js``, ``GET /page.css``: its script and style;
- ``GET /view.json``: everything the page shows.
"""

from __future__ import annotations

import json
from pathlib import Path

import uvicorn
from fastapi import FastAPI
from fastapi.responses import HTMLResponse, JSONResponse, Response

HERE = Path(__file__).parent
ASSETS = {"page.js": "text/javascript", "page.css": "text/css"}


def create_app(view: dict) -> FastAPI:
    app = FastAPI(title="sitp viz", docs_url=None, redoc_url=None, openapi_url=None)
    page = (HERE / "page.html").read_bytes()
    assets = {name: (HERE / name).read_bytes() for name in ASSETS}
    body = json.dumps(view).encode()

    @app.get("/")
    async def index() -> HTMLResponse:
        return HTMLResponse(page)

    @app.get("/view.json")
    async def view_json() -> Response:
        return Response(body, media_type="application/json")

    @app.get("/{name}")
    async def asset(name: str) -> Response:
        if name not in assets:
            return JSONResponse({"error": f"no such file: {name}"}, status_code=404)
        return Response(assets[name], media_type=ASSETS[name])

    return app


def make_server(view: dict, host: str = "127.0.0.1", port: int = 8000) -> uvicorn.Server:
    return uvicorn.Server(uvicorn.Config(create_app(view), host=host, port=port, log_level="warning"))
