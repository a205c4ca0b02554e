# MiniLM results of docs/MODELS.md: cmv of commit 22452b0 copied to /tmp/models-run/cmv; model and tokenizer in /tmp/minilm/m.
set -e
cd /tmp/models-run
C=./cmv
M=/tmp/minilm/m/model.safetensors; T=/tmp/minilm/m/tokenizer.json
rm -f res.txt
for fv in "ans rows -" "ans stripes -" "ans auto -" "beam naive -" "beam tight -" "beam slabs -" "beam nogaps -" "spqr csr -" "spqr ptcsr -" "sbvr n4 -" "sbvr n3 -" "sbvr n2 -" "vq gptvq2 -" "vq gptvq2-256 -" "vq cq4 -" "vq cq2 -" "spqr csr cal" "spqr ptcsr cal" "vq gptvq2 cal" "vq gptvq2-256 cal" "vq cq4 cal" "vq cq2 cal" "vq aqlm3 cal"; do
  set -- $fv
  extra=""; [ "$3" = cal ] && extra="--calibrate $T"
  o=h.$1.$2.$3.safetensors
  start=$(date +%s.%N)
  $C compress $M -f $1 --variant $2 $extra -q --force -o $o > h.$1.$2.$3.compress.log 2>&1
  end=$(date +%s.%N)
  $C eval $M $o --tokenizer $T --json > h.$1.$2.$3.eval.json
  $C inspect $o --json > h.$1.$2.$3.insp.json
  python3 - "$1" "$2" "$3" "$start" "$end" "$(cat /proc/loadavg | cut -d' ' -f1)" >> res.txt <<'PY'
import json,sys
f,v,c,s,e,load=sys.argv[1:]
i=json.load(open(f'h.{f}.{v}.{c}.insp.json')); ev=json.load(open(f'h.{f}.{v}.{c}.eval.json'))
ts=[t for t in i['tensors'] if t['format']]
el=sum(t['shape'][0]*t['shape'][1] for t in ts)
kb=sum(t['kernel_bits_per_weight']*t['shape'][0]*t['shape'][1] for t in ts)/el
cal='GPTQ' if (f=='spqr' and c=='cal') else ('importance' if c=='cal' else '-')
print(f"| {f} | {v} | {cal} | {i['totals']['compressed_bits_per_weight']:.3f} | {kb:.3f} | {ev['mean_relative_error']:.4f} | {ev['embeddings']['mean_cosine']:.6f} | {ev['embeddings']['min_cosine']:.6f} | {float(e)-float(s):.1f} s | {len(ts)} | load {load}")
PY
  tail -1 res.txt
done
$C eval $M h.spqr.csr.-.safetensors --tokenizer $T --rtn 2:64 --rtn 2:128 --rtn 3:128 --rtn 3:64 --rtn 4:128 --rtn 4:64 --rtn 4:16 --rtn 5:16 --rtn 6:16 --rtn 8:128 --json > rtn.json
python3 - >> res.txt <<'PY'
import json
d=json.load(open('rtn.json'))
for b in d['baselines']:
    print(f"| {b['name']} | {b['bits_per_weight']:.3f} | {b['mean_relative_error']:.4f} | {b['embeddings']['mean_cosine']:.6f} | {b['embeddings']['min_cosine']:.6f} |")
PY
echo DONE >> res.txt
