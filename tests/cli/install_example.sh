#!/usr/bin/env bash
# install_example.sh — the library as an embedder meets it: `cmake --install` into a temporary prefix (and
# once more staged under DESTDIR) puts the shared library, include/cortiq.h and cortiq.pc in place; the
# shared library exports exactly the functions the header marks CQ_API; examples/imagine.c builds against
# the installed tree with `cc $(pkg-config --cflags --libs cortiq)` alone and draws with models/shapes.cmf
# a PNG of the asked size that equals, byte for byte, what `cortiq imagine` writes for the same prompt,
# seed, size and steps. Skipped (77) without the model, pkg-config, nm or a C compiler, and in a sanitizer
# build.
# Usage: bash install_example.sh <cortiq> <scratch-dir>
set -u
CQ=$1
W=$2
. "$(dirname "$0")/common.bash"
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BUILD=$(cd "$(dirname "$CQ")" && pwd)
MODEL=$ROOT/models/shapes.cmf
CC=${CC:-cc}
[ -f "$MODEL" ] || { echo "skipped: $MODEL is absent"; exit 77; }
for t in pkg-config nm "$CC" cmake; do
    command -v "$t" >/dev/null || { echo "skipped: no $t"; exit 77; }
done

P=$W/prefix
expect 0 cmake --install "$BUILD" --prefix "$P"
PC=$(find "$P" -name cortiq.pc | head -n 1)
[ -n "$PC" ] || fail "no cortiq.pc under $P"
LIB=$(find "$P" -name 'libcortiq.so' | head -n 1)
[ -n "$LIB" ] || fail "no libcortiq.so under $P"
[ -f "$P/include/cortiq.h" ] || fail "no cortiq.h in $P/include"
# a sanitizer build's library needs its runtime loaded first, which a plain example is not built to do
if [ -n "$LIB" ] && command -v readelf >/dev/null && readelf -d "$LIB" | grep -q 'lib[a-z]*san'; then
    echo "skipped: the library is a sanitizer build"
    exit 77
fi
# DESTDIR stages the same tree under another root
expect 0 env DESTDIR="$W/stage" cmake --install "$BUILD" --prefix /opt/cortiq
[ -f "$W/stage/opt/cortiq/include/cortiq.h" ] || fail "DESTDIR: no $W/stage/opt/cortiq/include/cortiq.h"
[ -n "$(find "$W/stage/opt/cortiq" -name cortiq.pc)" ] || fail "DESTDIR: no cortiq.pc under $W/stage/opt/cortiq"

# exported symbols == the header's CQ_API declarations
nm -D --defined-only "$LIB" | awk '{print $3}' | sort -u >"$W/exported"
grep -o '^CQ_API [^(]*(' "$P/include/cortiq.h" | sed -E 's/.*[ *]([a-z0-9_]+)\($/\1/' | sort -u >"$W/declared"
[ "$(wc -l <"$W/declared")" -gt 40 ] || fail "only $(wc -l <"$W/declared") CQ_API declarations found in cortiq.h"
diff "$W/declared" "$W/exported" >"$W/exports.diff" ||
    fail "libcortiq.so exports other names than cortiq.h declares (< header only, > library only): $(head -c 600 "$W/exports.diff")"

# the example, built against the installed tree through pkg-config alone
export PKG_CONFIG_PATH=$(dirname "$PC")
# shellcheck disable=SC2046
expect 0 "$CC" -std=c11 -Wall -Wextra -Werror "$ROOT/examples/imagine.c" $(pkg-config --cflags --libs cortiq) \
    -o "$W/imagine"
PROMPT="a red circle on a blue background"
expect 0 env LD_LIBRARY_PATH="$(dirname "$LIB")" "$W/imagine" "$MODEL" "$PROMPT" "$W/api.png" 96 6 11
has out "wrote $W/api.png (96x96, 3 channels)"
expect 0 "$CQ" imagine "$MODEL" "$PROMPT" --size 96x96 --steps 6 --seed 11 -q -o "$W/cli.png"
# the PNG's IHDR: width and height (big-endian u32 at bytes 16 and 20)
if [ -f "$W/api.png" ]; then
    [ "$(head -c 8 "$W/api.png" | od -An -c | tr -d ' ')" = '211PNG\r\n032\n' ] || fail "api.png is not a PNG"
    wh=$(od -An -t u1 -j 16 -N 8 "$W/api.png" | tr -s ' \n' ' ')
    [ "$wh" = " 0 0 0 96 0 0 0 96 " ] || fail "api.png IHDR width/height bytes are '$wh', expected 96x96"
    cmp -s "$W/api.png" "$W/cli.png" || fail "the example's PNG differs from cortiq imagine's for the same settings"
fi
# a bad pack fails with the library's message, not a crash
printf 'not a pack' >"$W/bad.cmf"
expect 1 env LD_LIBRARY_PATH="$(dirname "$LIB")" "$W/imagine" "$W/bad.cmf" "$PROMPT" "$W/bad.png" 96 6 11
has err "imagine: "
[ -e "$W/bad.png" ] && fail "a failed run left $W/bad.png"
finish install_example
