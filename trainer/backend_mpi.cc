#include <cstdio>
#include <cstdlib>
#include <vector>

#include "trainer/backend.h"

namespace trainer {
namespace {

class MpiBackend : public Backend {
 public:
  explicit MpiBackend(const Topology& t) {
    comms_[int(Group::kWorld)] = MPI_COMM_WORLD;
    MPI_Comm_set_name(MPI_COMM_WORLD, "world");
    // Index of each group: tpK with K = p + PP*d, ppK with K = t + TP*d,
    // dpK with K = t + TP*p (the labels reports use).
    Split(Group::kTp, t.P() + t.pp * t.D(), t.T(), "tp");
    Split(Group::kPp, t.T() + t.tp * t.D(), t.P(), "pp");
    Split(Group::kDp, t.T() + t.tp * t.P(), t.D(), "dp");
  }

  void AllreduceSum(float* data, size_t count, Group g) override {
    MPI_Allreduce(MPI_IN_PLACE, data, int(count), MPI_FLOAT, MPI_SUM, comms_[int(g)]);
  }
  void AllreduceMax(int* data, size_t count, Group g) override {
    MPI_Allreduce(MPI_IN_PLACE, data, int(count), MPI_INT, MPI_MAX, comms_[int(g)]);
  }
  void Bcast(float* data, size_t count, int root, Group g) override {
    MPI_Bcast(data, int(count), MPI_FLOAT, root, comms_[int(g)]);
  }
  void Send(const float* data, size_t count, int peer, int tag, Group g, bool synchronous) override {
    if (synchronous) MPI_Ssend(data, int(count), MPI_FLOAT, peer, tag, comms_[int(g)]);
    else MPI_Send(data, int(count), MPI_FLOAT, peer, tag, comms_[int(g)]);
  }
  void Recv(float* data, size_t count, int peer, int tag, Group g) override {
    MPI_Recv(data, int(count), MPI_FLOAT, peer, tag, comms_[int(g)], MPI_STATUS_IGNORE);
  }
  void AllreduceSumAsHalf(float* data, size_t count, Group g) override {
    // Two bytes per element where the others send four: the dtype fault.
    MPI_Allreduce(MPI_IN_PLACE, data, int(count), MPI_SHORT, MPI_SUM, comms_[int(g)]);
  }
  std::string Name() const override { return "mpi"; }

 private:
  void Split(Group g, int color, int key, const char* prefix) {
    MPI_Comm_split(MPI_COMM_WORLD, color, key, &comms_[int(g)]);
    std::string name = prefix + std::to_string(color);
    MPI_Comm_set_name(comms_[int(g)], name.c_str());
  }
  MPI_Comm comms_[4];
};

}  // namespace

Backend* MakeMpiBackend(const Topology& topo) { return new MpiBackend(topo); }

}  // namespace trainer
