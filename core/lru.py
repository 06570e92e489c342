"""A bounded, thread-safe least-recently-used map for rows that never change once written (a fact
version's content, a recall's texts by digest): what is cached can never be out of date, only evicted.

    cache = LruCache(4096)
    found, missing = cache.get_many(keys)   # {key: value} of those cached, and the keys to read
    cache.put_many({key: value})

One lock per cache: gunicorn's threads share a worker's caches.
"""

from collections import OrderedDict
from threading import Lock


class LruCache:
    def __init__(self, size: int):
        self.size = size
        self._items: OrderedDict = OrderedDict()
        self._lock = Lock()

    def get_many(self, keys) -> tuple[dict, list]:
        found, missing = {}, []
        with self._lock:
            for key in dict.fromkeys(keys):
                value = self._items.get(key)
                if value is None:
                    missing.append(key)
                else:
                    self._items.move_to_end(key)
                    found[key] = value
        return found, missing

    def put_many(self, items: dict) -> None:
        with self._lock:
            self._items.update(items)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
