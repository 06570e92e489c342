"""drugs.display.display_name over REAL openFDA product descriptions (tests/fixtures/openfda): what a
patient reads is the product and its strength, in clean case, never the packaging, count, fill volume,
labeler, address or codes the description runs on into."""

import re

import pytest

from drugs.display import display_name
from tests.factories import RECENT_SAMPLE, SNAPSHOT_2021, SNAPSHOT_2023, openfda_record, read_results


@pytest.mark.parametrize("recall_number,expected", [
    # the Mylan valsartan recalls of the sweep's world: strength kept, "USP", count and labeler gone
    ("D-0326-2019", "Valsartan Tablets 160 mg"),
    ("D-0315-2019", "Valsartan Tablets 40 mg"),
    # printed in capitals, with an enumerated list of bottles and NDCs after the strength
    ("D-0502-2019", "Losartan Potassium Tablets 50 mg"),
    # tall-man lettering ("metFORMIN") reads as a name
    ("D-528-2014", "Metformin HCl Tablet 500 mg"),
    # the firm's own name opens the description
    ("D-1113-2018", "Valsartan Tablets 40 mg"),
    ("D-0971-2018", "Valsartan 320 mg Tablets"),
    # a bracketed ingredient list, a list of fill volumes, a count of tablets in blisters
    ("D-0863-2017", "Hyland's Baby Teething Tablets Quick-Dissolving Tablets"),
    ("D-0434-2015", "Practi-0.9% Sodium Chloride"),
    ("D-1047-2019", "Valsartan Tablets 160 mg"),
    # a concentration stays, the syringe sizes it is packaged in go
    ("D-0219-2017", "Docusate Oral 10 mg/mL Oral Syringe"),
    ("D-0345-2018", "Limbrel (flavocoxid 500 mg) capsules"),
    ("D-0081-2019", "Montelukast Sodium Tablets 10 mg"),
])
def test_a_real_description_reads_as_its_product(recall_number, expected):
    record = openfda_record(recall_number)
    assert display_name(record["product_description"], record["recalling_firm"]) == expected


def test_a_description_that_opens_with_its_labeler_code_or_pack_still_names_the_product():
    # real descriptions (2021 snapshot), quoted as FDA published them
    assert display_name("Distributed by: DocRx, Methylprednisolone Tablets, USP 4 mg, Rx, 21 Count Blister") == \
        "Methylprednisolone Tablets 4 mg"
    assert display_name("NDC 64380-721-06 TACROLIMUS CAPSULES, USP 1mg 100 Capsules Rx Only Manufactured by") == \
        "Tacrolimus Capsules 1mg"
    assert display_name("Unit Dose Valsartan Tablets, USP, 80 mg. Rx only, Distributed by:  Major") == \
        "Valsartan Tablets 80 mg"
    assert display_name("") == "" and display_name("NDC 12345-678-90") == ""


LABELER = re.compile(r"\b(?:manufactured|distributed|marketed|packaged|repackaged|relabeled|compounded|mfd|mfg|"
                     r"inc|llc|ltd)\b", re.I)
CODES = re.compile(r"\b(?:ndc|upc|sku)\b|\d{4,5}-\d{3,4}-\d{1,2}", re.I)
COUNT = re.compile(r"\b\d+\s*-?\s*(?:count|ct)\b", re.I)
CONTAINER = re.compile(r"(?<![-\w])(?:bottles?|blisters?|cartons?|vials?|pouch|drums?|bags?)\b", re.I)
STATUS = re.compile(r"\brx\s+only\b|\bUSP\b", re.I)
FILL = re.compile(r"(?<![/\d.])(?<!/ )(?<!per )\b\d[\d.,]*\s*(?:ml|fl\.? ?oz)\b", re.I)


def test_no_real_description_leaves_packaging_labeler_codes_or_capitals_in_the_name():
    descriptions = {(raw.get("product_description") or "", raw.get("recalling_firm") or "")
                    for path in (SNAPSHOT_2021, SNAPSHOT_2023, RECENT_SAMPLE) for raw in read_results(path)}
    assert len(descriptions) > 10_000
    problems = []
    for description, firm in sorted(descriptions):
        name = display_name(description, firm)
        if not name and re.search(r"[A-Za-z]{3}", description):
            problems.append(("no name", description))
        for what, pattern in (("labeler", LABELER), ("code", CODES), ("count", COUNT), ("container", CONTAINER),
                              ("status", STATUS), ("fill volume", FILL)):
            if pattern.search(name):
                problems.append((what, name))
        if len(name) > 80 or re.search(r"\b[A-Z]{6,}\b", name):
            problems.append(("too long or in capitals", name))
    assert not problems, f"{len(problems)} names, first: {problems[:5]}"
