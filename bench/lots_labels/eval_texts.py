import json, sys
sys.path.insert(0,'bench')
from lots_split import records
split=json.load(open('tests/fixtures/lots_split.json'))
recmap={}
for src,r in records():
    recmap[f"{src}#{r.get('recall_number')}"]=r
out=[]
for i,e in enumerate(split['evaluation']):
    r=recmap[e['ids'][0]]
    out.append({"i":i,"id":e['ids'][0],"class":e['class'],"code_info":r.get('code_info') or '',"more_code_info":r.get('more_code_info') or ''})
json.dump(out,open('/tmp/eval_texts.json','w'))
L=sorted(len(o['code_info'])+len(o['more_code_info']) for o in out)
print(sum(L), L[-30:])
