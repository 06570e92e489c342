"""Reading a large JSON document piece by piece: the values at chosen paths, each decoded on its own.

    JsonStream(fileobj).values(wanted, max_value_chars=None) -> iterator of (path, value)
        (value ARRAY where an array begins, TOO_LARGE where a wanted value is over max_value_chars)

`wanted(path)` says whether the value at `path` (a tuple of object keys, "*" for any array item) is decoded
and handed out whole; everything else is walked through and checked, never built, so memory follows the
largest value handed out (one EPCIS event, one master-data element), not the document. A wanted value
longer than `max_value_chars` characters of text is walked through and checked like the rest and handed
out as TOO_LARGE, so memory has a bound whatever the document holds. The whole document
is still checked as JSON: anything malformed anywhere raises JsonStreamError. The text must be UTF-8 (a
byte order mark is allowed), as EPCIS JSON is; NUL characters, raw or escaped, are refused (PostgreSQL text
cannot hold one).

The standard library's decoder reads each wanted value (no streaming JSON package in the runtime image); the
walk between them uses a few regular expressions over a buffer of READ_BYTES at a time.
"""

import codecs
import json
import re
from collections.abc import Callable, Iterator

READ_BYTES = 1 << 18
_WS = re.compile(r"[ \t\n\r]*")
_STRING_BODY = re.compile(r'(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*')
MAX_KEY_CHARS = 1000  # a longer object key is checked and passed over, never kept (no path wants it)
MARGIN = 64  # a value ending this close to the buffer's end may go on in the next read
_SCALAR = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null")
_DECODER = json.JSONDecoder()
ARRAY = object()  # handed out as the value of a path where an array begins (its items follow, as "*")
TOO_LARGE = object()  # handed out for a wanted value over max_value_chars (walked through, never built)


def _nothing(path: tuple) -> bool:
    return False


class JsonStreamError(ValueError):
    """The document is not well-formed JSON (or holds a NUL character)."""


class JsonStream:
    def __init__(self, fileobj):
        self.file = fileobj
        self.decoder = codecs.getincrementaldecoder("utf-8-sig")()
        self.buf, self.pos, self.eof, self.tail = "", 0, False, b""
        self.limit = None

    # --- the buffer -------------------------------------------------------------------------------------

    def _fill(self, at_least: int = READ_BYTES) -> bool:
        """Read more text onto the buffer (dropping what was consumed); False at the end of the input."""
        if self.eof:
            return False
        raw = self.file.read(max(at_least, READ_BYTES))
        # An escaped NUL may straddle two reads: look at the end of the previous one too.
        if b"\x00" in raw or b"\\u0000" in self.tail + raw[:6] or b"\\u0000" in raw:
            raise JsonStreamError("NUL characters are not allowed.")
        self.tail = raw[-6:]
        try:
            text = self.decoder.decode(raw, final=not raw)
        except UnicodeDecodeError as exc:
            raise JsonStreamError(f"The JSON is not UTF-8: {exc.reason}.") from exc
        self.buf, self.pos = self.buf[self.pos:] + text, 0
        self.eof = not raw
        return True

    def _peek(self) -> str:
        """The next character that is not white space ("" at the end of the input)."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self._fill():
                return ""

    def _expect(self, char: str) -> None:
        found = self._peek()
        if found != char:
            raise self._error(f"expected {char!r}, found {found or 'the end of the document'!r}")
        self.pos += 1

    def _error(self, what: str) -> JsonStreamError:
        return JsonStreamError(f"The JSON is malformed: {what}.")

    # --- values -----------------------------------------------------------------------------------------

    def _decode(self, limit: int | None = None):
        """One whole value at the current position, read by the standard decoder; TOO_LARGE when its text is
        over `limit` characters (then walked through and checked, never built)."""
        self._peek()
        want = READ_BYTES
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                cut = exc.msg.startswith("Unterminated string") or exc.pos + MARGIN >= len(self.buf)
                if self.eof or not cut:
                    raise self._error(str(exc)) from exc
            except RecursionError as exc:
                raise self._error("nested too deeply") from exc
            else:
                if limit is not None and end - self.pos > limit:
                    self.pos = end
                    return TOO_LARGE
                if end + MARGIN <= len(self.buf) or self.eof:
                    self.pos = end
                    return value
            if limit is not None and len(self.buf) - self.pos > limit:
                # The value goes on past the limit (it did not end inside the buffer): walk it, keep nothing.
                for _ in self._walk((), _nothing):
                    pass
                return TOO_LARGE
            self._fill(want if limit is None else min(want, limit))
            want *= 2  # a large value: read ahead faster than it is retried

    def _string(self) -> str | None:
        """The string at the current position, read piece by piece; None (checked, not kept) past MAX_KEY_CHARS."""
        self._expect('"')
        parts, size = ['"'], 0
        while True:
            end = _STRING_BODY.match(self.buf, self.pos).end()
            if parts is not None:
                parts.append(self.buf[self.pos:end])
                size += end - self.pos
                if size > MAX_KEY_CHARS:
                    parts = None
            self.pos = end
            if end < len(self.buf) and not (self.buf[end] == "\\" and len(self.buf) - end < 6 and not self.eof):
                if self.buf[end] != '"':
                    raise self._error("a string holds a raw control character or a bad escape")
                self.pos += 1
                return json.loads("".join(parts) + '"') if parts is not None else None
            # At the buffer's end (perhaps inside an escape): read on from here.
            if not self._fill():
                raise self._error("a string is not closed")

    def _skip_scalar(self) -> None:
        while True:
            found = _SCALAR.match(self.buf, self.pos)
            if found and (found.end() < len(self.buf) or self.eof):
                self.pos = found.end()
                return
            if not self._fill():
                raise self._error(f"unexpected {self.buf[self.pos:self.pos + 20]!r}")

    def values(self, wanted: Callable[[tuple], bool], max_value_chars: int | None = None
               ) -> Iterator[tuple[tuple, object]]:
        self.limit = max_value_chars
        try:
            yield from self._walk((), wanted)
        except RecursionError as exc:
            raise self._error("nested too deeply") from exc
        if self._peek():
            raise self._error("extra data after the document")

    def _walk(self, path: tuple, wanted) -> Iterator[tuple[tuple, object]]:
        char = self._peek()
        if wanted(path):
            yield path, self._decode(self.limit)
        elif char == "{":
            self.pos += 1
            if self._peek() == "}":
                self.pos += 1
                return
            while True:
                key = self._string()
                self._expect(":")
                yield from self._walk((*path, key), wanted)
                if self._peek() == ",":
                    self.pos += 1
                    continue
                self._expect("}")
                return
        elif char == "[":
            self.pos += 1
            yield path, ARRAY
            if self._peek() == "]":
                self.pos += 1
                return
            while True:
                yield from self._walk((*path, "*"), wanted)
                if self._peek() == ",":
                    self.pos += 1
                    continue
                self._expect("]")
                return
        elif char == '"':
            self._string()
        elif char:
            self._skip_scalar()
        else:
            raise self._error("the document ends too early")
