#!/usr/bin/env bash
# outputs.sh — `cortiq imagine` never harms what -o points at, and every check runs before the
# work: a FIFO, a character device (made with mknod inside the scratch directory, never under
# /dev), a directory, a dangling link and a link to a descriptor are refused and left as they
# were; a link to a file replaces that file and stays a link; a missing or read-only directory is
# refused within a second; -o - streams the PNG; the extension, the seed's range, the prompt's
# characters and length, and the size are checked before the model loads; --prompt-file, stdin
# and prompts that start with '-' (after --); a language-model pack says what it holds.
# Safe to run as root: nothing outside the scratch directory is touched.
# Usage: bash outputs.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
. "$(dirname "$0")/common.bash"
HERE=$(cd "$(dirname "$0")" && pwd)
M=$HERE/../../models/shapes.cmf
[ -f "$M" ] || { echo "models/shapes.cmf is missing; skipped"; exit 77; }
D=(--size 64x64 --steps 2 -q)
P="a red circle on a blue background"

quick() { # the last command took under a second (checks before any work)
    local t0 t1
    t0=$(date +%s%N)
    expect "$@"
    t1=$(date +%s%N)
    [ $(((t1 - t0) / 1000000)) -lt 1000 ] || fail "'$*' took $(((t1 - t0) / 1000000)) ms: not checked before the work"
}
no_temps() { ls -A "$1" | grep -q 'cortiq-' && fail "a temporary was left in $1: $(ls -A "$1")"; }

# ---- a reference picture, then the same picture through each accepted kind of target ----
expect 0 "$CQ" imagine "$M" "$P" "${D[@]}" -o "$W/ref.png"
[ -s "$W/ref.png" ] || fail "no ref.png"
ref=$(cksum <"$W/ref.png")

# -o - streams the PNG to standard output (and refuses a terminal, which a test cannot have)
"$CQ" imagine "$M" "$P" "${D[@]}" -o - >"$W/stdout.png" 2>"$W/err" || fail "-o - failed: $(cat "$W/err")"
[ "$(cksum <"$W/stdout.png")" = "$ref" ] || fail "-o - wrote other bytes than -o FILE"

# a link to a regular file: the file gets the picture, the link stays, the permissions stay
printf 'old' >"$W/real.png"
chmod 640 "$W/real.png"
ln -s real.png "$W/link.png"
expect 0 "$CQ" imagine "$M" "$P" "${D[@]}" -o "$W/link.png"
[ -L "$W/link.png" ] || fail "the link was replaced by a file"
[ "$(cksum <"$W/real.png")" = "$ref" ] || fail "the link's file did not get the picture"
[ "$(stat -c %a "$W/real.png")" = 640 ] || fail "the replaced file lost its permissions ($(stat -c %a "$W/real.png"))"

# ---- refused, untouched, before any work ----
mkfifo "$W/fifo.png"
quick 1 timeout 10 "$CQ" imagine "$M" "$P" "${D[@]}" -o "$W/fifo.png"
has err "is a FIFO (named pipe), not a file cortiq will replace"
[ -p "$W/fifo.png" ] || fail "the FIFO was replaced"
if mknod "$W/null.png" c 1 3 2>/dev/null; then # a character device (needs root or CAP_MKNOD)
    quick 1 "$CQ" imagine "$M" "$P" "${D[@]}" -o "$W/null.png"
    has err "is a character device"
    [ -c "$W/null.png" ] || fail "the character device was replaced"
fi
mkdir "$W/dir.png"
quick 1 "$CQ" imagine "$M" "$P" "${D[@]}" -o "$W/dir.png"
has err "is a directory"
ln -s nowhere.png "$W/dangling.png"
quick 1 "$CQ" imagine "$M" "$P" "${D[@]}" -o "$W/dangling.png"
has err "which does not exist"
[ -e "$W/nowhere.png" ] && fail "a file was created through a dangling link"
ln -s /proc/self/fd/1 "$W/fd1.png"
quick 1 "$CQ" imagine "$M" "$P" "${D[@]}" -o "$W/fd1.png"
has err "an open file descriptor"
[ -L "$W/fd1.png" ] || fail "the link to a descriptor was replaced"
quick 1 "$CQ" imagine "$M" "$P" "${D[@]}" -o "$W/missing/x.png"
has err "cannot write '$W/missing/x.png': the directory '$W/missing' does not exist"
grep -q "cortiq-\|tmp-" "$W/err" && fail "the message names a temporary: $(cat "$W/err")"
# a read-only directory: as root permissions do not apply, so run that check as nobody
mkdir "$W/ro"
chmod 555 "$W/ro"
as_user=()
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
    as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
    chmod o+rx "$W"
    # nobody must reach the binary and the model (a checkout under a private home would not let it)
    "${as_user[@]}" "$CQ" info "$M" >/dev/null 2>&1 || { echo "nobody cannot run $CQ; read-only check skipped"; as_user=(); }
