#!/usr/bin/env bash
# run.sh — `cortiq run` as a user meets it, on the tiny golden Qwen3 model
# (tests/golden/qwen3/qwen3_a, converted here): the greedy chat reply's
# token ids equal transformers' greedy tokens (read from golden.safetensors)
# up to the stop token, in one-shot mode, with the prompt on stdin, and as
# the first turn of --chat (whose second turn reuses the cache); --raw
# continues plain text like the reference's greedy_a; a seed repeats its
# sample and another seed changes it; usage errors exit 2, bad files 1.
# Usage: bash run.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
. "$(dirname "$0")/common.bash"
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$HERE/../golden/qwen3/qwen3_a
G=$SRC/golden.safetensors

: >"$W/in"
EXPECT_STDIN=$W/in

# golden I32 tensor NAME as "id id id ..." (safetensors: u64 header length, JSON header, data)
golden() {
    local hlen hdr off a b
    hlen=$(od -An -t u8 -N8 "$G" | tr -d ' ')
    hdr=$(head -c $((8 + hlen)) "$G" | tail -c "$hlen")
    off=$(printf '%s' "$hdr" | grep -o "\"$1\":{[^}]*}" | sed 's/.*"data_offsets":\[\([0-9]*\),\([0-9]*\)\].*/\1 \2/')
    read -r a b <<<"$off"
    od -An -t d4 -j $((8 + hlen + a)) -N $((b - a)) "$G" | tr -s ' \n' ' ' | sed 's/^ //; s/ $//'
}
# the reply ids a run must print: the golden tokens up to the first stop id 2, then "[stop 2]"
until_stop() {
    local out="" id
    for id in $1; do
        if [ "$id" = 2 ]; then echo "ids:$out [stop 2]"; return; fi
        out="$out $id"
    done
    echo "ids:$out"
}
WANT_CHAT=$(until_stop "$(golden chat_greedy)")
WANT_RAW=$(until_stop "$(golden greedy_a)")
case "$WANT_CHAT" in *"[stop 2]") ;; *) fail "golden chat_greedy has no stop token: $WANT_CHAT" ;; esac

M=$W/qwen3_a.cmf
expect 0 "$CQ" convert "$SRC" -o "$M" --quant f32 -q

# ---- usage ----
expect 0 "$CQ" run --help
has out "temperature -> top-k -> top-p -> min-p"
expect 2 "$CQ" run
expect 2 "$CQ" run "$M"
expect 2 "$CQ" run "$M" --prompt hi --bogus
expect 2 "$CQ" run "$M" --prompt hi --top-p 0
expect 2 "$CQ" run "$M" --prompt hi --max-tokens 0
expect 2 "$CQ" run "$M" --raw --chat
expect 2 "$CQ" run "$M" --prompt hi --backend
has err "--backend needs a name"
expect 2 "$CQ" run "$M" --prompt hi --backend nosuch
has err "nosuch"
expect 1 "$CQ" run "$W/missing.cmf" --prompt hi
printf 'not a cmf' >"$W/bad.cmf"
expect 1 "$CQ" run "$W/bad.cmf" --prompt hi

CHAT=(--system "You are a helpful assistant." --greedy --no-think --max-tokens 32 --print-ids)

# ---- one shot: the golden conversation (on the backend chosen by name too) ----
expect 0 "$CQ" run "$M" --prompt "Hello! How are you today?" "${CHAT[@]}" --backend ref
got=$(grep '^ids:' "$W/err")
[ "$got" = "$WANT_CHAT" ] || fail "greedy chat reply on the ref backend: got '$got', want '$WANT_CHAT'"
# and on a GPU where there is one (test_qwen3_cuda bounds its logits; this tiny model's greedy choices all have
# clear margins there)
"$CQ" gpu >"$W/gpu" 2>&1
if grep -q "cuda:0 " "$W/gpu"; then
    expect 0 "$CQ" run "$M" --prompt "Hello! How are you today?" "${CHAT[@]}" --backend cuda
    got=$(grep '^ids:' "$W/err")
    [ "$got" = "$WANT_CHAT" ] || fail "greedy chat reply on the GPU: got '$got', want '$WANT_CHAT'"
fi
expect 0 "$CQ" run "$M" --prompt "Hello! How are you today?" "${CHAT[@]}"
got=$(grep '^ids:' "$W/err")
[ "$got" = "$WANT_CHAT" ] || fail "greedy chat reply: got '$got', want '$WANT_CHAT'"
has err "tokens/s"
has err "prompt: 54 tokens (0 reused)"
[ -s "$W/out" ] || fail "no text on stdout"
cp "$W/out" "$W/oneshot.txt"

# the same with the prompt from stdin
printf 'Hello! How are you today?' >"$W/in"
expect 0 "$CQ" run "$M" --prompt - "${CHAT[@]}" --quiet --threads 1
got=$(grep '^ids:' "$W/err")
[ "$got" = "$WANT_CHAT" ] || fail "prompt from stdin: got '$got', want '$WANT_CHAT'"
cmp -s "$W/out" "$W/oneshot.txt" || fail "prompt from stdin: other text than the one-shot run"
grep -q "tokens/s" "$W/err" && fail "--quiet still printed rates"

# ---- --chat: two turns on stdin, the cache kept ----
printf 'Hello! How are you today?\n\nTell me about the red circle.\n' >"$W/in"
expect 0 "$CQ" run "$M" --chat "${CHAT[@]}"
got=$(grep '^ids:' "$W/err" | head -n 1)
[ "$got" = "$WANT_CHAT" ] || fail "first chat turn: got '$got', want '$WANT_CHAT'"
[ "$(grep -c '^ids:' "$W/err")" -eq 2 ] || fail "--chat did not answer two turns: $(cat "$W/err")"
grep '^\[prompt:' "$W/err" | sed -n 2p | grep -q '(48 reused)' ||
    fail "second turn did not reuse the cached prefix: $(grep '^\[prompt:' "$W/err")"
head -c "$(wc -c <"$W/oneshot.txt")" "$W/out" | cmp -s - "$W/oneshot.txt" || fail "--chat first reply text differs"
printf 'Hello! How are you today?\n/exit\nnever read\n' >"$W/in"
expect 0 "$CQ" run "$M" --chat "${CHAT[@]}"
[ "$(grep -c '^ids:' "$W/err")" -eq 1 ] || fail "/exit did not end the chat"
: >"$W/in"

# ---- --raw: plain continuation, as the reference's greedy_a ----
expect 0 "$CQ" run "$M" --raw --prompt "Hello! How are you today?" --greedy --max-tokens 32 --print-ids
got=$(grep '^ids:' "$W/err")
[ "$got" = "$WANT_RAW" ] || fail "--raw greedy: got '$got', want '$WANT_RAW'"

# ---- seeded sampling ----
SAMPLE=(--prompt "Hello! How are you today?" --temperature 1 --top-k 0 --top-p 1 --max-tokens 24 --print-ids)
expect 0 "$CQ" run "$M" "${SAMPLE[@]}" --seed 7
s1=$(grep '^ids:' "$W/err")
expect 0 "$CQ" run "$M" "${SAMPLE[@]}" --seed 7 --threads 1
s2=$(grep '^ids:' "$W/err")
expect 0 "$CQ" run "$M" "${SAMPLE[@]}" --seed 8
s3=$(grep '^ids:' "$W/err")
[ -n "$s1" ] && [ "$s1" = "$s2" ] || fail "seed 7 twice: '$s1' vs '$s2'"
[ "$s1" != "$s3" ] || fail "seeds 7 and 8 gave the same sample: $s1"

finish "run.sh"
