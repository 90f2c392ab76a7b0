#!/usr/bin/env bash
# Fuzzes the trace-file reader with libFuzzer + AddressSanitizer (Debian's
# clang), starting from tests/fuzz/corpus, for SECONDS (default 60). New
# inputs that reach new code are added to the corpus; commit the small ones.
#   scripts/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
command -v clang++ >/dev/null || { echo "fuzz: needs clang (apt-get install clang libclang-rt-dev)"; exit 2; }
mkdir -p build/fuzz
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -I. \
  tests/fuzz/fuzz_reader.cc merger/trace_reader.cc tracer/format.cc -o build/fuzz/fuzz_reader
build/fuzz/fuzz_reader -max_total_time="$seconds" -max_len=65536 -timeout=5 tests/fuzz/corpus
