#!/usr/bin/env bash
# Sanitizer runs (README "Reliability"): AddressSanitizer on the C ABI (the soak test's
# 1,000 C ABI readers and the fault-injection tests, then the C test program and the stats
# example linked against an ASan build of libctf_reader.a), and ThreadSanitizer on the
# threaded engine's tests (tests/pipeline.rs, tests/engine_props.rs). -Zsanitizer needs
# nightly flags: the stable toolchain accepts them with RUSTC_BOOTSTRAP=1. TSan also needs
# std rebuilt with it (-Zbuild-std, rust-src).
#   .ci/sanitizers.sh [asan|tsan]...        (default: both, as .ci/run runs them)
set -euo pipefail
cd "$(dirname "$0")/.."
export RUSTC_BOOTSTRAP=1
triple=x86_64-unknown-linux-gnu
# Sanitizer builds skip the release profile's fat LTO (slow, and not what is being checked).
fast=(--config profile.release.lto=false --config profile.release.codegen-units=16)
runs=("$@")
[ ${#runs[@]} -gt 0 ] || runs=(asan tsan)

for run in "${runs[@]}"; do
case $run in
asan)
    export CARGO_TARGET_DIR="${ASAN_TARGET_DIR:-$PWD/target/asan}"
    echo "--- ASan: tests/soak.rs (1,000 C ABI readers) and tests/faults.rs"
    # CTF_SANITIZER: tests/soak.rs then skips its RSS bounds (ASan's quarantine holds freed
    # memory); threads, descriptors and every comparison are still checked.
    RUSTFLAGS="-Zsanitizer=address" RUSTDOCFLAGS="-Zsanitizer=address" \
        ASAN_OPTIONS=detect_leaks=1 CTF_SANITIZER=address \
        cargo test "${fast[@]}" --release --target "$triple" --test soak --test faults
    echo "--- ASan: C test program and examples/stats against an ASan libctf_reader.a"
    RUSTFLAGS="-Zsanitizer=address" cargo build "${fast[@]}" --release --target "$triple" --lib
    lib="$CARGO_TARGET_DIR/$triple/release/libctf_reader.a"
    out="$CARGO_TARGET_DIR/c"
    mkdir -p "$out"
    libs=(-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc)
    cc -std=c11 -Wall -Wextra -Werror -g -fsanitize=address -Iinclude \
        tests/c_api/api_test.c "$lib" "${libs[@]}" -o "$out/api_test"
    cc -std=c11 -Wall -Wextra -Werror -g -fsanitize=address -Iinclude \
        c_examples/stats.c "$lib" "${libs[@]}" -o "$out/stats"
    scratch=$(mktemp -d)
    ASAN_OPTIONS=detect_leaks=1 "$out/api_test" "$PWD" "$scratch" | tail -n 1 | tee "$out/api_test.last"
    grep -q ' passed, 0 failed$' "$out/api_test.last"
    rm -rf "$scratch"
    ASAN_OPTIONS=detect_leaks=1 "$out/stats" examples/pos.cntk 16 >/dev/null
    echo "ASan: no errors"
    ;;
tsan)
    export CARGO_TARGET_DIR="${TSAN_TARGET_DIR:-$PWD/target/tsan}"
    rustup component add rust-src
    echo "--- TSan: tests/pipeline.rs and tests/engine_props.rs (the threaded engine)"
    RUSTFLAGS="-Zsanitizer=thread" RUSTDOCFLAGS="-Zsanitizer=thread" \
        TSAN_OPTIONS="halt_on_error=1" \
        cargo test "${fast[@]}" -Zbuild-std --release --target "$triple" \
        --test pipeline --test engine_props
    echo "TSan: no data races"
    ;;
*) echo "usage: $0 [asan|tsan]..." >&2; exit 2 ;;
esac
done
