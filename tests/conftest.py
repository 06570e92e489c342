"""Test session setup: the test profile (hashing embeddings allowed, fast hasher) is set before
Django loads, and the embedded PostgreSQL is started by settings on import."""

import os

os.environ.setdefault("UNSAY_PROFILE", "test")

import pytest  # noqa: E402


@pytest.fixture
def hashing_embeddings():
    """A fresh hashing provider whose call counter starts at zero."""
    from django.conf import settings

    from memory.embeddings import HashingEmbedding, reset_provider

    provider = HashingEmbedding(settings.UNSAY_EMBEDDING_DIM)
    reset_provider(provider)
    yield provider
    reset_provider(None)
