"""Check my pack in Chromium: typed and sent with the keyboard alone, no serious accessibility violation
(axe-core), and DataMatrix images of real recalled packs (GTIN + lot, generated here with ppf-datamatrix)
decoded in the page by the vendored ZXing (ask/static/check/) from its photo input, the decoded text read
by the server as the till reads a scan. Real recall records (tests/factories.py); no patient involved.
The screenshot of the answer is docs/screenshots/check.png with UNSAY_UPDATE_SCREENSHOTS=1."""

import struct
import zlib
from pathlib import Path

import pytest

from drugs.gs1 import gtin_for_ndc
from memory.fact_writes import assert_claim
from tests.browser.accessibility import serious_violations
from tests.browser.test_browser_worklist import _shot, _wait, shots  # noqa: F401 - shots is the fixture
from tests.check.packs import EVERY_LOT_PRINTED, EVERY_LOT_RECALL, VALSARTAN_LOT, VALSARTAN_NDC, VALSARTAN_RECALL
from tests.factories import recall_claim

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(),
                       reason="needs /usr/bin/chromium (apt-get install chromium chromium-driver)"),
]



@pytest.fixture
def recalls(hashing_embeddings):
    assert_claim(recall_claim(VALSARTAN_RECALL, VALSARTAN_LOT))
    assert_claim(recall_claim(EVERY_LOT_RECALL, None))


def datamatrix_png(text: str, path: Path, *, module: int = 8, quiet: int = 4) -> Path:
    """A GS1 DataMatrix of `text` as a black-on-white PNG (ppf-datamatrix draws the symbol; the PNG is
    written here, no imaging library needed)."""
    from ppf.datamatrix import DataMatrix

    matrix = DataMatrix(text).matrix
    size = (len(matrix) + 2 * quiet) * module
    rows = []
    for y in range(size):
        cells = matrix[y // module - quiet] if quiet <= y // module < quiet + len(matrix) else []
        row = bytearray([0])  # PNG filter type: none
        for x in range(size):
            cell = x // module - quiet
            dark = bool(cells) and 0 <= cell < len(cells) and cells[cell]
            row.append(0 if dark else 255)
        rows.append(bytes(row))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", size, size, 8, 0, 0, 0, 0)  # 8-bit greyscale
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"".join(rows)))
                     + chunk(b"IEND", b""))
    return path


def test_a_pack_is_checked_with_the_keyboard_alone_and_the_page_passes_axe(live_server, browser, recalls,
                                                                           shots):  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    browser.get(live_server.url + "/check")
    assert serious_violations(browser) == []
    body = browser.find_element(By.TAG_NAME, "body")
    body.send_keys(Keys.TAB)  # the language switch, then the NDC field
    active = browser.switch_to.active_element
    for _ in range(5):
        if active.get_attribute("id") == "id_ndc":
            break
        active.send_keys(Keys.TAB)
        active = browser.switch_to.active_element
    assert active.get_attribute("id") == "id_ndc"
    active.send_keys(VALSARTAN_NDC, Keys.TAB)
    active = browser.switch_to.active_element
    assert active.get_attribute("id") == "id_lot"
    active.send_keys(f"LOT {VALSARTAN_LOT} EXP 11/2018", Keys.ENTER)
    answer = _wait(lambda: browser.find_element(By.ID, "answer-heading"))
    assert answer.text == "This pack is recalled."
    assert VALSARTAN_RECALL in browser.find_element(By.ID, "answer").text
    assert serious_violations(browser) == []
    _shot(browser, "check.png", shots)


@pytest.mark.parametrize(("ndc", "lot", "recall"), [(VALSARTAN_NDC, VALSARTAN_LOT, VALSARTAN_RECALL),
                                                    (EVERY_LOT_PRINTED, "ZZ1", EVERY_LOT_RECALL)])
def test_a_photo_of_a_recalled_packs_datamatrix_is_decoded_in_the_page(live_server, browser, recalls, tmp_path,
                                                                       ndc, lot, recall):
    from selenium.webdriver.common.by import By

    text = f"01{gtin_for_ndc(ndc)}17281130" + f"10{lot}"
    image = datamatrix_png(text, tmp_path / "pack.png")
    browser.get(live_server.url + "/check")
    _wait(lambda: not browser.find_element(By.ID, "scanner").get_attribute("hidden"))  # the reader loaded
    browser.find_element(By.ID, "scan-photo").send_keys(str(image))
    heading = _wait(lambda: browser.find_element(By.ID, "answer-heading"))
    assert heading.text == "This pack is recalled."
    assert recall in browser.find_element(By.ID, "answer").text
    # The decoded text went to the server as read, and the form shows it.
    assert browser.find_element(By.ID, "id_gs1").get_attribute("value") == text
