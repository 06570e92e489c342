"""Compatibility names: normalisation now lives in `drugs` (identity, NDCs, lots).

Kept so callers not yet moved keep working; new code imports from `drugs` directly.
"""

from drugs.identity import resolve
from drugs.lots import printed_lot as normalize_lot
from drugs.ndc import ndc_product, ndc_products, normalize_ndc, normalize_product_ndc

__all__ = ["ndc_product", "ndc_products", "normalize_drug_name", "normalize_lot", "normalize_ndc",
           "normalize_product_ndc"]


def normalize_drug_name(raw: str) -> str:
    """The identity key of a drug name ("Diovan" -> "valsartan"); "" when it cannot be resolved."""
    return resolve(raw or "").key
