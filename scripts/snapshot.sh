#!/usr/bin/env bash
# What mt writes, for comparing two commits byte for byte after a change that should keep
# behaviour (a refactoring): trains the toy model (one thread, so the losses are exact), then
# writes `mt eval`, `mt translate` in its modes and `mt serve`'s answers into OUT.
#   scripts/snapshot.sh /tmp/before && git checkout NEW && scripts/snapshot.sh /tmp/after
#   diff -r -x run -x terms -x student -x report.docx /tmp/before /tmp/after  # timestamps
# Runs in the current venv (scripts/setup.sh); about eight minutes on two cores.
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
trap - EXIT
losses() {  # a run's losses and scores of every logged step
  python -c 'import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(json.dumps({k: v for k, v in r.items() if "loss" in k or "bleu" in k or k == "step"}))' "$1"
}

# Since the first snapshot: glossaries, jsonl input, paragraphs and documents, precision.
printf 'cats\tHunde\ngreen\tgrüne\nold\talte\n' > "$out/glossary.tsv"
t glossary "$run" --beam 4 --glossary "$out/glossary.tsv" --format jsonl --threads 1
t glossary_ordered "$run" --beam 4 --glossary "$out/glossary.tsv" --glossary-ordered \
  --glossary-ignore-case --threads 1
t int8 "$run" --dtype int8 --beam 3 --threads 1
t bf16 "$run" --dtype bf16 --threads 1
python -c 'import json, sys
for i, line in enumerate(open(sys.argv[1]).read().splitlines()[:20]):
    r = {"src": line}
    if i % 3 == 0:
        r["glossary"] = [["houses", "Autos"]]
    if i % 4 == 1:
        r["prefix"] = "Heute"
    print(json.dumps(r, ensure_ascii=False))' "$out/in.txt" > "$out/in.jsonl"
j() { name=$1; shift; mt translate "$@" --input-format jsonl -i "$out/in.jsonl" -o "$out/$name" 2>/dev/null; }
j jsonl_input.txt "$run" --beam 3 --glossary "$out/glossary.tsv" --threads 1
j jsonl_input.jsonl "$run" --beam 3 --format jsonl --threads 1
paste -d ' ' <(sed -n 1,20p "$out/in.txt") <(sed -n 21,40p "$out/in.txt") \
  | sed 's|$| See https://example.org or 42 at 9:30.|' > "$out/paragraphs.txt"
p() { name=$1; shift; mt translate "$@" -i "$out/paragraphs.txt" -o "$out/$name.txt" 2>"$out/$name.err" || echo "exit $?" >> "$out/$name.err"; }
p split "$run" --split-sentences --threads 1
p keep "$run" --keep 'example' --keep '[0-9]+:[0-9]+' --beam 2 --threads 1
p split_jsonl "$run" --split-sentences --format jsonl --threads 1
docs=$out/docs && mkdir -p "$docs"
cat > "$docs/page.html" <<'HTML'
<html><body><h1>Today we have five houses.</h1>
<p>Yesterday we had <b>sixty</b> old houses. Today they buy <a href="x">three cars</a>.</p>
<ul><li>Today you have eight cats.</li><li>Yesterday we saw one dog</li></ul></body></html>
HTML
cat > "$docs/notes.md" <<'MD'
# Today we have five houses.

Yesterday we had **sixty** old houses. Today they buy `three` cars.

