"""`castdata view RUN_DIR|DATASET_DIR`: episodes with their verdicts, as one self-contained static HTML page.

`castdata.view.data` gathers the episodes and labels into plain dicts; `castdata.view.page` renders the page.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from castdata.errors import InputError
from castdata.view.data import UnknownEpisode, index_row, matches, page_record, parse_filters, read_episodes
from castdata.view.page import Page


def write_view(path: Path, out: Path, episode: str | None = None, filters: Iterable[str] = ()) -> dict:
    """Write the page of a run directory or dataset folder to `out`: every episode that passes `filters`
    (`KEY=VALUE[,VALUE...]`, see `castdata.view.data.FILTER_KEYS`), or only `episode`, which it then opens on.
    Returns what it wrote: the path, the number of episodes and bytes."""
    path, out, filters = Path(path), Path(out), list(filters)
    wanted = parse_filters(filters)
    page = Page()
    keys: set[str] = set()
    for found, dataset_split in read_episodes(path):
        row = index_row(found, dataset_split)
        row["key"] = row["id"] if row["id"] not in keys else f"{row['run']}/{row['id']}"  # a dataset of several runs
        keys.add(row["key"])
        if (episode is None or episode in (row["id"], row["key"])) and matches(row, wanted):
            page.add(row, page_record(found))
    if episode is not None and not page.rows:
        passing = " that passes --filter" if wanted else ""
        raise UnknownEpisode(f"--episode {episode}: no such episode in {path}{passing}")
    if not page.rows and wanted:
        raise InputError(f"--filter {' '.join(filters)}: no episode of {path} passes")
    opened = page.rows[0]["key"] if episode is not None else None
    html = page.render(f"castdata view: {path.name}", str(path), opened)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(html, encoding="utf-8")
    return {"out": str(out), "episodes": len(page.rows), "bytes": len(html.encode("utf-8"))}
