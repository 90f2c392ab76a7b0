#!/usr/bin/env bash
# Fuzzes with libFuzzer + AddressSanitizer + UBSan (Debian's clang), each
# target for SECONDS (default 60), from its corpus; new inputs that reach new
# code are added to it (commit the small ones; ctest replays both):
#   reader   any bytes as one trace file         tests/fuzz/corpus
#   folder   any folder handed to analyze        tests/fuzz/folder_corpus
#            (files, node.json, links, loops, fifos, unreadable entries)
#   scripts/fuzz.sh [SECONDS] [reader|folder|all]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
which=${2:-all}
command -v clang++ >/dev/null || { echo "fuzz: needs clang (apt-get install clang libclang-rt-14-dev)"; exit 2; }
[ -f build/interpose/mpi_calls.gen.inc ] || ./scripts/setup.sh
mkdir -p build/fuzz tests/fuzz/folder_corpus
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -I. -Ibuild)
reader_sources=(merger/trace_reader.cc merger/frames.cc tracer/format.cc tracer/procfs.cc)
if [ "$which" = reader ] || [ "$which" = all ]; then
  clang++ "${flags[@]}" tests/fuzz/fuzz_reader.cc "${reader_sources[@]}" -o build/fuzz/fuzz_reader
  build/fuzz/fuzz_reader -max_total_time="$seconds" -max_len=65536 -timeout=5 tests/fuzz/corpus
fi
if [ "$which" = folder ] || [ "$which" = all ]; then
  clang++ "${flags[@]}" $(pkg-config --cflags libdw) tests/fuzz/fuzz_folder.cc "${reader_sources[@]}" \
    merger/rank_set.cc merger/load.cc merger/diagnose.cc merger/blame_rules.cc merger/report.cc merger/node_dump.cc \
    merger/symbolize.cc $(pkg-config --libs libdw) -lpthread -o build/fuzz/fuzz_folder
  [ "$seconds" = 0 ] && exit 0  # build only
  build/fuzz/fuzz_folder -max_total_time="$seconds" -max_len=65536 -timeout=10 tests/fuzz/folder_corpus
fi
