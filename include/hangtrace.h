/* hangtrace public C API: optional annotations for a traced program.
 *
 * A program never needs these: the preloaded library traces MPI, NCCL and
 * CUDA calls on its own. They let a program (or a test) mark its own
 * blocking points, so the watchdog and the analyzer see them like any call.
 * Every function is a no-op returning 0 when the process is not traced.
 * Link with -lhangtrace, or look them up with dlsym when optional. */
#ifndef HANGTRACE_H_
#define HANGTRACE_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 1 when this process writes a trace file. */
int hangtrace_enabled(void);

/* Path of this process's trace file, or NULL. */
const char* hangtrace_file(void);

/* Registers a named region ("checkpoint_save"); returns its id, or -1. */
int hangtrace_region(const char* name);

/* Enters and leaves a region on the calling thread. `arg` is recorded as the
 * record's count. Regions nest; only the outermost is the current call.
 * hangtrace_end returns 0, or -1 without a matching hangtrace_begin. */
int hangtrace_begin(int region, uint64_t arg);
int hangtrace_end(int region);

/* A point event with a label (its first 39 bytes kept). */
int hangtrace_mark(const char* label);

/* Captures the native stacks of all threads into the trace file now;
 * returns how many threads answered. Not for signal handlers. */
int hangtrace_capture_stacks(void);

#ifdef __cplusplus
}
#endif
#endif /* HANGTRACE_H_ */
