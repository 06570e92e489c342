"""Letters and the reply page in the patient's language (English, Spanish) through Django's translation
machinery: the catalogue is complete and compiled, every letter and reply template renders in Spanish with
no English sentence left, and a Spanish patient's draft is written (and redrafted) in Spanish so the
pharmacist reviews and edits the words that will be sent. The recall facts are the real D-0315-2019 ones
(tests/corrections/test_letters_matrix.py); patients synthetic."""

import gettext
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.conf import settings
from django.template.loader import render_to_string
from django.utils.translation import override

from corrections import drafting
from replies.forms import ReplyForm
from tests.corrections.test_letters_matrix import VERDICTS, _changes, real  # noqa: F401 (real is a fixture)

PO = Path(settings.BASE_DIR) / "locale" / "es" / "LC_MESSAGES" / "django.po"
MO = PO.with_suffix(".mo")
ENTRY = re.compile(r'^(#, fuzzy\n)?msgid ((?:".*"\n)+)msgstr ((?:".*"\n?)+)', re.M)


def _unquote(chunk: str) -> str:
    return "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', chunk)).replace('\\"', '"').replace("\\n", "\n")


def catalogue() -> dict[str, tuple[str, bool]]:
    return {_unquote(m.group(2)): (_unquote(m.group(3)), bool(m.group(1)))
            for m in ENTRY.finditer(PO.read_text() + "\n") if _unquote(m.group(2))}


def english_fragments() -> set[str]:
    """Every run of words of every English message, between its placeholders, long enough to be a sentence
    part (a Spanish letter containing one still has English in it)."""
    pieces = set()
    for msgid in catalogue():
        for piece in re.split(r"%\(\w+\)s|[“”:.,;()?]", msgid):
            piece = piece.strip()
            if len(piece) >= 14 and " " in piece:
                pieces.add(piece)
    return pieces


def untranslated(text: str) -> list[str]:
    text = re.sub(r"“[^”]*”", "“”", text)  # the FDA's own words are quoted as written
    return sorted(p for p in english_fragments() if p in text)


def test_the_spanish_catalogue_is_complete_and_its_compiled_file_is_current():
    entries = catalogue()
    assert len(entries) > 100
    assert not [m for m, (s, fuzzy) in entries.items() if not s or fuzzy], "untranslated or fuzzy entries"
    for msgid, (msgstr, _) in entries.items():
        assert re.findall(r"%\(\w+\)s", msgid) == re.findall(r"%\(\w+\)s", msgstr) or \
            sorted(re.findall(r"%\(\w+\)s", msgid)) == sorted(re.findall(r"%\(\w+\)s", msgstr)), msgid
    with MO.open("rb") as f:  # the committed .mo is what Django reads: it must say what the .po says
        compiled = gettext.GNUTranslations(f)
    stale = [m for m, (s, _) in entries.items() if compiled.gettext(m) != s]
    assert not stale, f"django.mo is older than django.po (compile it: docs/languages.md): {stale[:3]}"


def test_every_letter_renders_in_spanish_with_no_english_sentence_left(real):  # noqa: F811
    rendered = 0
    problems = []
    for channel in ("email", "sms"):
        patient = SimpleNamespace(display_name="Paciente Sintético", preferred_channel=channel,
                                  preferred_language="es")
        english = SimpleNamespace(display_name="Synthetic Patient", preferred_channel=channel)
        for certainty in ("confirmed", "probable", "candidate"):
            for change, previous, fact, dispensing in _changes(real):
                for old, new in zip(VERDICTS, VERDICTS[1:] + VERDICTS[:1], strict=True):
                    outcome = SimpleNamespace(verdict=new, subject=real["subject"], answer="")
                    text = drafting.correction_text(patient, old, outcome, fact, previous, match_class=certainty,
                                                    dispensing_changed=dispensing)
                    problems += [(change, channel, p, text) for p in untranslated(text)]
                    assert untranslated(drafting.correction_text(english, old, outcome, fact, previous,
                                                                 match_class=certainty,
                                                                 dispensing_changed=dispensing))
                    rendered += 1
                if fact.retracted_at is None and fact.kind == "recall":
                    for match in ("lot", "drug"):
                        outcome = SimpleNamespace(verdict="stop", subject=real["subject"], answer="")
                        text = drafting.notice_text(patient, match, outcome, fact, match_class=certainty)
                        problems += [(change, channel, p, text) for p in untranslated(text)]
                        rendered += 1
        with override("es"):
            html = drafting.letter_html("Estimado/a Paciente Sintético:\n\nTexto.")
            assert 'lang="es"' in html and "Teléfono" in html
            problems += [("html", channel, p, html) for p in untranslated(html)]
    assert rendered > 100
    assert not problems, f"{len(problems)} English leftovers, first: {problems[0][2]!r} in\n{problems[0][3]}"


def test_the_reply_link_and_every_reply_page_render_in_spanish():
    context = {"pharmacy_name": "Farmacia Sintética", "pharmacy_phone": "+1 202 555 0143", "url": "https://x/r/t"}
    with override("es"):
        pages = [render_to_string("letters/reply_link_email.txt", context),
                 render_to_string("letters/reply_link_sms.txt", context),
                 render_to_string("replies/reply.html", {**context, "form": ReplyForm()}),
                 render_to_string("replies/reply.html", {**context, "form": ReplyForm({"answer": "question"})}),
                 render_to_string("replies/refused.html", context),
                 render_to_string("replies/refused.html", {**context, "too_many": True})]
        pages += [render_to_string("replies/thanks.html", {**context, "answer": a})
                  for a in ("stopped", "returned", "still_have", "question")]
    for page in pages:
        assert not untranslated(page), page
    assert "Dejé de usarlo" in pages[2] and "Por favor, escriba su pregunta" in pages[3]


@pytest.mark.django_db(transaction=True)
def test_a_spanish_patients_draft_is_written_and_redrafted_in_spanish(world, no_auto_sweep, client, people):
    from corrections.models import Correction
    from corrections.review import redraft
    from corrections.sweep.run import sweep
    from patients.models import Patient
    from tests.factories import escalate

    Patient.objects.filter(external_ref__in=["SYN-A", "SYN-D"]).update(preferred_language="es")
    escalate()
    sweep()
    drafts = {c.patient.external_ref: c for c in Correction.objects.select_related("patient")}
    assert drafts["SYN-A"].drafted_text.startswith("Estimado/a Synthetic SYN-A:")
    assert "Llámenos antes de su próxima dosis" in drafts["SYN-A"].drafted_text
    assert not untranslated(drafts["SYN-A"].drafted_text)
    assert drafts["SYN-B"].drafted_text.startswith("Dear Synthetic SYN-B,")  # same letter, English patient
    assert "Llame al" in drafts["SYN-D"].drafted_text and len(drafts["SYN-D"].drafted_text) <= settings.UNSAY_SMS_LIMIT
    assert redraft(drafts["SYN-A"], channel="email").startswith("Estimado/a")
    # Their packs have the recalled lot but no NDC on record: probable, so the subject says "may affect".
    assert drafts["SYN-A"].match_class == drafts["SYN-B"].match_class == "probable"
    assert drafts["SYN-A"].message.subject == "Novedad sobre un retiro que puede afectar a su medicamento"
    assert drafts["SYN-B"].message.subject == "Update about a recall that may affect your medicine"
    client.force_login(people["pharmacist"])  # the card says which language the pharmacist is editing
    queue = client.get("/corrections/review/").content.decode()
    assert "in Español, followed by the patient's reply link" in queue and "in English, followed by" in queue
