"""The local model on ONNX Runtime: the same vectors as torch on real statements, chosen by
UNSAY_EMBEDDINGS=local when available, torch as the fallback, repeated texts embedded once."""

import subprocess
import sys

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from demo.slice import DEMO_SLICE
from memory import minilm
from memory.embeddings import HashingEmbedding, LocalMiniLM, build_provider
from recalls.management.commands.export_embedding_model import sample_statements
from tests.paths import PROJECT_DIR


@pytest.fixture(autouse=True)
def fresh_engines(monkeypatch):
    """Each test resolves the engine itself (the process-wide cache would hide a fallback)."""
    monkeypatch.setattr(minilm, "_engines", {})


def test_onnx_vectors_equal_torch_vectors_on_real_recall_statements(settings):
    texts = sample_statements(DEMO_SLICE, limit=64)
    texts.append(" ".join(texts))  # far past 256 tokens: both must truncate at the same place
    assert len(texts) > 60 and any(" lot " in t for t in texts)
    engine = minilm.OnnxMiniLM(minilm.ensure_onnx_model(settings.UNSAY_MODEL_DIR))
    # Its idle threads sleep: spinning took CPU from the database it shares the cores with.
    assert engine.session.get_session_options().get_session_config_entry(minilm.SPINNING) == "0"
    onnx = engine.encode(texts)
    torch = minilm.TorchMiniLM().encode(texts)
    cosines = (np.asarray(onnx) * np.asarray(torch)).sum(axis=1)
    assert cosines.min() >= 0.99999, cosines.min()
    assert np.allclose(np.linalg.norm(onnx, axis=1), 1.0, atol=1e-5)


def test_the_graph_is_written_without_torch_and_gives_the_reference_vectors(tmp_path):
    # The image has no torch: write the graph in a process where importing it (or transformers) fails.
    graph = tmp_path / "graph.onnx"
    blocked = ("import sys; sys.modules.update(torch=None, transformers=None, sentence_transformers=None); "
               "from pathlib import Path; from memory import minilm; minilm._export(Path(sys.argv[1]))")
    subprocess.run([sys.executable, "-c", blocked, str(graph)], cwd=PROJECT_DIR,
                   check=True, timeout=600)
    texts = sample_statements(DEMO_SLICE, limit=16)
    vectors = minilm.OnnxMiniLM(graph).encode(texts)
    assert np.abs(vectors - minilm.TorchMiniLM().encode(texts)).max() < 1e-5


def test_local_picks_onnx_when_available_and_torch_when_told(settings):
    assert build_provider("local").engine == "onnxruntime fp32"
    with override_settings(UNSAY_LOCAL_EMBEDDING_ENGINE="torch"):
        assert build_provider("local").engine == "torch (sentence-transformers)"


def test_without_onnxruntime_auto_falls_back_to_torch_and_onnx_refuses(monkeypatch, caplog):
    monkeypatch.setattr(minilm, "onnx_runtime_available", lambda: False)
    assert LocalMiniLM("auto").engine == "torch (sentence-transformers)"
    assert "fall back to torch: onnxruntime is not installed" in caplog.text
    with pytest.raises(ImproperlyConfigured, match="UNSAY_LOCAL_EMBEDDING_ENGINE=onnx but .* not installed"):
        LocalMiniLM("onnx").embed_one("valsartan")


def test_export_writes_the_graph_atomically_under_the_weights_digest(tmp_path, monkeypatch):
    exported = []
    monkeypatch.setattr(minilm, "_export", lambda path: (exported.append(path), path.write_bytes(b"graph")))
    path = minilm.ensure_onnx_model(tmp_path)
    assert path.name == f"all-MiniLM-L6-v2-fp32-fused-{minilm.weights_digest()[:16]}-opset17.onnx"
    assert path.read_bytes() == b"graph" and exported[0] != path  # written elsewhere, then renamed
    assert minilm.ensure_onnx_model(tmp_path) == path and len(exported) == 1  # reused, not exported again
    assert sorted(p.name for p in tmp_path.iterdir()) == [".export.lock", path.name]


def test_a_text_repeated_in_one_call_is_embedded_once():
    provider = HashingEmbedding(384)
    vectors = provider.embed(["lot A of recall 1", "lot B", "lot A of recall 1"])
    assert (provider.calls, provider.texts) == (1, 2)
    assert vectors[0] == vectors[2] and vectors[0] is not vectors[2] and vectors[0] != vectors[1]
