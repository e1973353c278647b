#!/usr/bin/env bash
# bench_tokenizer.sh — `cortiq bench tokenizer`: help, usage errors, a bad
# source, and a short real run on the Qwen3 fixture whose output must carry a
# positive rate for every built-in sample.
# Usage: bash bench_tokenizer.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
SRC_DIR=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "$0")/common.bash"

expect 0 "$CQ" bench --help
has out "tokenizer"
expect 0 "$CQ" bench tokenizer --help
has out "MB/s"
expect 2 "$CQ" bench tokenizer
expect 2 "$CQ" bench tokenizer x.json --seconds 0
expect 1 "$CQ" bench tokenizer "$W/missing.json"
echo '{"model": {"type": "Unigram"}}' >"$W/unigram.json"
expect 1 "$CQ" bench tokenizer "$W/unigram.json"
has err "CQ_ERR_UNSUPPORTED"
TOK=$SRC_DIR/tests/fixtures/tokenizers/qwen3.json.gz
"$CQ" bench tokenizer "$TOK" --seconds 0.05 >"$W/out" 2>"$W/err"
if grep -q "this build has no zlib" "$W/err"; then
    # a build without zlib says so; the measurements then run on a gunzipped copy
    gzip -dc "$TOK" >"$W/qwen3.json" || fail "gzip -dc $TOK failed"
    TOK=$W/qwen3.json
fi
expect 0 "$CQ" bench tokenizer "$TOK" --seconds 0.05
for s in english cjk code; do
    awk -v s="$s" '$1 == s && $2 + 0 > 0 && $4 + 0 > 0 { ok = 1 } END { exit !ok }' "$W/out" ||
        fail "no positive rate for $s: $(cat "$W/out")"
done
printf 'hello world\n' >"$W/text.txt"
expect 0 "$CQ" bench tokenizer "$TOK" "$W/text.txt" --seconds 0.05
has out "^file "

finish "bench tokenizer"
