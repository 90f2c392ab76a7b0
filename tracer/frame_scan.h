// Finding a blocked thread's frame pointer on its stack, for the unwinders
// that have only its stack pointer and pc (tracer/stacks.cc inside the
// process, dump/native_stacks.cc from outside; docs/DUMP.md, "How stacks
// are captured").
//
// /proc/PID/task/TID/syscall gives a thread blocked in a system call with
// two registers and no stop. The CFI unwinds from them until a function
// built with frame pointers (CFA = %rbp + 16) whose %rbp no function below
// it saved: the C library's wrappers of nanosleep, poll or epoll_wait keep
// it in the register, which /proc does not give. Such a frame's %rbp is the
// stack slot where it saved its caller's %rbp, the word after which is its
// return address. Candidates for it are the slots above the stopped
// frame's stack pointer whose next word follows a call instruction that
// names the stopped frame's function (directly, through the GOT or through
// a PLT entry); tried lowest first. The
// caller keeps a candidate only when the unwind from it reaches the
// thread's outermost frame with every frame in an unwind table, which a
// stale return address or a spilled pointer in the frame's locals does
// not. A slot in an outer frame would pass too, and lose the frames
// between: the target check refuses it, and a call through a register,
// whose target nothing names, is never taken (ForEachCandidate).
//
// x86-64 only: elsewhere FrameScanSupported is false and stacks stay as far
// as the two registers take them.
#pragma once

#include <cstdint>
#include <cstring>

namespace hangtrace::frame_scan {

#if defined(__x86_64__)
inline constexpr bool kSupported = true;
#else
inline constexpr bool kSupported = false;
#endif

inline constexpr uint64_t kScanBytes = 16 * 1024;  // how far above the stopped frame
inline constexpr int kMaxCandidates = 8;           // unwinds tried at most

// What the call instruction before a return address says of its target.
struct CallBefore {
  bool call = false;     // the address follows a call instruction
  uint64_t target = 0;   // the function it calls, where the instruction
                         // names it; 0: through a register
};

// `Read` is bool(uint64_t addr, uint64_t* word): one word of the thread's
// process, false where unreadable (it must never fault).

// The function a PLT entry at `at` jumps to (its GOT slot, filled since
// the function was called), else `at`: endbr64, bnd, jmp *GOT(%rip).
template <class Read>
uint64_t ThroughPlt(const Read& read, uint64_t at) {
  uint64_t code[2];
  if (!read(at, &code[0]) || !read(at + 8, &code[1])) return at;
  uint8_t b[16];
  memcpy(b, code, sizeof(b));
  size_t i = 0;
  if (b[0] == 0xf3 && b[1] == 0x0f && b[2] == 0x1e && b[3] == 0xfa) i = 4;  // endbr64
  if (b[i] == 0xf2) ++i;                                                    // bnd
  if (b[i] != 0xff || b[i + 1] != 0x25) return at;
  int32_t rel;
  memcpy(&rel, b + i + 2, sizeof(rel));
  uint64_t fn = 0;
  return read(at + i + 6 + uint64_t(int64_t(rel)), &fn) ? fn : at;
}

// The call before return address `ra`, in the forms compilers emit: e8
// rel32, ff 15 (through the GOT), ff /2 through a register, a register and
// disp8, or disp32.
template <class Read>
CallBefore CallBeforeReturn(const Read& read, uint64_t ra) {
  CallBefore c;
  uint64_t word = 0;
  if (!kSupported || ra < 8 || !read(ra - 8, &word)) return c;
  auto byte = [&](int back) { return uint8_t(word >> (8 * (8 - back))); };
  auto call_modrm = [](uint8_t m) { return ((m >> 3) & 7) == 2; };
  const int32_t rel = int32_t(uint32_t(word >> 32));  // the four bytes before ra
  if (byte(5) == 0xe8) {
    c.call = true;
    c.target = ra + uint64_t(int64_t(rel));
  } else if (byte(6) == 0xff && byte(5) == 0x15) {
    c.call = true;
    if (!read(ra + uint64_t(int64_t(rel)), &c.target)) c.target = 0;
  } else {
    c.call = (byte(2) == 0xff && call_modrm(byte(1)) && (byte(1) >> 6) == 3) ||  // call *%reg
             (byte(3) == 0xff && call_modrm(byte(2)) && (byte(2) >> 6) == 1) ||  // call *d8(%reg)
             (byte(6) == 0xff && call_modrm(byte(5)) && (byte(5) >> 6) == 2) ||  // call *d32(%reg)
             (byte(7) == 0xff && call_modrm(byte(6)) && (byte(6) >> 6) == 2);   // call *d32(%reg,%idx)
  }
  // Through a PLT entry, and jump stubs behind it (a preload's exported
  // function may itself jump through a table): three at most.
  for (int hop = 0; hop < 3 && c.target; ++hop) {
    const uint64_t next = ThroughPlt(read, c.target);
    if (next == c.target) break;
    c.target = next;
  }
  return c;
}

// Calls try_fp(fp) for each candidate frame pointer above `sp` (the
// stopped frame's stack pointer; the stopped frame's function spans
// [`start`, `end`)) until it returns true, lowest first; whether one did.
// A candidate's return address must follow a call that names its target,
// and the target must be the stopped function (its entry may lie a little
// before where its unwind table starts, in hand-written code). A call
// through a register names nothing: a slot of an outer frame whose call was
// indirect would pass every other check and lose the frames between, so
// such a slot is never taken, and the stack ends at the stopped frame. Nor
// is anything tried without the function's extent.
template <class Read, class Try>
bool ForEachCandidate(const Read& read, uint64_t sp, uint64_t start, uint64_t end, const Try& try_fp) {
  if (!kSupported || !start || end <= start) return false;
  constexpr uint64_t kEntrySlack = 64;
  int tried = 0;
  for (uint64_t at = sp & ~uint64_t(7); at < sp + kScanBytes && tried < kMaxCandidates; at += 8) {
    uint64_t ra = 0;
    if (!read(at + 8, &ra)) return false;  // the end of the stack
    const CallBefore call = CallBeforeReturn(read, ra);
    if (!call.call || !call.target || call.target + kEntrySlack < start || call.target >= end) continue;
    ++tried;
    if (try_fp(at)) return true;
  }
  return false;
}

}  // namespace hangtrace::frame_scan
