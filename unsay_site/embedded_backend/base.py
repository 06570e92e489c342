"""Database backend for the embedded default database (ENGINE "unsay_site.embedded_backend").

PostgreSQL's own backend, except that the first connection a process opens starts (or attaches to)
the embedded PostgreSQL 18 + pgvector server from `core.embedded` and fills in its Unix socket
directory and port. Importing settings therefore starts nothing: `manage.py help`, `check`,
`makemigrations --check` and a settings import in a test never touch a database or spawn a process.

`manage.py dbshell` opens the embedded server's own psql on that socket: the server is started first
(its socket and port are known only then) and stays up while psql runs, since this process holds it.
"""

from django.conf import settings
from django.db.backends.postgresql import base, client

from core import embedded


class EmbeddedClient(client.DatabaseClient):
    @classmethod
    def settings_to_cmd_args_env(cls, settings_dict, parameters):
        args, env = super().settings_to_cmd_args_env(settings_dict, parameters)
        bundled = embedded.psql_path()
        if bundled is not None:
            args[0] = str(bundled)
        return args, env

    def runshell(self, parameters):
        self.connection.ensure_connection()  # starts the server and fills in HOST and PORT
        super().runshell(parameters)


class DatabaseWrapper(base.DatabaseWrapper):
    client_class = EmbeddedClient

    def get_connection_params(self):
        server = embedded.ensure_started_once(settings.UNSAY_PGDATA, settings.UNSAY_DB_NAME)
        # Written into the settings dict (the same dict as settings.DATABASES[alias]) so tools that
        # read HOST/PORT after connecting (psql in benchmarks, tests opening a rival connection) see them.
        self.settings_dict["HOST"] = server["host"]
        self.settings_dict["PORT"] = str(server["port"])
        self.settings_dict["USER"] = self.settings_dict.get("USER") or server["user"]
        return super().get_connection_params()
