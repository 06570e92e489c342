"""Turn the hand-written label sheets (b01.txt ... b08.txt, one line per evaluation text:
index|kind|lots|window, kind L/A/W or S for spot checks, lots "LOT=expiry;LOT,LOT=expiry") into
recalls/data/lots_eval.json. Run eval_texts.py first (it writes eval_texts.json next to this file).

    .venv/bin/python bench/lots_labels/eval_texts.py && .venv/bin/python bench/lots_labels/build_eval.py
"""
import glob
import json
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
texts = json.load(open(HERE / 'eval_texts.json'))
labels = {}
for path in sorted(glob.glob(str(HERE / 'b*.txt'))):
    for line in open(path):
        line = line.rstrip('\n')
        if not line.strip():
            continue
        parts = line.split('|')
        i = int(parts[0])
        assert i not in labels, i
        labels[i] = parts[1:]
missing = [t['i'] for t in texts if t['i'] not in labels]
print('missing', missing)
ISO = re.compile(r'^\d{4}(-\d{2}(-\d{2})?)?$')
KIND = {'L': 'lots', 'A': 'all_lots', 'W': 'all_lots_window', 'S': 'lots'}
cases = []
for t in texts:
    kind, lots_field, *rest = labels[t['i']]
    window = rest[0] if rest else ''
    case = {"recall_number": t['id'].split('#')[1], "source": t['id'].split('#')[0], "also": [], "stratum": t['class'],
            "code_info": t['code_info'], "more_code_info": t['more_code_info'], "kind": KIND[kind],
            "lots_labelled": kind != 'S', "lots": [], "expiry_window": None, "dispensed_window": None,
            "manufactured_window": None, "truncated": len(t['code_info']) >= 30000}
    if kind == 'S':
        for spec in lots_field.split(';'):
            sign, items = spec[len('spot'):len('spot') + 1], spec[len('spot') + 1:]
            case["must_include" if sign == '+' else "must_exclude"] = items.split(',')
    elif lots_field:
        for item in lots_field.split(';'):
            expiry = None
            if '=' in item:
                item, expiry = item.split('=')
            else:
                head, _, tail = item.rpartition('@')
                if head and ISO.match(tail):
                    item, expiry = head, tail
            for lot in item.split(','):
                assert lot and (expiry is None or ISO.match(expiry)), (t['i'], lot, expiry)
                case["lots"].append({"lot": lot, "expiry": expiry})
    for one in window.split():  # "E:..2018-04-15" or several: "E:.. D:2017-12-01..2018-02-12"
        tag, span = one.split(':', 1)
        lo, hi = span.split('..')
        name = {"E": "expiry_window", "D": "dispensed_window", "M": "manufactured_window"}[tag]
        case[name] = [lo or None, hi or None]
    cases.append(case)
split = json.load(open(ROOT / 'tests/fixtures/lots_split.json'))
added = set(split.get('added', {}).get('ids', []))
for case, entry in zip(cases, split['evaluation'], strict=True):
    case['also'] = [x for x in entry['ids'] if x != f"{case['source']}#{case['recall_number']}"]
    if f"{case['source']}#{case['recall_number']}" in added:
        case['added'] = ("window phrasing moved from development to evaluation and labelled before the parser "
                         "was changed to read window phrasings (lots_split.json 'added')")
out = {
  "about": ("Evaluation split for recalls.lots.parse_scope: real openFDA code_info/more_code_info "
            "texts chosen by bench/lots_split.py before the parser was rewritten, each labelled by reading it (not "
            "from parser output). Never used to tune the parser. Labelling rules: see docs/lots.md. Cases marked "
            "'added' are expiry-window and all-lots phrasings added later, held out the same way (b09.txt)."),
  "cases": cases,
}
json.dump(out, open(ROOT / 'recalls/data/lots_eval.json', 'w'), indent=1, ensure_ascii=False)
n_lots = sum(len(c['lots']) for c in cases)
print(len(cases), 'cases', n_lots, 'lots', sum(1 for c in cases if c['lots_labelled']), 'lot-labelled',
      {k: sum(1 for c in cases if c['kind'] == k) for k in KIND.values()})
