#!/usr/bin/env bash
# run.sh — run the libFuzzer targets of a fuzz build one after another (one
# process at a time) and print a line of numbers per target.
#
#   tests/fuzz/run.sh BUILD_DIR SECONDS [RUNS]
#
# Each target first replays every file in tests/fuzz/regress once, at full
# length (a target also gets the other targets' files: each must take any
# bytes), then fuzzes for SECONDS, or until RUNS executions when RUNS is
# given, on BUILD_DIR/work/<target> (the corpus it grows, kept between runs)
# plus tests/fuzz/corpus/<name> and the regression files as seeds.
# tests/fuzz/<target>.options holds the target's own libFuzzer flags (its
# -max_len). A crashing input is written to BUILD_DIR/artifacts/; any crash
# fails the run, after the remaining targets have run. FUZZ_TARGETS="a b"
# runs only those targets (names without the fuzz_ prefix).
set -u
build=${1:?usage: run.sh BUILD_DIR SECONDS [RUNS]}
secs=${2:?usage: run.sh BUILD_DIR SECONDS [RUNS]}
runs=${3:-}
src=$(cd "$(dirname "$0")" && pwd)
# An undefined-behaviour report is a finding: stop on it (the default prints and goes on).
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
art=$build/artifacts
mkdir -p "$art" "$build/work"
summary=$build/fuzz-summary.txt
regress=()
for r in "$src"/regress/*; do [ -s "$r" ] && regress+=("$r"); done

printf '%-22s %10s %8s %6s %7s %7s %10s %6s  %s\n' target execs exec/s cov ft corpus corpus_kb secs result |
    tee "$summary"
failed=0
for f in "$build"/fuzz_*; do
    [ -x "$f" ] && [ -f "$f" ] || continue
    name=$(basename "$f")
    short=${name#fuzz_}
    if [ -n "${FUZZ_TARGETS:-}" ] && ! [[ " $FUZZ_TARGETS " == *" $short "* ]]; then continue; fi
    corpus=$src/corpus/$short work=$build/work/$name log=$build/work/$name.log
    mkdir -p "$work" "$corpus"
    opts=()
    [ -f "$src/$name.options" ] && read -r -a opts < <(grep -v '^#' "$src/$name.options" | tr '\n' ' ')
    if [ ${#regress[@]} -gt 0 ] && ! "$f" "${regress[@]}" > "$build/work/$name.regress.log" 2>&1; then
        tail -n 40 "$build/work/$name.regress.log"
        printf '%-22s %s\n' "$name" "FAILED on a regression input (log: $build/work/$name.regress.log)" | tee -a "$summary"
        failed=1
        continue
    fi
    start=$(date +%s)
    "$f" "${opts[@]}" -max_total_time="$secs" ${runs:+-runs="$runs"} -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$art/$name-" "$work" "$corpus" "$src/regress" > "$log" 2>&1
    rc=$?
    took=$(( $(date +%s) - start ))
    stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -n 1; }
    last=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -n 1)
    field() { sed -n "s/.* $1: \([0-9]*\).*/\1/p" <<< "$last"; }
    corp=$(sed -n 's/.* corp: \([0-9]*\)\/\([0-9]*\)\([a-zA-Z]*\).*/\1 \2 \3/p' <<< "$last")
    read -r centries csize cunit <<< "${corp:-0 0 b}"
    case $cunit in Mb) csize=$((csize * 1024)) ;; b) csize=$(( (csize + 1023) / 1024 )) ;; esac
    result=ok
    if [ $rc -ne 0 ]; then
        result="CRASH rc=$rc: $(grep -ho "written to [^ ]*" "$log" | tail -n 1)"
        tail -n 60 "$log"
        failed=1
    fi
    printf '%-22s %10s %8s %6s %7s %7s %10s %6s  %s\n' "$name" "$(stat number_of_executed_units)" \
        "$(stat average_exec_per_sec)" "$(field cov)" "$(field ft)" "$centries" "$csize" "$took" "$result" |
        tee -a "$summary"
done
echo "(summary in $summary; logs in $build/work/; crashing inputs in $art/)"
exit $failed
