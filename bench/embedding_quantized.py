"""What a cheaper MiniLM would buy and cost: the shipped fp32 ONNX engine beside the same graph quantized
by ONNX Runtime (dynamic int8, per-channel weights), and beside both reading only the first --tokens
tokens of each text (the shipped engine reads up to 256), on real recall texts, in the same run.

    .venv/bin/python bench/embedding_quantized.py                 # 1,500 texts, 3 runs per engine
    .venv/bin/python bench/embedding_quantized.py --sample 4000 --runs 5 --tokens 48

Texts: the distinct texts first ingest embeds for tests/fixtures/openfda/drug-enforcement-2021-04-28.json.zip
(recalls.ingest.recall_claims, lots masked), the first --sample of them. Speed: texts/s and texts per
CPU-second of each engine, runs alternating (min / median / max). Agreement with the shipped engine: the
cosine of the two vectors of each text, and for each text its 10 nearest other texts by either engine (overlap@10,
and how often the nearest is the same) — the figure to set beside the vector index's recall@8 against an
exact scan (bench/vector_recall.py), which is what the product already accepts from approximation.
The quantized graph is written under var/bench-cache/ and never used by the product.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import PROJECT_DIR, setup_django  # noqa: E402

FIXTURE = PROJECT_DIR / "tests" / "fixtures" / "openfda" / "drug-enforcement-2021-04-28.json.zip"
CACHE = PROJECT_DIR / "var" / "bench-cache"


def recall_texts(limit: int) -> list[str]:
    from recalls.documents import load_document
    from recalls.ingest import parse_enforcement, recall_claims
    from recalls.record_fields import Malformed

    texts = []
    for raw in load_document(str(FIXTURE))["results"]:
        try:
            parsed = parse_enforcement(raw)
        except Malformed:
            continue  # quarantined by ingest too
        texts.extend(claim.embedding_text() for claim in recall_claims(parsed, subject=parsed.subject,
                                                                          ndcs=parsed.ndcs))
    return list(dict.fromkeys(texts))[:limit]


def quantized(fp32: Path) -> Path:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    target = CACHE / fp32.name.replace("fp32", "int8-perchannel")
    if not target.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        # The exported graph uses ONNX Runtime's fused contrib ops, whose outputs shape inference cannot
        # type: they are float tensors.
        quantize_dynamic(str(fp32), str(target), weight_type=QuantType.QInt8, per_channel=True,
                         extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
    return target


def timed(engine, texts) -> tuple:
    """(vectors, texts/s, texts per CPU-second) of one pass over the texts."""
    wall, cpu = time.perf_counter(), time.process_time()
    vectors = engine.encode(texts)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return vectors, len(texts) / wall, len(texts) / cpu


def neighbours(vectors, k: int):
    import numpy as np

    scores = vectors @ vectors.T
    np.fill_diagonal(scores, -2.0)
    return np.argsort(-scores, axis=1)[:, :k]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sample", type=int, default=1500)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=64, help="the shorter texts' length in tokens (0: none)")
    args = parser.parse_args()
    setup_django(db_name="unsay_bench_quantized", migrate=False)
    import logging
    import os

    import numpy as np
    from django.conf import settings

    from memory.minilm import OnnxMiniLM, ensure_onnx_model

    logging.getLogger().setLevel(logging.WARNING)  # the quantizer logs a line per tensor
    texts = recall_texts(args.sample)
    fp32_path = ensure_onnx_model(Path(settings.UNSAY_MODEL_DIR))
    int8_path = quantized(fp32_path)
    engines = {"fp32 (shipped)": OnnxMiniLM(fp32_path), "int8 per-channel": OnnxMiniLM(int8_path)}
    if args.tokens:
        for name, path in ((f"fp32, {args.tokens} tokens", fp32_path), (f"int8, {args.tokens} tokens", int8_path)):
            engines[name] = OnnxMiniLM(path)
            engines[name].tokenizer.enable_truncation(args.tokens)
    lengths = [len(e.ids) for e in engines["fp32 (shipped)"].tokenizer.encode_batch(texts)]
    longer = (f", longer than {args.tokens}: {sum(n > args.tokens for n in lengths) / len(lengths):.0%}"
              if args.tokens else "")
    print(f"{len(texts)} real recall texts, tokens mean {statistics.mean(lengths):.0f}{longer}; "
          f"{os.cpu_count()} CPUs; load average {os.getloadavg()[0]:.1f} at start")
    rates = {name: [] for name in engines}
    per_cpu = {name: [] for name in engines}
    vectors = {}
    for engine in engines.values():
        engine.encode(texts[:32])  # warm-up: first-run allocations are not throughput
    for _ in range(args.runs):
        for name, engine in engines.items():
            vectors[name], rate, cpu_rate = timed(engine, texts)
            rates[name].append(rate)
            per_cpu[name].append(cpu_rate)
    for name in engines:
        r, c = rates[name], per_cpu[name]
        print(f"  {name:18} {min(r):7.1f} / {statistics.median(r):7.1f} / {max(r):7.1f} texts/s   "
              f"{statistics.median(c):6.1f} texts per CPU-second (median)")
    shipped = vectors["fp32 (shipped)"]
    near_shipped = neighbours(shipped, 10)
    for name in list(engines)[1:]:
        speedup = statistics.median(rates[name]) / statistics.median(rates["fp32 (shipped)"])
        cosine = (shipped * vectors[name]).sum(axis=1)
        near = neighbours(vectors[name], 10)
        overlap = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(near_shipped, near, strict=True)])
        same_first = np.mean(near_shipped[:, 0] == near[:, 0])
        print(f"{name}: {speedup:.2f}x the shipped engine's texts/s (medians); against it: cosine min "
              f"{cosine.min():.4f}, median {np.median(cosine):.4f}; overlap@10 of nearest texts {overlap:.3f}; "
              f"same nearest text {same_first:.3f}")
    print(f"load average {os.getloadavg()[0]:.1f} at end")


if __name__ == "__main__":
    main()
