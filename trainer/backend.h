// The trainer's communication, behind one interface: MPI on CPU here; an
// NCCL + CUDA backend slots in behind the same calls. The trainer knows
// nothing of hangtrace: it is an ordinary MPI program, traced only through
// the preload, so what works on it works on any job.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <string>

namespace trainer {

enum class Group { kWorld, kTp, kPp, kDp };

class Backend {
 public:
  virtual ~Backend() = default;
  // In place. `count` elements of float (or `as_double` for the loss).
  virtual void AllreduceSum(float* data, size_t count, Group g) = 0;
  virtual void AllreduceMax(int* data, size_t count, Group g) = 0;
  virtual void Bcast(float* data, size_t count, int root, Group g) = 0;
  virtual void Send(const float* data, size_t count, int peer, int tag, Group g, bool synchronous) = 0;
  virtual void Recv(float* data, size_t count, int peer, int tag, Group g) = 0;
  // The faults that pass wrong arguments on purpose.
  virtual void AllreduceSumAsHalf(float* data, size_t count, Group g) = 0;  // dtype fault
  virtual std::string Name() const = 0;
};

// Megatron's rank order: TP fastest, then PP, then DP.
struct Topology {
  int tp = 1, pp = 1, dp = 1;
  int rank = 0;
  int World() const { return tp * pp * dp; }
  int T() const { return rank % tp; }
  int P() const { return (rank / tp) % pp; }
  int D() const { return rank / (tp * pp); }
  int Rank(int t, int p, int d) const { return t + tp * (p + pp * d); }
};

// Creates world/tpK/ppK/dpK communicators (named with MPI_Comm_set_name).
Backend* MakeMpiBackend(const Topology& topo);

// The same over NCCL on a GPU (built when CUDA and NCCL are found); null
// with the reason in `error` when no GPU is visible.
Backend* MakeNcclBackend(const Topology& topo, std::string* error);

}  // namespace trainer
