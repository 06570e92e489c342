"""Database backend for the embedded default database (ENGINE "unsay_site.embedded_backend").

PostgreSQL's own backend, except that the first connection a process opens starts (or attaches to)
the embedded PostgreSQL 18 + pgvector server from `core.embedded` and fills in its Unix socket
directory and port. Importing settings therefore starts nothing: `manage.py help`, `check`,
`makemigrations --check` and a settings import in a test never touch a database or spawn a process.
"""

from django.conf import settings
from django.db.backends.postgresql import base

from core import embedded


class DatabaseWrapper(base.DatabaseWrapper):
    def get_connection_params(self):
        server = embedded.ensure_started_once(settings.UNSAY_PGDATA, settings.UNSAY_DB_NAME)
        # Written into the settings dict (the same dict as settings.DATABASES[alias]) so tools that
        # read HOST/PORT after connecting (psql in benchmarks, tests opening a rival connection) see them.
        self.settings_dict["HOST"] = server["host"]
        self.settings_dict["PORT"] = str(server["port"])
        self.settings_dict["USER"] = self.settings_dict.get("USER") or server["user"]
        return super().get_connection_params()
