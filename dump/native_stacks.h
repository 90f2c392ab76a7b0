// Native stacks of every thread of a live process, read from outside with
// elfutils' libdwfl: the node side of `hangtrace dump`.
//
// A thread blocked in a system call is read where it waits, from the stack
// pointer and pc /proc/PID/task/TID/syscall gives and the process's memory
// (process_vm_readv), and is never stopped: a stop makes some blocked calls
// (epoll_wait, sigtimedwait, semop, socket reads with a timeout) return
// EINTR. A running thread is attached with PTRACE_SEIZE + PTRACE_INTERRUPT
// (no signal is sent, so nothing lingers if the dump dies: the kernel
// detaches a dead tracer's tracees and lets them run), waited for with a
// timeout, its registers and stack copied, and detached (a CPython
// process's threads once its Python frames are read): the unwind and the
// naming work on the copy. A thread that can be read neither way is
// described from /proc/PID/task/TID/{wchan,syscall,stack} instead. A process that was stopped (SIGSTOP, state T) stays stopped: the
// kernel keeps its group stop across our attach and detach, and the state is
// checked again afterwards.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "merger/frames.h"

namespace hangtrace {

struct DumpedThread {
  int tid = 0;
  std::string name;      // /proc/PID/task/TID/comm
  char state = '?';      // /proc/PID/task/TID/stat field 3
  std::string wchan;     // kernel function it sleeps in, "" when running
  std::string syscall;   // /proc/PID/task/TID/syscall, first field (number or "running")
  // Blocked in fcntl(F_SETLKW)/flock on a file another process holds a
  // lock on (/proc/locks): that process, and the file (tracer/file_locks.h).
  int lock_holder_pid = 0;
  std::string lock_file;
  // "blocked" (read where it waits in a system call, from its stack pointer
  // and pc, not stopped), "ptrace" (stopped briefly and unwound from all
  // its registers), "proc" (kernel stack only), "none"
  std::string method;
  bool frame_pointer_scan = false;  // blocked: a frame pointer found on its stack continued it
  bool moved = false;               // blocked: it left its call while being read
  std::string error;     // why it was not unwound
  // Innermost first: native frames named from the live process (function,
  // file:line where debug information is installed), with CPython's
  // evaluation-loop frames replaced by the Python frames they run.
  std::vector<Frame> frames;
  uint64_t thread_pointer = 0;  // its TLS base (x86-64: fs), = its pthread_t
};

struct ProcessStacks {
  int pid = 0;
  char state_before = '?', state_after = '?';
  std::string error;  // the whole process could not be read (permission, gone)
  std::vector<DumpedThread> threads;
  uint32_t python_version = 0;  // PY_VERSION_HEX when it runs CPython
  std::string python_error;     // why its Python frames were not read
  double seconds = 0;  // time spent on this process
};

struct StackOptions {
  int thread_timeout_ms = 2000;  // per thread, to stop after PTRACE_INTERRUPT
  // Stop every thread, blocked ones too, and unwind from all registers: a
  // fuller stack where frame pointers defeat the two-register read, at the
  // price of EINTR in the calls a stop interrupts (epoll_wait, sigtimedwait,
  // semop, socket reads with a timeout).
  bool stop_all = false;
  bool symbols = true;           // false: raw addresses (faster)
  bool python = true;            // read CPython's frames from memory
  size_t max_frames = 64;
};

// Reads every thread's stack, and in a CPython process every thread's
// Python frames from its memory (python_frames.h). Refuses processes of another user unless this
// one runs as root, with the reason in `error`.
ProcessStacks CaptureProcessStacks(pid_t pid, const StackOptions& options);

// Detaches every thread still attached by this process (a dump interrupted
// by SIGINT/SIGTERM calls it from its signal handler: async-signal-safe).
void DetachAllTraced();

}  // namespace hangtrace