fi
if [ "$(id -u)" != 0 ] || [ ${#as_user[@]} -gt 0 ]; then
    [ ${#as_user[@]} -gt 0 ] || as_user=(env)
    quick 1 "${as_user[@]}" "$CQ" imagine "$M" "$P" "${D[@]}" -o "$W/ro/x.png"
    has err "cannot create a file in '$W/ro': permission denied"
fi
[ -z "$(ls -A "$W/ro")" ] || fail "something was written into the read-only directory"

# ---- the arguments, checked before the model loads ----
quick 2 "$CQ" imagine "$M" "$P" "${D[@]}" -o "$W/x.jpg"
has err "writes PNG files only"
quick 2 "$CQ" imagine "$M" "$P" "${D[@]}" -o "$W/x"
quick 2 "$CQ" imagine "$M" "$P" "${D[@]}" --seed 18446744073709551616 -o "$W/x.png"
has err "--seed wants an integer in \[0, 2^64-1"
quick 2 "$CQ" imagine "$M" "$(printf 'a red\001 circle')" "${D[@]}" -o "$W/x.png"
has err "control character (0x01 at byte 6)"
quick 2 "$CQ" imagine "$M" "$(printf 'a red \377circle')" "${D[@]}" -o "$W/x.png"
has err "not valid UTF-8"
quick 2 "$CQ" imagine "$M" "$P" --size 16384x16384 --steps 20 -o "$W/x.png"
has err "beyond what this model's scheduler can represent"
has err "the largest square size it schedules at 20 steps is"
long=$(printf 'a red circle %.0s' $(seq 1 400))
quick 2 "$CQ" imagine "$M" "$long" "${D[@]}" -o "$W/x.png"
has err "the prompt is too long: with the pipeline's template it is"
has err "reads at most 1024"
quick 2 "$CQ" imagine "$M" "$P" "${D[@]}" --steps 1 -o "$W/x.png"
[ -e "$W/x.png" ] && fail "a refused run wrote x.png"

# ---- prompts: after --, from a file, from stdin ----
expect 0 "$CQ" imagine "$M" "${D[@]}" -o "$W/dash.png" -- "-a red circle"
[ -s "$W/dash.png" ] || fail "a prompt after -- drew nothing"
expect 2 "$CQ" imagine "$M" "-a red circle" "${D[@]}" -o "$W/dash.png"
has err "goes after --"
printf '%s\n' "$P" >"$W/prompt.txt"
expect 0 "$CQ" imagine "$M" --prompt-file "$W/prompt.txt" "${D[@]}" -o "$W/file.png"
[ "$(cksum <"$W/file.png")" = "$ref" ] || fail "--prompt-file drew another picture than the same prompt inline"
EXPECT_STDIN=$W/prompt.txt expect 0 "$CQ" imagine "$M" --prompt-file - "${D[@]}" -o "$W/stdin.png"
[ "$(cksum <"$W/stdin.png")" = "$ref" ] || fail "--prompt-file - drew another picture"
expect 1 "$CQ" imagine "$M" --prompt-file "$W/none.txt" "${D[@]}" -o "$W/x.png"
has err "cannot read the prompt from '$W/none.txt'"
expect 2 "$CQ" imagine "$M" "$P" --prompt-file "$W/prompt.txt" "${D[@]}" -o "$W/x.png"

# ---- the wrong kind of pack, and no doubled paths ----
expect 0 "$CQ" convert "$HERE/../golden/qwen3/qwen3_a" -o "$W/llm.cmf" --quiet
quick 1 "$CQ" imagine "$W/llm.cmf" "$P" "${D[@]}" -o "$W/x.png"
has err "holds a language model (arch qwen3), which \`cortiq run\` chats with, not a text-to-image pipeline"
expect 1 "$CQ" run "$M" --prompt "hi"
has err "holds a text-to-image pipeline (arch qwen_image21), which \`cortiq imagine\` draws with, not a language model"
printf 'not a pack' >"$W/junk.cmf"
expect 1 "$CQ" imagine "$W/junk.cmf" "$P" "${D[@]}" -o "$W/x.png"
[ "$(grep -o "junk.cmf" "$W/err" | wc -l)" = 1 ] || fail "the path is named more than once: $(cat "$W/err")"

no_temps "$W"
finish "imagine outputs and checks"
