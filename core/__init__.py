"""The bottom layer: what every app may use and that uses no app (retry, environment parsing,
roles, health checks, the embedded database, engine-specific SQL files, admin base classes)."""
