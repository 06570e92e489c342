"""whitenoise's middleware, quiet about a STATIC_ROOT that was never collected (development and
tests serve static files through the finders; only the production image runs collectstatic), and
reading what the finders find once per process.

A server builds its middleware once per process, but Django's test client builds a new handler, and so
a new middleware, for every client: each listed, stat-ed and read the headers of every static file
through the finders again (about 50 ms a client, over a thousand clients in the test suite). The files
found are kept per process and per configuration that shapes them; with autorefresh off (anything but
DEBUG) whitenoise itself never looks at them again after start-up either."""

import os
from typing import ClassVar

from django.conf import settings
from whitenoise.middleware import WhiteNoiseMiddleware

# Settings that change which files the finders find or how whitenoise serves them.
_SHAPING = ("DEBUG", "STATIC_URL", "STATIC_ROOT", "STATICFILES_DIRS", "STATICFILES_FINDERS", "INSTALLED_APPS",
            "FORCE_SCRIPT_NAME")


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    _found_by_finders: ClassVar[dict[str, dict]] = {}

    def add_files(self, root, prefix=None):
        if os.path.isdir(root):
            super().add_files(root, prefix)

    def add_files_from_finders(self):
        key = repr([(name, getattr(settings, name, None)) for name in _SHAPING] +
                   sorted((name, repr(getattr(settings, name))) for name in dir(settings)
                          if name.startswith("WHITENOISE_")))
        found = self._found_by_finders.get(key)
        if found is None:
            before = dict(self.files)
            super().add_files_from_finders()
            found = {url: served for url, served in self.files.items() if before.get(url) is not served}
            self._found_by_finders[key] = found
        else:
            self.files.update(found)