- Today you have eight cats.
- Yesterday we saw [one dog](http://x).
MD
cat > "$docs/film.srt" <<'SRT'
1
00:00:01,000 --> 00:00:02,500
Today we have five houses.

2
00:00:03,000 --> 00:00:04,000
Yesterday we had sixty
old houses.
SRT
sed -n 1,3p "$out/paragraphs.txt" | awk '{print; print ""}' > "$docs/letter.txt"
python -c 'import sys, docx
d = docx.Document()
d.add_heading("Today we have five houses.", 1)
par = d.add_paragraph("Yesterday we had ")
par.add_run("sixty").bold = True
par.add_run(" old houses. Today they buy three cars.")
d.add_paragraph("Today you have eight cats.", style="List Bullet")
t = d.add_table(rows=1, cols=2)
t.cell(0, 0).text, t.cell(0, 1).text = "Yesterday we saw one dog.", "Today we buy two cars."
d.save(sys.argv[1])' "$docs/report.docx"
for f in page.html notes.md film.srt letter.txt; do
  mt translate "$run" --doc-format auto -i "$docs/$f" -o "$out/doc_$f" --threads 1 2>>"$out/docs.err"
done
mt translate "$run" --doc-format docx -i "$docs/report.docx" -o "$out/report.docx" --beam 2 \
  --threads 1 2>>"$out/docs.err"
unzip -p "$out/report.docx" word/document.xml > "$out/doc_report.xml" && rm "$out/report.docx"
mt translate "$run" --format html -i "$docs/page.html" -o "$out/format_html.html" --threads 1 \
  2>>"$out/docs.err"
# Confidence, with a calibration fitted on the validation set.
mt calibrate "$run" --src data/toy/toy.val.en --ref data/toy/toy.val.de --threshold 99 --json \
  --threads 1 2>/dev/null | python -c 'import json, sys; r = json.load(sys.stdin); r.pop("path"); print(json.dumps(r))' \
  > "$out/calibrate.json"
t confidence "$run" --confidence --format jsonl --beam 3 --nbest 2 --threads 1
t mc_dropout "$run" --confidence --mc-dropout 2 --format jsonl --threads 1
mt translate "$run" --min-confidence 0.6 -i "$out/in.txt" -o "$out/min_confidence.txt" \
  --threads 1 2> "$out/min_confidence.err"
mt eval "$run" "$run/last.pt" --compare --split test --json --threads 1 --bootstrap 50 \
  2>/dev/null > "$out/compare.json"
# A model trained with data.terminology: annotated glossaries.
terms=$out/terms
mt train configs/toy.yaml --out "$terms" --set train.threads=1 --set train.max_epochs=2 \
  --set data.terminology.glossary="$out/glossary.tsv" --set data.terminology.prob=0.5 >/dev/null
losses "$terms/metrics.jsonl" > "$out/terms_losses.jsonl"
for mode in annotate both constrain; do
  t "terms_$mode" "$terms" --beam 3 --glossary "$out/glossary.tsv" --glossary-mode $mode \
    --format jsonl --threads 1
done
# The server again: an ensemble, paragraphs, documents and its documents endpoint.
mt serve "$run" "$run/last.pt" --port 0 --threads 1 --beam 2 2> "$out/serve2.log" &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q "serving" "$out/serve2.log" && break; sleep 0.2; done
url=$(grep -o 'http://[0-9.:]*' "$out/serve2.log" | head -n 1)
python - "$url" "$out/in.txt" "$docs" > "$out/serve2.jsonl" <<'EOF'
import io, json, sys, urllib.error, urllib.request, zipfile
url, lines, docs = sys.argv[1], open(sys.argv[2]).read().splitlines()[:8], sys.argv[3]


def post(path, data):
    try:
        r = urllib.request.urlopen(urllib.request.Request(url + path, data))
        return r.status, {k: v for k, v in sorted(r.headers.items()) if k.startswith("MT-")}, r.read()
    except urllib.error.HTTPError as e:
        return e.code, {}, e.read()


for body in [{"text": lines}, {"text": [" ".join(lines[:3])], "split": True},
             {"text": [open(docs + "/page.html").read()], "format": "html"},
             {"text": [open(docs + "/film.srt").read()], "format": "srt"},
             {"text": lines[:3], "format": "md", "align": True},
             {"text": lines[:4], "glossary": [["cats", "Hunde"]], "beam": 3},
             {"text": lines[:4], "format": "text", "split": False, "nbest": 2},
             {"text": lines[:4], "confidence": True}]:
    status, _, answer = post("/translate", json.dumps(body).encode())
    print(status, answer.decode())
for name, fmt in (("page.html", "html"), ("notes.md", "md"), ("film.srt", "srt"),
                  ("letter.txt", "txt"), ("report.docx", "docx")):
    status, headers, answer = post(f"/translate/document?format={fmt}&beam=2",
                                   open(f"{docs}/{name}", "rb").read())
    if fmt == "docx" and status == 200:
        answer = zipfile.ZipFile(io.BytesIO(answer)).read("word/document.xml")
    print(status, json.dumps(headers), answer.decode())
status, _, answer = post("/translate/document?format=html&nbest=2&beam=2", b"<p>x</p>")
print(status, answer.decode())
print(json.dumps(json.load(urllib.request.urlopen(url + "/info"))["serve"], sort_keys=True))
EOF
kill -TERM $pid; wait $pid || true
trap - EXIT
sed -i "/serving\|stopp/!d; s/http:[^ ]*//g; s#$out#OUT#g" "$out/serve2.log"
# Distillation: the toy run teaches a student for one epoch.
mt distill configs/toy.yaml "$run" --out "$out/student" --beam 2 --threads 1 \
  --set train.threads=1 --set train.max_epochs=1 > /dev/null 2>&1
find "$out/student/distilled" -type f ! -name '*.json' | sort | xargs cat > "$out/distilled.txt"
losses "$out/student/metrics.jsonl" > "$out/student_losses.jsonl"
sed -i "s#$out#OUT#g" "$out"/*.err "$out/compare.json"
ls "$out"
