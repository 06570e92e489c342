"""The plain reason (corrections.drafting.plain_reason) reads FDA's reason category first, on REAL reason
texts of the openFDA fixtures (tests/factories.openfda_record): a word in the detail no longer decides ("label"
in a temperature excursion's "storage range listed on the product labeling", "stability" in an impurity found
at a stability station, "carcinogenicity" in a product tainted with an undeclared drug, "sterile" in a
formulation made with the wrong diluent), except the two hazards said wherever the text names them (an
undeclared drug, a cancer-causing impurity). English and Spanish."""

import pytest
from django.utils.translation import override

from corrections.drafting import plain_reason
from tests.factories import openfda_record

TEMPERATURE = "it may have been stored at a temperature that could harm it"
IMPURITY = "it may contain an impurity above the allowed limit"
UNDECLARED = "it contains an ingredient its label does not list"
CANCER = "an impurity was found that may raise the risk of cancer if taken for a long time"

# (real recall, its plain words in English, a word of the Spanish, what the old reading said and must not).
CASES = [
    # "Temperature Abuse: ... outside of the acceptable storage range listed on the product labeling ..."
    ("D-0030-2018", TEMPERATURE, "temperatura", "label"),
    # "Temperature Abuse: One shipment was inadvertantly stored refrigerated rather than the labeled room ..."
    ("D-0005-2015", TEMPERATURE, "temperatura", "label"),
    # "Failed Impurities/Degradation Specifications: ... total impurities at the 9-month stability station."
    ("D-1186-2014", IMPURITY, "impureza", "effective"),
    # "Failed Impurities/Degradation Specifications: ... an impurity during stability testing."
    ("D-1087-2015", IMPURITY, "impureza", "effective"),
    # "Marketed Without an Approved NDA/ANDA: ... undeclared sibutramine and phenolphthalein ... carcinogenicity"
    ("D-1009-2019", UNDECLARED, "etiqueta no indica", "cancer"),
    # "... tainted with undeclared sibutramine ... concerns of carcinogenicity ..."
    ("D-1138-2016", UNDECLARED, "etiqueta no indica", "cancer"),
    # "Incorrect Product Formulation; compounded sterile drug reconstituted using sterile water instead of ..."
    ("D-0518-2019", "it may not have been made with the right ingredients", "ingredientes correctos", "sterile"),
    # "Failed Content Uniformity Specifications: ... a packaging degradation ..."
    ("D-0961-2015", "the amount of medicine may vary from dose to dose", "de una dosis a otra", "impurity"),
    # "Defective Container: Stability samples of both products were noted to have some white solid ..."
    ("D-1068-2014", "its container may be faulty", "envase", "effective"),
    # "Labeling: Product Contains Undeclared API; Incorrect formulation": about the drug, not the label.
    ("D-0099-2021", UNDECLARED, "etiqueta no indica", "mistake on the label"),
    # "CGMP Deviations: FDA lab confirmed presence an impurity, N-nitrosodiethylamine (NDEA) ...": the general
    # cGMP category does not hide the impurity its detail names.
    ("D-0315-2019", CANCER, "cáncer", "quality standards"),
    # "GCMP Deviations: ... N-nitrosodiethylamine (NDEA) ..." (FDA's own misspelling of the category).
    ("D-0326-2019", CANCER, "cáncer", "quality standards"),
]


@pytest.mark.parametrize(("recall_number", "plain", "spanish", "never"), CASES,
                         ids=[case[0] for case in CASES])
def test_a_real_reason_reads_as_its_category_says(recall_number, plain, spanish, never):
    reason = openfda_record(recall_number)["reason_for_recall"]
    assert plain_reason(reason) == plain, reason
    assert never not in plain_reason(reason)
    with override("es"):
        translated = plain_reason(reason)
    assert translated != plain and spanish in translated, translated


def test_the_category_is_read_before_the_detail_of_the_same_record():
    """The words that misled the old reading are in these very records' details."""
    assert "labeling" in openfda_record("D-0030-2018")["reason_for_recall"]
    assert "stability" in openfda_record("D-1186-2014")["reason_for_recall"]
    assert "carcinogenicity" in openfda_record("D-1009-2019")["reason_for_recall"]
    assert "sterile" in openfda_record("D-0518-2019")["reason_for_recall"]
    # The general cGMP category alone is still the quality standard.
    assert plain_reason("CGMP Deviations") == "it was not made to the required quality standards"
