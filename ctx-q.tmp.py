import json,sys
r=json.load(open(sys.argv[1]))
mode=sys.argv[2] if len(sys.argv)>2 else None
qs={}
for l in open('/work/shared/data/ir/financebench_dev/queries.jsonl'):
    o=json.loads(l); qs[o['_id']]=o
ev={}
for l in open('/work/shared/data/ir/financebench_dev/qrels/test.tsv').readlines()[1:]:
    q,d,s=l.strip().split('\t'); ev.setdefault(q,[]).append(d.replace('.pdf',''))
for res in r['results']:
  if mode and res['mode']!=mode: continue
  for q in res['perQuery']:
    print(q['pageRank'], q['documentRank'], q['type'][:5], ev[q['id']], '|', qs[q['id']]['text'][:100])
    print('     ', [t.replace('.pdf','') for t in q['top'][:6]])
