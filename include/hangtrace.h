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

/* Communication calls of a framework whose calls the preloaded wrappers do
 * not see (torch.distributed on gloo). hangtrace's own Python hook
 * (python/hangtrace_torch.py) records through these, as its MPI wrappers
 * record MPI: the analyzer then aligns them by communicator and sequence
 * number like any traced call. `api`, `op`, `flags`, `dtype` and `redop`
 * take the values of the trace format (tracer/format.h: Api, Op, CallFlags,
 * Dtype, Redop); peers and members are ranks (in the communicator, and in
 * the world). Each returns -1 on bad arguments or when not traced. */

/* A call the framework makes ("dist.all_reduce"); returns its id. */
int hangtrace_call_register(const char* name, int api, int op, unsigned flags);
/* A communicator (process group), identical `id` on every member; returns
 * its index. */
int hangtrace_comm_register(uint64_t id, const char* label, int size, int my_index, const int32_t* world_ranks);
int hangtrace_comm_free(int comm);
/* The process's rank as the framework numbers it (its default group). */
int hangtrace_set_rank(int rank, int world_size);
/* Enters a blocking call (the thread's current call until
 * hangtrace_call_end) or posts a nonblocking one (named by `handle` until
 * hangtrace_request_end). `peer` -2: any source, resolved at the end.
 * Returns 0 when recorded, 1 when not. */
int hangtrace_call_begin(int call, int comm, int peer, int tag, uint64_t count, int dtype, int redop,
                         uint64_t handle);
int hangtrace_call_end(int result, int peer, int tag);
int hangtrace_request_end(uint64_t handle, int peer, int tag);
/* The thread's innermost blocking call, or the posted call `handle`, was
 * refused by the framework before it issued anything (torch raised on a
 * bad argument): it ends failed, marked so, and gives back the sequence
 * number it took, which the next call on its communicator takes again
 * (the other ranks never saw it). Returns 0 when recorded, 1 when not. */
int hangtrace_call_not_issued(void);
int hangtrace_request_not_issued(uint64_t handle);

#ifdef __cplusplus
}
#endif
#endif /* HANGTRACE_H_ */
