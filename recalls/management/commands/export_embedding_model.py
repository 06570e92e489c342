"""Export the shipped MiniLM weights to ONNX (UNSAY_MODEL_DIR) and check the graph against torch.

    manage.py export_embedding_model            # export if missing, then compare with torch
    manage.py export_embedding_model --force    # export again

The local provider also exports at first use; run this at image build or deploy time to take the
~5 s out of the first ingest, and to see the comparison.
"""

import time

from django.conf import settings
from django.core.management.base import BaseCommand

from memory import minilm
from memory.models import Fact
from recalls.documents import load_document
from recalls.ingest import parse_enforcement, recall_statement


class Command(BaseCommand):
    help = "Export the local embedding model to ONNX and compare its vectors with torch's."

    def add_arguments(self, parser):
        parser.add_argument("--force", action="store_true", help="Export again even if the file exists.")
        parser.add_argument("--no-verify", action="store_true", help="Skip the comparison with torch.")
        parser.add_argument("--sample", metavar="FILE",
                            help="openFDA JSON or bulk .json.zip whose recall statements are compared "
                                 "(default: the believed recall facts in the database).")

    def handle(self, *args, force=False, no_verify=False, sample=None, **options):
        started = time.perf_counter()
        path = minilm.ensure_onnx_model(settings.UNSAY_MODEL_DIR, force=force)
        self.stdout.write(f"{path} ({path.stat().st_size / 1e6:.1f} MB) ready in {time.perf_counter() - started:.1f}s")
        if no_verify:
            return
        texts = sample_statements(sample) if sample else believed_statements()
        if not texts:
            self.stdout.write("no recall statements to compare with torch: ingest recalls first, or pass --sample FILE")
            return
        engines = [minilm.OnnxMiniLM(path), minilm.TorchMiniLM()]
        vectors, rates = [], []
        for engine in engines:
            engine.encode(texts[:4])  # first-call set-up is not throughput
            started = time.perf_counter()
            vectors.append(engine.encode(texts))
            rates.append(len(texts) / (time.perf_counter() - started))
        cosines = (vectors[0] * vectors[1]).sum(axis=1)
        self.stdout.write(f"cosine with torch over {len(texts)} real recall statements: "
                          f"min {cosines.min():.6f}, mean {cosines.mean():.6f}")
        self.stdout.write(f"texts/s, same run: {engines[0].engine} {rates[0]:.1f}, {engines[1].engine} {rates[1]:.1f} "
                          f"({rates[0] / rates[1]:.2f}x)")


def believed_statements(limit: int = 64) -> list[str]:
    """Statements of believed recall facts, exactly as ingestion wrote them."""
    facts = Fact.objects.believed().filter(kind="recall").order_by("id")
    return list(facts.values_list("statement", flat=True)[:limit])


def sample_statements(location, limit: int = 64) -> list[str]:
    """Statements ingestion would write for the real recall records in an openFDA file."""
    out = []
    for record in load_document(str(location))["results"]:
        try:
            parsed = parse_enforcement(record)
        except Exception:  # a malformed record is the quarantine's business, not this sample's
            continue
        for lot in (parsed.lots or [None])[:2]:
            out.append(recall_statement(parsed.attributes, lot, all_lots=parsed.all_lots))
        if len(out) >= limit:
            break
    return out
