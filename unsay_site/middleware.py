"""whitenoise's middleware, quiet about a STATIC_ROOT that was never collected (development and
tests serve static files through the finders; only the production image runs collectstatic)."""

import os

from whitenoise.middleware import WhiteNoiseMiddleware


class StaticFilesMiddleware(WhiteNoiseMiddleware):
    def add_files(self, root, prefix=None):
        if os.path.isdir(root):
            super().add_files(root, prefix)
