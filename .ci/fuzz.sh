#!/usr/bin/env bash
# Builds the fuzz targets of fuzz/ (README "Reliability") and runs each for a bounded time:
#   .ci/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]      (default 25 s, every target)
# cargo-fuzz needs nightly compiler flags (-Zsanitizer=address, SanitizerCoverage); the stable
# toolchain accepts them with RUSTC_BOOTSTRAP=1. Seeds come from the committed fuzz/seeds/
# and, for the CTF parser, from the conformance data (../shared/conformance/cntk) and
# examples/. A crash leaves its input in fuzz/artifacts/TARGET/ and fails the script: turn it
# into a regression test (tests/hostile.rs or the target's own test) before fixing it.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-25}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(ctf_parse brainscript index_cache checkpoint c_api)
export RUSTC_BOOTSTRAP=1
# cargo fuzz defaults to the host triple and `-Zsanitizer=address`; its own target directory.
export CARGO_TARGET_DIR="${FUZZ_TARGET_DIR:-$PWD/target/fuzz}"
# The c_api and index_cache targets write their data files under the temporary directory and
# libFuzzer exits without running destructors: give them one that goes when the script ends.
TMPDIR=$(mktemp -d "${TMPDIR:-/tmp}/ctf-fuzz.XXXXXX")
export TMPDIR
trap 'rm -rf "$TMPDIR"' EXIT

corpus_for() {
    local target=$1 dir=fuzz/corpus/$1
    mkdir -p "$dir"
    if [ -d "fuzz/seeds/$target" ]; then cp -n fuzz/seeds/"$target"/* "$dir"/ 2>/dev/null || true; fi
    case $target in
        ctf_parse)
            # Byte 0 picks the options and the split point: 0x00 (whole, ids) and 0x7e.
            for f in ../shared/conformance/cntk/{data,control,v2data,e2e}/*.txt examples/*.ctf; do
                [ -f "$f" ] || continue
                [ "$(stat -c %s "$f")" -le 65536 ] || continue
                local base; base=$(basename "$f")
                { printf '\x00'; cat "$f"; } > "$dir/seed-0-$base"
                { printf '\x7e'; cat "$f"; } > "$dir/seed-7e-$base"
            done
            ;;
        brainscript)
            for f in examples/*.cntk; do cp "$f" "$dir/seed-$(basename "$f")"; done
            ;;
    esac
    echo "$dir"
}

start=$(date +%s)
cargo fuzz build --release
for target in "${targets[@]}"; do
    corpus=$(corpus_for "$target")
    echo "--- fuzz $target for ${seconds}s (corpus: $(ls "$corpus" | wc -l) files)"
    # -rss_limit_mb: a run above 2 GiB is a failure; -timeout: one input above 10 s is a hang.
    cargo fuzz run --release "$target" "$corpus" -- \
        -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        2>&1 | grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+ +DONE|==[0-9]+==ERROR|SUMMARY|thread .* panicked|Running|INFO: seed corpus)' || true
    if ls fuzz/artifacts/"$target"/crash-* fuzz/artifacts/"$target"/leak-* fuzz/artifacts/"$target"/timeout-* fuzz/artifacts/"$target"/oom-* >/dev/null 2>&1; then
        echo "error: fuzz target $target found a failing input:" >&2
        ls fuzz/artifacts/"$target"/ >&2
        exit 1
    fi
done
echo "fuzzing took $(( $(date +%s) - start )) s"
