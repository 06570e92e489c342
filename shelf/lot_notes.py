"""The lot and expiry a document's commissioning events note for its units, for later events that name the same
units without them (shelf.receiving's first reading fills it, its chunks read it).

    notes = LotNotes(); notes.note(uris, lot, expiry); notes.get_many(uris) -> {uri: (lot, expiry)}

The first note of a unit holds (a later one does not replace it). Notes stay in memory up to IN_MEMORY units;
past that they move to a temporary SQLite file (the standard library's), so a document of millions of units
costs disk, not memory: about 150 bytes a unit in memory, nothing once on disk. The file is removed on close.
"""

import sqlite3
import tempfile
from datetime import date
from pathlib import Path

IN_MEMORY = 200_000
_BATCH = 500  # SQLite's default limit is 999 parameters a statement


class LotNotes:
    def __init__(self, in_memory: int | None = None):
        self.in_memory = IN_MEMORY if in_memory is None else in_memory
        self._memory: dict[str, tuple[str, date | None]] = {}
        self._shared: dict[tuple, tuple] = {}  # one tuple per (lot, expiry): a note costs its URI in memory
        self._dir: tempfile.TemporaryDirectory | None = None
        self._db: sqlite3.Connection | None = None

    def __len__(self) -> int:
        if self._db is None:
            return len(self._memory)
        return self._db.execute("SELECT count(*) FROM note").fetchone()[0]

    def note(self, uris, lot: str, expiry: date | None) -> None:
        if self._db is not None:
            self._write((uri, lot, expiry.isoformat() if expiry else None) for uri in uris)
            return
        shared = self._shared.setdefault((lot, expiry), (lot, expiry))
        for uri in uris:
            self._memory.setdefault(uri, shared)
        if len(self._memory) > self.in_memory:
            self._spill()

    def get_many(self, uris) -> dict[str, tuple[str, date | None]]:
        if self._db is None:
            memory = self._memory
            return {uri: memory[uri] for uri in uris if uri in memory}
        found, wanted = {}, list(uris)
        for start in range(0, len(wanted), _BATCH):
            batch = wanted[start:start + _BATCH]
            rows = self._db.execute(f"SELECT uri, lot, expiry FROM note WHERE uri IN ({','.join('?' * len(batch))})",
                                    batch)
            for uri, lot, expiry in rows:
                found[uri] = (lot, date.fromisoformat(expiry) if expiry else None)
        return found

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._dir is not None:
            self._dir.cleanup()
            self._dir = None
        self._memory, self._shared = {}, {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _spill(self) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="unsay-lot-notes-")
        self._db = sqlite3.connect(Path(self._dir.name) / "notes.sqlite3")
        # A scratch file read back by this process only: no journal, no fsync.
        self._db.executescript("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;"
                               "CREATE TABLE note (uri TEXT PRIMARY KEY, lot TEXT, expiry TEXT) WITHOUT ROWID;")
        self._write((uri, lot, expiry.isoformat() if expiry else None)
                    for uri, (lot, expiry) in self._memory.items())
        self._memory, self._shared = {}, {}

    def _write(self, rows) -> None:
        self._db.executemany("INSERT OR IGNORE INTO note VALUES (?, ?, ?)", rows)
