"""The packs the check-my-pack tests hold: REAL recall records (tests/factories.py builds the facts with
ingestion's own code) and the shapes a pack's barcode text takes."""

from drugs.gs1 import gtin_for_ndc

# D-0315-2019: Class II, Mylan valsartan 40 mg, lot 3061169; its text names NDC 0378-5807-93 (openFDA's
# block also lists 0378-5813, -5814 and -5815, other strengths of the listing).
VALSARTAN_RECALL, VALSARTAN_LOT, VALSARTAN_NDC = "D-0315-2019", "3061169", "0378-5807-93"
# D-0219-2017: Class I, docusate oral syringes, every lot, NDC 62295-0601 (printed 62295-601-01).
EVERY_LOT_RECALL, EVERY_LOT_NDC, EVERY_LOT_PRINTED = "D-0219-2017", "62295-0601-01", "62295-601-01"


def gs1_texts(ndc: str, lot: str, expiry: str = "181130") -> list[str]:
    gtin = gtin_for_ndc(ndc)
    return [
        f"01{gtin}17{expiry}10{lot}\x1d21SN0001",          # as a DataMatrix decodes (GS after the lot)
        f"]d201{gtin}17{expiry}10{lot}",                   # with the symbology identifier, lot last
        f"01{gtin}17{expiry}10{lot}|21SN0001",             # a scanner sending | for GS
        f"(01){gtin}({expiry[:0]}17){expiry}(10){lot}",    # the line printed under the barcode
        f"https://id.gs1.org/01/{gtin}/10/{lot}?17={expiry}",  # a GS1 Digital Link
    ]
