"""Write the evaluation split's texts, in split order, to eval_texts.json next to this file (for labelling)."""
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from lots_split import records  # noqa: E402

split=json.load(open(HERE.parent.parent / 'tests/fixtures/lots_split.json'))
recmap={}
for src,r in records():
    recmap[f"{src}#{r.get('recall_number')}"]=r
out=[]
for i,e in enumerate(split['evaluation']):
    r=recmap[e['ids'][0]]
    out.append({"i": i, "id": e['ids'][0], "class": e['class'], "code_info": r.get('code_info') or '',
                "more_code_info": r.get('more_code_info') or ''})
json.dump(out,open(HERE / 'eval_texts.json', 'w'))
L=sorted(len(o['code_info'])+len(o['more_code_info']) for o in out)
print(sum(L), L[-30:])
