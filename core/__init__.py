"""The bottom layer: what every app may use and that uses no app (the audit chain every audited event is a
link of, retry, environment parsing, roles, health checks, the embedded database, engine-specific SQL files,
admin base classes)."""
