// libFuzzer target: any bytes as a trace file. The reader must never crash,
// hang or read out of bounds, whatever the file says (scripts/fuzz.sh builds
// it with clang and AddressSanitizer; tests replay the corpus).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "merger/trace_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The reader gets an 8-byte aligned copy, as from mmap.
  std::vector<uint64_t> aligned((size + 7) / 8);
  if (size) memcpy(aligned.data(), data, size);
  std::string error;
  auto snap = hangtrace::ReadTraceBytes(reinterpret_cast<const uint8_t*>(aligned.data()), size, "fuzz", &error);
  if (snap) {
    // Use what was read the way the analyzer and inspect do.
    for (const auto& e : snap->events) {
      (void)snap->CallName(e.rec.call);
      (void)snap->CommLabel(e.rec.comm);
      (void)snap->TicksToRealNs(e.rec.ticks);
    }
    for (const auto& t : snap->threads) (void)snap->SecondsInCall(t.current.ticks);
  }
  return 0;
}
