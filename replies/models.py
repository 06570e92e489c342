"""Reply models."""
