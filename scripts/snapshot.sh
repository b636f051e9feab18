#!/usr/bin/env bash
# What mt writes, for comparing two commits byte for byte after a change that should keep
# behaviour (a refactoring): trains the toy model (one thread, so the losses are exact), then
# writes `mt eval`, `mt translate` in its modes and `mt serve`'s answers into OUT.
#   scripts/snapshot.sh /tmp/before && git checkout NEW && scripts/snapshot.sh /tmp/after
#   diff -r /tmp/before /tmp/after      # only OUT/run differs (checkpoints hold timestamps)
# Runs in the current venv (scripts/setup.sh); about three minutes on two cores.
set -euo pipefail
out=$(realpath -m "${1:?usage: scripts/snapshot.sh OUT}")
cd "$(dirname "$0")/.."
rm -rf "$out" && mkdir -p "$out"
run=$out/run
mt train configs/toy.yaml --out "$run" --set train.threads=1 --set train.max_epochs=4 >/dev/null
# Losses and scores of every logged step; times and memory differ between any two runs.
python - "$run/metrics.jsonl" > "$out/losses.jsonl" <<'EOF'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(json.dumps({k: v for k, v in r.items() if "loss" in k or "bleu" in k or k == "step"}))
EOF
src=data/toy/toy.test.en
head -n 60 "$src" > "$out/in.txt"
printf '\n' >> "$out/in.txt"  # an empty line
awk 'NR % 3 == 0 {print "Gestern"} NR % 3 {print ""}' "$out/in.txt" > "$out/prefix.txt"
t() { name=$1; shift; mt translate "$@" -i "$out/in.txt" -o "$out/$name.txt" 2>/dev/null; }
t greedy "$run" --threads 1
t beam "$run" --beam 4 --threads 1
t nbest "$run" --beam 4 --nbest 3 --threads 1
t sampling "$run" --sampling topk --topk 5 --samples 3 --seed 7 --threads 1
t topp "$run" --sampling topp --topp 0.8 --threads 1
t prefix "$run" --beam 3 --prefix "$out/prefix.txt" --threads 1
t align "$run" --align --threads 1
t jsonl "$run" --beam 3 --nbest 2 --align --format jsonl --threads 1
t ensemble "$run" "$run/last.pt" --beam 3 --threads 1
t workers "$run" --workers 2 --beam 2 --format jsonl
t streams "$run" --beam 3 --nbest 2
t repeat "$run" --no-repeat-ngram 2 --min-len 3 --max-len-b 8 --threads 1
mt eval "$run" --split test --json --threads 1 2>/dev/null | python -c \
  'import json,sys; r=json.load(sys.stdin); print(json.dumps({k: v for k, v in r.items() if k != "src" and k != "ref"}))' \
  > "$out/eval.json"
# The server: the same lines as requests, each answer as it came.
mt serve "$run" --port 0 --threads 1 2> "$out/serve.log" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q "serving" "$out/serve.log" && break; sleep 0.2; done
url=$(grep -o 'http://[0-9.:]*' "$out/serve.log" | head -n 1)
python - "$url" "$out/in.txt" > "$out/serve.jsonl" <<'EOF'
import json, sys, urllib.request
url, lines = sys.argv[1], open(sys.argv[2]).read().splitlines()[:12]
bodies = [{"text": lines}, {"text": lines, "beam": 3, "nbest": 2, "align": True},
          {"text": lines[0], "attention": True}, {"text": lines[:4], "prefix": ["", "Heute", "", ""]},
          {"text": lines[:5], "sampling": "topk", "topk": 3, "samples": 2, "seed": 3}]
for body in bodies:
    request = urllib.request.Request(url + "/translate", json.dumps(body).encode())
    print(urllib.request.urlopen(request).read().decode())
info = json.load(urllib.request.urlopen(url + "/info"))
print(json.dumps(info["serve"], sort_keys=True))
EOF
kill -TERM $pid; wait $pid || true
sed -i "/serving\|stopp/!d; s/http:[^ ]*//g; s#$out#OUT#g" "$out/serve.log"
ls "$out"
