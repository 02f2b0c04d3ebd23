"""The `castdata view` page: one self-contained HTML file (inline CSS and JS, no network, nothing loaded from outside).

How it pages: the index (one small row per episode) is one JSON block, which the page's script sorts, filters and
shows `PAGE_ROWS` rows at a time. The episodes themselves are packed `CHUNK_EPISODES` to a block, each block a
gzip-compressed JSON object in base64 that the browser decompresses (`DecompressionStream`) only when one of its
episodes is opened, so a run of 10,000 episodes opens as fast as its index parses.

Escaping: the Jinja template autoescapes; the index JSON has `<`, `>` and `&` written as `\\u003c`, `\\u003e` and
`\\u0026`, so no content can close its `<script>` block; episode blocks are base64. The script builds every element
with `textContent`, never `innerHTML`, and a Content-Security-Policy allows only the page's own script and style (by
hash) and no network at all, so a transcript holding `<script>` renders as text.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from importlib.resources import files
from typing import Any

from jinja2 import Environment
from markupsafe import Markup

CHUNK_EPISODES = 64
PAGE_ROWS = 100


def script_json(value: Any) -> Markup:
    """JSON that is safe inside a `<script type="application/json">` block: no `<`, `>` or `&` appears raw."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


class Page:
    """Index rows and episode records, added one episode at a time, rendered as one HTML document."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.chunks: list[str] = []
        self._pending: dict[str, dict[str, Any]] = {}

    def add(self, row: dict[str, Any], record: dict[str, Any]) -> None:
        """Add one episode: its index row (with its unique `key`) and its page record (packed in the current block)."""
        self.rows.append({**row, "chunk": len(self.chunks)})
        self._pending[row["key"]] = record
        if len(self._pending) >= CHUNK_EPISODES:
            self._pack()

    def _pack(self) -> None:
        if self._pending:
            data = json.dumps(self._pending, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            self.chunks.append(base64.b64encode(gzip.compress(data, compresslevel=6, mtime=0)).decode("ascii"))
            self._pending = {}

    def render(self, title: str, source: str, opened: str | None = None) -> str:
        """The HTML document; `opened` is the id of the episode it opens on (else the index)."""
        self._pack()
        static = files("castdata.view") / "static"
        css, js = ((static / name).read_text(encoding="utf-8") for name in ("page.css", "page.js"))
        template = Environment(autoescape=True).from_string((static / "page.html.jinja").read_text(encoding="utf-8"))
        index = {"rows": self.rows, "opened": opened, "page_rows": PAGE_ROWS, "chunk_episodes": CHUNK_EPISODES}
        return template.render(
            title=title,
            source=source,
            episodes=len(self.rows),
            index_json=script_json(index),
            chunks=self.chunks,
            css=Markup(css),
            js=Markup(js),
            csp=f"default-src 'none'; style-src {_csp_hash(css)}; script-src {_csp_hash(js)}",
        )
