"""Remembered read-only tool calls: a read's result on the shared base, reused while what it read is unchanged.

A read tool often scans a whole table (`find_user_id_by_email`, `search_direct_flight`): run on an episode
database, it copies every record out of its blob, and `changes()` compares each of them again. `ReadMemo`
runs a read once per (tool, arguments, episode clock) on a scratch database that notes what the tool looked at
(the keys of a table, or the whole table when it iterated one) and checks that the call changed nothing. An
episode database whose looked-at records are still the base's (the same stored bytes, so the same values in the
same key order) gets the remembered result; any other runs the call itself, as before.
"""

from __future__ import annotations

import copy
import json
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from castdata.envs.clock import EpisodeClock
from castdata.envs.database import BaseDatabase, EpisodeDatabase, EpisodeTable

T = TypeVar("T")
Footprint = dict[str, frozenset[str] | None]  # table -> the keys a call looked up, or None: it iterated the table


class _Recording(EpisodeTable):
    """An episode table that notes the keys a tool looks up and whether it iterates the table. Its records come from
    `pool`, records decoded once and shared by every scratch run: a run that changed one drops it from the pool."""

    def __init__(self, base: Any, pool: dict[str, Any]) -> None:
        super().__init__(base)
        self.pool = pool
        self.looked: set[str] = set()
        self.iterated = False

    def __getitem__(self, key: str) -> Any:
        self.looked.add(key)
        if key in self.touched or key not in self._base.blobs:
            return super().__getitem__(key)
        value = self.pool.get(key)
        if value is None:
            value = self.pool[key] = self._base.load(key)
        self.touched[key] = value
        return value

    def __contains__(self, key: object) -> bool:
        self.looked.add(key)
        return super().__contains__(key)

    def __iter__(self) -> Iterator[str]:
        self.iterated = True
        return super().__iter__()


def _unchanged(db: EpisodeDatabase, tables: dict[str, _Recording]) -> bool:
    """Whether `db` still holds its own tables, each record as the base stores it; drops changed records from the
    pool."""
    unchanged = db.keys() == tables.keys() and all(db[name] is table for name, table in tables.items())
    for table in tables.values():
        for key in [key for key in table.touched if not table.same_as_base(key)]:
            table.pool.pop(key, None)
            unchanged = False
    return unchanged


def _agrees(db: EpisodeDatabase, footprint: Footprint) -> bool:
    """Whether `db` has the base's tables and every record of `footprint` as in the base (for a whole table: no
    record differs)."""
    if db.keys() != db.base.tables.keys():
        return False
    for name, keys in footprint.items():
        table = db[name]
        if not isinstance(table, EpisodeTable) or table._base is not db.base.tables[name]:
            return False
        if not all(table.same_as_base(key) for key in (table.touched if keys is None else keys)):
            return False
    return True


class ReadMemo:
    """The results of read calls on one base database, for its most recent `size` distinct calls."""

    def __init__(self, base: BaseDatabase, size: int = 16384) -> None:
        self.base, self.size = base, size
        self._entries: OrderedDict[tuple[str, str, Any], tuple[Any, Footprint] | None] = OrderedDict()
        self._pools: dict[int, dict[str, Any]] = {id(table): {} for table in base.tables.values()}

    def run(self, db: EpisodeDatabase, name: str, kwargs: dict[str, Any], call: Callable[..., T]) -> T:
        """`call(db, kwargs)`, or the result it had on the base if `db` agrees with the base wherever it looked."""
        try:
            key = (name, json.dumps(kwargs), EpisodeClock.now())
        except (TypeError, ValueError):  # arguments JSON cannot hold: not remembered
            return call(db, kwargs)
        if key in self._entries:
            self._entries.move_to_end(key)
        else:
            scratch = EpisodeDatabase(self.base, lambda table: _Recording(table, self._pools[id(table)]))
            tables = dict(scratch)
            result = call(scratch, copy.deepcopy(kwargs))
            footprint = {
                n: None if t.iterated else frozenset(t.looked) for n, t in tables.items() if t.iterated or t.looked
            }
            self._entries[key] = (result, footprint) if _unchanged(scratch, tables) else None
            if len(self._entries) > self.size:
                self._entries.popitem(last=False)
        entry = self._entries[key]
        if entry is not None and _agrees(db, entry[1]):
            return entry[0]
        return call(db, kwargs)
