"""Copy-on-write episode databases and exact state comparison.

A domain's JSON tables are loaded once per process; each record is kept as a `marshal` blob (format 2,
which has no back-references, so equal records of equal types and key order give equal bytes). An episode
gets `EpisodeDatabase`: tables that copy a record out of its blob the first time a tool touches it, so
an episode costs what its tools touch, not a copy of the whole database.

Comparing two episodes' end states (the reward's "DB hash equal to the gold replay's") only needs the
records either side touched: every other record is the shared base. Records are compared by the same
canonical form tau-bench hashes (`canonical`), so the verdict equals comparing the two full hashes.
"""

from __future__ import annotations

import hashlib
import json
import marshal
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

_MISSING = object()
BASE = "base"  # the fingerprint of a record equal to the shared base database
_UNTOUCHED = object()
MARSHAL_FORMAT = 2  # formats >= 3 add back-references that depend on reference counts


def canonical(item: Any) -> Any:
    """tau-bench's `to_hashable`: dicts become sorted key/value tuples, lists tuples, sets sorted tuples."""
    if isinstance(item, dict):
        return tuple((key, canonical(value)) for key, value in sorted(item.items()))
    if isinstance(item, list):
        return tuple(canonical(element) for element in item)
    if isinstance(item, set):
        return tuple(sorted(canonical(element) for element in item))
    return item


def fingerprint(value: Any) -> str:
    """sha256 of the canonical form of one record, as tau-bench hashes the whole database."""
    return hashlib.sha256(str(canonical(value)).encode("utf-8")).hexdigest()


class BaseTable:
    """One table of the shared, read-only base: records as marshal blobs, fingerprints on demand.

    A subclass may store other records (e.g. pydantic models) by overriding `encode`, `decode` and `digest`:
    equal `encode` bytes must mean equal records, and `digest` must be the record's part of the database hash.
    """

    def __init__(self, records: dict[str, Any]) -> None:
        self.blobs: dict[str, bytes] = {key: self.encode(value) for key, value in records.items()}
        self._fingerprints: dict[str, str] = {}

    @staticmethod
    def encode(value: Any) -> bytes:
        """The stored form of a record."""
        return marshal.dumps(value, MARSHAL_FORMAT)

    @staticmethod
    def decode(blob: bytes) -> Any:
        """A fresh record from its stored form."""
        return marshal.loads(blob)

    @staticmethod
    def digest(value: Any) -> str:
        """The fingerprint of a record."""
        return fingerprint(value)

    def load(self, key: str) -> Any:
        """A fresh, private copy of one record."""
        return self.decode(self.blobs[key])

    def fingerprint(self, key: str) -> str | None:
        """The fingerprint of a base record, or None if the base has no such key."""
        if key not in self.blobs:
            return None
        found = self._fingerprints.get(key)
        if found is None:
            found = self._fingerprints[key] = self.digest(self.load(key))
        return found


class EpisodeTable(MutableMapping):
    """A table as tools see it: a dict whose records are copied from the base on first access."""

    def __init__(self, base: BaseTable) -> None:
        self._base = base
        self.touched: dict[str, Any] = {}  # key -> private record, or _MISSING when deleted

    def __getitem__(self, key: str) -> Any:
        value = self.touched.get(key, _MISSING)
        if value is not _MISSING:
            return value
        if key in self.touched or key not in self._base.blobs:
            raise KeyError(key)
        value = self.touched[key] = self._base.load(key)
        return value

    def __setitem__(self, key: str, value: Any) -> None:
        self.touched[key] = value

    def __delitem__(self, key: str) -> None:
        self[key]  # raises KeyError when absent
        self.touched[key] = _MISSING

    def __contains__(self, key: object) -> bool:
        if key in self.touched:
            return self.touched[key] is not _MISSING
        return key in self._base.blobs

    def __iter__(self) -> Iterator[str]:
        for key in self._base.blobs:
            if self.touched.get(key, None) is not _MISSING:
                yield key
        for key, value in list(self.touched.items()):
            if key not in self._base.blobs and value is not _MISSING:
                yield key

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def same_as_base(self, key: str) -> bool:
        """Whether record `key` is still the base's, stored bytes and all (present or absent alike)."""
        value = self.touched.get(key, _UNTOUCHED)
        if value is _UNTOUCHED:
            return True
        if value is _MISSING:
            return key not in self._base.blobs
        return self._base.encode(value) == self._base.blobs.get(key)

    def changes(self) -> dict[str, str | None]:
        """Fingerprints of the records that differ from the base (None for a deleted one).

        Most touched records were only read: equal marshal bytes settle those without hashing.
        """
        found: dict[str, str | None] = {}
        for key, value in self.touched.items():
            if value is _MISSING:
                if key in self._base.blobs:
                    found[key] = None
                continue
            if self._base.encode(value) == self._base.blobs.get(key):
                continue
            current = self._base.digest(value)
            if current != self._base.fingerprint(key):
                found[key] = current
        return found


class BaseDatabase:
    """A domain's tables, loaded once per process."""

    def __init__(self, tables: dict[str, dict[str, Any]], table: type[BaseTable] = BaseTable) -> None:
        self.tables = {name: table(records) for name, records in tables.items()}

    def episode(self) -> EpisodeDatabase:
        """A private, copy-on-write view for one episode."""
        return EpisodeDatabase(self)


class EpisodeDatabase(dict):
    """`data` as tau-trait tools expect it (`data["orders"][order_id]`), private to one episode."""

    def __init__(self, base: BaseDatabase, table: Callable[[BaseTable], EpisodeTable] = EpisodeTable) -> None:
        super().__init__({name: table(records) for name, records in base.tables.items()})
        self.base = base

    def changes(self) -> dict[tuple[str, str], str | None]:
        """Fingerprints of the records this episode changed, keyed by (table, key); None = deleted."""
        return {(name, key): fp for name, table in self.items() for key, fp in table.changes().items()}


def same_state(base: BaseDatabase, a: dict, b: dict) -> bool:
    """Whether two episodes' `changes()` describe the same database (equal full tau-bench hashes)."""
    for name, key in a.keys() | b.keys():
        table = base.tables[name]
        left = a[(name, key)] if (name, key) in a else table.fingerprint(key)
        right = b[(name, key)] if (name, key) in b else table.fingerprint(key)
        if left != right:
            return False
    return True


def changed_records(before: dict, after: dict) -> dict:
    """The records whose fingerprint differs between two `EpisodeDatabase.changes()` maps (to the new one)."""
    return {k: after.get(k, BASE) for k in before.keys() | after.keys() if before.get(k, BASE) != after.get(k, BASE)}


def record_value(db: EpisodeDatabase, record: tuple[str, str]) -> Any:
    """A private copy of one record's current value (None when the record does not exist)."""
    table, key = record
    return plain(db[table][key]) if key in db[table] else None


def plain(value: Any) -> Any:
    """A record as plain JSON data (tau2 keeps records as pydantic models)."""
    return json.loads(json.dumps(value, default=lambda item: item.model_dump(mode="json")))
