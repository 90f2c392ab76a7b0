#!/usr/bin/env bash
# cmake --install into a fresh prefix: the tools run from there (run finds
# its library), and a C program builds against the C API both through
# pkg-config and through find_package(hangtrace).
set -euo pipefail
build=$(cd "${1:?usage: $0 BUILD_DIR}" && pwd)
work=$(mktemp -d /tmp/hangtrace-install-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > "$work/install.log"
for f in bin/hangtrace bin/hangtrace-trainer bin/hangtrace-srun-dump include/hangtrace.h; do
  [ -e "$prefix/$f" ] || fail "$f not installed"
done
lib=$(find "$prefix" -name libhangtrace.so | head -1)
[ -n "$lib" ] || fail "libhangtrace.so not installed"
# run finds the installed library beside its binary, not the build's.
out=$(HANGTRACE_DIR=$work/traces HANGTRACE_KEEP=1 "$prefix/bin/hangtrace" run sh -c 'echo "$LD_PRELOAD"')
case "$out" in "$prefix"/*libhangtrace.so) ;; *) fail "run preloads '$out', not the installed library";; esac
# ... and puts the installed Python hook first on PYTHONPATH.
out=$(HANGTRACE_DIR=$work/traces "$prefix/bin/hangtrace" run sh -c 'echo "$PYTHONPATH"')
[ -f "${out%%:*}/sitecustomize.py" ] && [ -f "${out%%:*}/hangtrace_torch.py" ] && case "$out" in "$prefix"/*) ;; *) false;; esac ||
  fail "run's PYTHONPATH is '$out', not the installed hook"
# ... with its record path in C++ where the build has one, loadable there.
if ls "$build"/lib/hangtrace/python/_hangtrace_torch*.so > /dev/null 2>&1; then
  /usr/bin/python3 -c "import sys; sys.path.insert(0, '${out%%:*}'); import _hangtrace_torch" ||
    fail "the installed hook has no loadable _hangtrace_torch"
fi
cat > "$work/annotate.c" <<'C'
#include <hangtrace.h>
#include <stdio.h>
int main(void) {
  int r = hangtrace_region("checkpoint_save");
  hangtrace_begin(r, 0);
  hangtrace_end(r);
  printf("traced=%d\n", hangtrace_enabled());
  return 0;
}
C
pc=$(dirname "$(find "$prefix" -name hangtrace.pc | head -1)")
[ -n "$pc" ] || fail "no hangtrace.pc"
# shellcheck disable=SC2046
cc "$work/annotate.c" -o "$work/annotate-pc" $(PKG_CONFIG_PATH=$pc pkg-config --cflags --libs hangtrace) \
  -Wl,-rpath,"$(dirname "$lib")" || fail "cannot build with pkg-config"
"$work/annotate-pc" | grep -q 'traced=1' || fail "the pkg-config build is not traced"
mkdir -p "$work/consumer"
cat > "$work/consumer/CMakeLists.txt" <<'C'
cmake_minimum_required(VERSION 3.25)
project(consumer C)
find_package(hangtrace 0.1 REQUIRED)
add_executable(annotate ../annotate.c)
target_link_libraries(annotate PRIVATE hangtrace::hangtrace)
C
cmake -S "$work/consumer" -B "$work/consumer/build" -DCMAKE_PREFIX_PATH="$prefix" > "$work/consumer.log" 2>&1 ||
  { cat "$work/consumer.log"; fail "find_package(hangtrace) failed"; }
cmake --build "$work/consumer/build" > "$work/consumer-build.log" 2>&1 ||
  { cat "$work/consumer-build.log"; fail "cannot build with find_package(hangtrace)"; }
HANGTRACE_DIR=$work/traces "$work/consumer/build/annotate" | grep -q 'traced=1' || fail "the CMake build is not traced"
echo "PASS: installed into $prefix, used through pkg-config and find_package"
