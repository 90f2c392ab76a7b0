// Which processes a dump takes, traced or not: the ranks under a launcher
// (mpirun, srun's slurmstepd, torchrun), the ranks of a SLURM job on this
// node, and what each one's environment says of its rank. Read from /proc;
// another user's processes need root (or the same uid), as for ptrace.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace hangtrace {

struct RankedProcess {
  pid_t pid = 0;
  int32_t rank = -1, world_size = -1;
  std::string rank_from;   // the variable the rank came from: OMPI_COMM_WORLD_RANK, PMIX_RANK, ...
  std::string slurm_job, slurm_step, slurm_node;  // SLURM_JOB_ID, SLURM_STEP_ID, SLURMD_NODENAME
  std::string trace;       // the trace file it maps (its own, wherever --dir put it), "" none
};

// The rank a process's launcher gave it, from /proc/PID/environ: Open MPI's,
// PMI's, PMIx's, SLURM's, then torchrun's RANK/WORLD_SIZE. False when none
// (or the environment cannot be read).
bool ReadRankedProcess(pid_t pid, RankedProcess* out);

// `pid` itself when it is a rank; else its descendants that are ranks, each
// the topmost process with its rank (a rank's own children, like data
// loader workers, inherit its environment and are not ranks), stepping
// through a shell that only runs the rank's program. Ordered by rank.
std::vector<RankedProcess> RanksUnder(pid_t pid);

// The ranks on this node of SLURM job `job` (SLURM_JOB_ID in their
// environment), leaving out `exclude_step`'s processes (the dump's own step),
// and, when `node` is given, processes SLURM placed on another node (several
// slurmd may share one machine). An environment is anyone's to write: a
// process counts only when it runs under the job's slurmstepd, or as
// `owner` (the job's user; -1 unknown). `refused` counts the others.
std::vector<RankedProcess> RanksOfSlurmJob(const std::string& job, const std::string& exclude_step,
                                           const std::string& node, int64_t owner, size_t* refused);

// Every process of this machine: pid -> its parent's pid.
std::map<pid_t, pid_t> ParentMap();

// The processes below `pid` (its children, theirs, three levels down),
// nearest first, at most `most`: a rank's DataLoader workers, a
// multiprocessing pool, a subprocess it started and may wait for.
// hangtrace's own processes (the automatic report's helper, a dump) are
// left out.
std::vector<pid_t> ChildProcesses(pid_t pid, const std::map<pid_t, pid_t>& parents, size_t most);

// The trace file process `pid` has mapped (a *.htrace), "" when none.
std::string MappedTraceFile(pid_t pid);

}  // namespace hangtrace
