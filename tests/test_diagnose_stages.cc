// The stages of the diagnosis, each on a job built by hand (no files): the
// classes, the wait-for graph (MPI_Finalize by its call flag, not its name),
// the components, each blame rule on the case it is for, the verdict names.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include "merger/diagnose_stages.h"
#include "merger/load_stages.h"
#include "merger/stack_calls.h"

namespace hangtrace {
namespace {

using namespace diagnose;

// A job of `n` ranks with a world communicator (index 0), every rank
// computing, until a test places them.
struct JobBuilder {
  Job job;
  explicit JobBuilder(int n) {
    job.world_size = n;
    GlobalComm world;
    world.id = fmt::kWorldCommId;
    world.label = "world";
    world.size = n;
    world.world = true;
    job.comms.push_back(world);
    job.comm_index[world.id] = 0;
    for (int r = 0; r < n; ++r) {
      RankView v;
      v.rank = r;
      v.host = "h";
      v.state = RankState::kCompute;
      job.ranks.push_back(v);
    }
  }
  CallPoint Call(const std::string& name, fmt::Op op, uint8_t flags, int32_t comm, uint64_t seq, int32_t peer = -1) {
    CallPoint c;
    c.valid = true;
    c.name = job.Intern(name);
    c.op = op;
    c.call_flags = flags;
    c.comm = comm;
    c.seq = seq;
    c.peer = peer;
    return c;
  }
  // Rank r is in collective `name` #seq on world (and entered it), flagged
  // by its watchdog (it waited the job's timeout: a hang at one look).
  void InColl(int32_t r, const std::string& name, uint64_t seq) {
    RankView& v = job.ranks[size_t(r)];
    v.state = RankState::kInCall;
    v.current = Call(name, fmt::Op::kAllreduce, fmt::kCallCollective | fmt::kCallBlocking, 0, seq);
    v.watchdog = true;
    SetEntered(r, 0, seq);
  }
  void InRecv(int32_t r, int32_t from) {
    RankView& v = job.ranks[size_t(r)];
    v.state = RankState::kInCall;
    v.current = Call("MPI_Recv", fmt::Op::kRecv, fmt::kCallP2p | fmt::kCallBlocking, 0, 1, from);
    v.watchdog = true;
  }
  void SetEntered(int32_t r, int32_t comm, uint64_t n) {
    for (auto& [c, k] : job.ranks[size_t(r)].entered) {
      if (c == comm) {
        k = n;
        return;
      }
    }
    job.ranks[size_t(r)].entered.push_back({comm, n});
  }
  Diagnosis Run() { return Diagnose(job); }
};

TEST(Stages, VerdictNamesAreTheContractsWords) {
  EXPECT_STREQ(VerdictName(Verdict::kNoHang), "no-hang");
  EXPECT_STREQ(VerdictName(Verdict::kHang), "hang");
  EXPECT_STREQ(VerdictName(Verdict::kDeadlock), "deadlock");
  EXPECT_STREQ(VerdictName(Verdict::kMismatch), "mismatch");
  EXPECT_STREQ(VerdictName(Verdict::kCrash), "crash");
  EXPECT_STREQ(VerdictName(Verdict::kUnknown), "unknown");
}

TEST(Stages, ClassifyGroupsByStateCallCommAndSequence) {
  JobBuilder b(5);
  b.InColl(0, "MPI_Allreduce", 3);
  b.InColl(1, "MPI_Allreduce", 3);
  b.InColl(2, "MPI_Allreduce", 4);
  b.InRecv(3, 0);
  Classes c = Classify(b.job);
  ASSERT_EQ(c.groups.size(), 4u);  // #3, #4, the receive, computing
  EXPECT_EQ(c.class_of[0], c.class_of[1]);
  EXPECT_NE(c.class_of[0], c.class_of[2]);
  EXPECT_EQ(c.groups[size_t(c.class_of[0])].ranks.ToString(), "0-1");
  EXPECT_EQ(c.groups[size_t(c.class_of[4])].state, RankState::kCompute);
}

TEST(Stages, AFinalizeWaitsForEveryRankNotInItByItsFlag) {
  JobBuilder b(3);
  RankView& v = b.job.ranks[0];
  v.state = RankState::kInCall;
  // Named otherwise: the rule reads the flag, never the name.
  v.current = b.Call("PMPI_Finalize_by_another_name", fmt::Op::kCommMgmt, fmt::kCallBlocking | fmt::kCallFinalize, -1, 0);
  b.job.ranks[2].state = RankState::kExited;
  EXPECT_EQ(WaitsFor(b.job, v).ToString(), "1");  // 1 computes; 2 exited
  v.current.call_flags = fmt::kCallBlocking;      // without the flag: waits for nobody
  EXPECT_TRUE(WaitsFor(b.job, v).Empty());
}

TEST(Stages, ACollectiveWaitsForTheMembersBehindIt) {
  JobBuilder b(4);
  for (int r : {0, 1, 2}) b.InColl(r, "MPI_Allreduce", 5);
  b.SetEntered(3, 0, 4);
  EXPECT_EQ(WaitsFor(b.job, b.job.ranks[0]).ToString(), "3");
}

TEST(Stages, ComponentsFindCyclesAndSinks) {
  JobBuilder b(3);
  b.InRecv(0, 1);
  b.InRecv(1, 0);
  Classes c = Classify(b.job);
  WaitGraph g = BuildWaitGraph(b.job, &c);
  Components comps = FindComponents(g, c.groups);
  const int a = comps.of[size_t(c.class_of[0])], z = comps.of[size_t(c.class_of[1])];
  EXPECT_EQ(a, z);
  EXPECT_TRUE(comps.cyclic[size_t(a)]);
  EXPECT_TRUE(comps.sink[size_t(a)]);
  EXPECT_FALSE(comps.cyclic[size_t(comps.of[size_t(c.class_of[2])])]);
}

// A rank killed after another crashed did not die first, even when it is
// the only one killed (the torch job whose rank 1 aborts, and mpirun then
// kills a rank still printing the error it got); one killed clearly before
// the crash did.
TEST(Stages, ARankKilledAfterACrashDidNotDieFirst) {
  JobBuilder b(4);
  auto end = [&](int r, Ending e, int64_t at_ns) {
    RankView& v = b.job.ranks[size_t(r)];
    v.ending = e;
    v.dead = e == Ending::kKilled;
    v.end_real_ns = at_ns;
    v.state = e == Ending::kCrashed ? RankState::kCrashed : e == Ending::kExited ? RankState::kExited : RankState::kGone;
  };
  const int64_t t = int64_t(1000) * 1000000000;
  end(0, Ending::kExited, t + 200000000);
  end(1, Ending::kCrashed, t);
  end(2, Ending::kExited, t + 200000000);
  end(3, Ending::kKilled, t - 90000000);  // its last heartbeat, 0.09 s before the crash
  Deaths d = FindDeaths(b.job);
  EXPECT_EQ(d.first, -1);
  EXPECT_EQ(d.first_crash, 1);
  end(3, Ending::kKilled, t - 2000000000);  // 2 s before: it did
  EXPECT_EQ(FindDeaths(b.job).first, 3);
}

// Each rule, on the case it is for: the rule that blames, by name.
std::string RuleFor(Job& job, int32_t rank_in_component) {
  Classes c = Classify(job);
  WaitGraph g = BuildWaitGraph(job, &c);
  Components comps = FindComponents(g, c.groups);
  std::vector<Mismatch> mm = FindMismatches(job);
  std::vector<std::vector<std::string>> cycles;
  Deaths deaths = FindDeaths(job);
  BlameContext ctx{job, c, g, comps, mm, deaths, &cycles, {}, {}, {}};
  int comp = comps.of[size_t(c.class_of[size_t(rank_in_component)])];
  for (size_t r = 0; r < kNumBlameRules; ++r) {
    if (kBlameRules[r].applies(ctx, comp)) return kBlameRules[r].name;
  }
  return "";
}

// One look at a job still running: a rank in a call is evidence of a hang
// only past its watchdog's timeout, or long past what the same call took
// before, or beside a rank that cannot come (stopped, exited).
TEST(Stages, OneLookCallsAHangOnlyWhenAWaitIsLongerThanTheCallEverNeeded) {
  auto job = [](double waited, uint32_t usual_calls, double usual_s) {
    JobBuilder b(3);  // 0, 1 in #2; 2 computes
    for (int32_t r : {0, 1}) {
      b.InColl(r, "MPI_Allreduce", 2);
      RankView& v = b.job.ranks[size_t(r)];
      v.watchdog = false;
      v.watchdog_timeout_s = 120;
      v.current.seconds = waited;
      v.usual_calls = usual_calls;
      v.usual_longest_s = usual_s;
    }
    b.SetEntered(2, 0, 1);
    return b;
  };
  {
    Diagnosis d = job(0.0, 1000, 0.001).Run();  // between two fast calls
    EXPECT_EQ(d.verdict, Verdict::kUnknown) << d.summary;
    EXPECT_TRUE(d.culprits.empty()) << d.summary;
    EXPECT_NE(d.evidence.find("one look at a running job: ranks 0-1 have waited in calls for at most 0.0 s"),
              std::string::npos)
        << d.evidence;
  }
  EXPECT_EQ(job(1.5, 1000, 0.001).Run().verdict, Verdict::kUnknown) << "under the 2 s floor";
  EXPECT_EQ(job(3.0, 1000, 0.5).Run().verdict, Verdict::kUnknown) << "under 10x the longest before";
  {
    Diagnosis d = job(6.0, 1000, 0.5).Run();
    EXPECT_EQ(d.verdict, Verdict::kHang) << d.summary;
    EXPECT_EQ(d.stuck_because, "12x the longest the same call took before on rank 0, 0.5 s");
  }
  {
    Diagnosis d = job(60.0, 2, 0.001).Run();  // two earlier calls: too few to know
    EXPECT_EQ(d.verdict, Verdict::kUnknown) << d.summary;
    EXPECT_NE(d.evidence.find("too new to their rings"), std::string::npos) << d.evidence;
    EXPECT_NE(d.evidence.find("short of the watchdog's 120 s"), std::string::npos) << d.evidence;
  }
  EXPECT_EQ(job(120.0, 0, 0).Run().verdict, Verdict::kHang) << "the watchdog's timeout waited";
  {
    JobBuilder b = job(0.5, 0, 0);
    b.job.ranks[0].watchdog = true;
    Diagnosis d = b.Run();
    EXPECT_EQ(d.verdict, Verdict::kHang) << "flagged by its watchdog";
    EXPECT_EQ(d.stuck_because, "past the watchdog's 120 s");
  }
  for (RankState cannot_come : {RankState::kStopped, RankState::kExited}) {
    JobBuilder b = job(0.5, 0, 0);
    b.job.ranks[2].state = cannot_come;
    Diagnosis d = b.Run();
    EXPECT_EQ(d.verdict, Verdict::kHang) << RankStateName(cannot_come) << ": " << d.summary;
    ASSERT_EQ(d.culprits.size(), 1u) << d.summary;
    EXPECT_EQ(d.culprits[0].rank, 2);
    EXPECT_EQ(d.stuck_because, cannot_come == RankState::kStopped ? "rank 2 is stopped" : "rank 2 has exited");
  }
  {
    // Two looks: progress decides, not how long.
    JobBuilder earlier = job(0.0, 1000, 0.001), later = job(0.1, 1000, 0.001);
    EXPECT_EQ(Diagnose(later.job, &earlier.job).verdict, Verdict::kHang);
  }
}

TEST(Stages, EachRuleTakesItsCase) {
  {
    JobBuilder b(3);  // 0, 1 in #2; 2 computes: waited for, waits for nobody
    b.InColl(0, "MPI_Allreduce", 2);
    b.InColl(1, "MPI_Allreduce", 2);
    b.SetEntered(2, 0, 1);
    EXPECT_EQ(RuleFor(b.job, 2), "waits-for-nobody");
    Diagnosis d = b.Run();
    EXPECT_EQ(d.verdict, Verdict::kHang);
    ASSERT_EQ(d.culprits.size(), 1u);
    EXPECT_EQ(d.culprits[0].rank, 2);
    EXPECT_NE(d.culprits[0].why.find("never entered MPI_Allreduce #2 on world"), std::string::npos) << d.culprits[0].why;
  }
  {
    JobBuilder b(2);  // 1 is in a kernel that never finishes
    b.InColl(0, "ncclAllReduce", 2);
    b.SetEntered(1, 0, 1);
    RankView& v = b.job.ranks[1];
    v.state = RankState::kInCall;
    v.current = b.Call("cudaLaunchKernel", fmt::Op::kKernel, 0, -1, 0);
    EXPECT_EQ(RuleFor(b.job, 1), "no-rank-call");
  }
  {
    JobBuilder b(2);  // both entered #4, it does not complete: below MPI
    b.InColl(0, "MPI_Allreduce", 4);
    b.InColl(1, "MPI_Allreduce", 4);
    EXPECT_EQ(RuleFor(b.job, 0), "everyone-entered");
    Diagnosis d = b.Run();
    EXPECT_TRUE(d.below);
    EXPECT_TRUE(d.culprits.empty());
    EXPECT_NE(d.summary.find("below MPI"), std::string::npos) << d.summary;
  }
  {
    JobBuilder b(2);  // each receives from the other
    b.InRecv(0, 1);
    b.InRecv(1, 0);
    EXPECT_EQ(RuleFor(b.job, 0), "receive-cycle");
    Diagnosis d = b.Run();
    EXPECT_EQ(d.verdict, Verdict::kDeadlock);
    ASSERT_EQ(d.cycles.size(), 1u);
    EXPECT_EQ(d.cycles[0].size(), 2u);
  }
  {
    JobBuilder b(2);  // each sends to the other, synchronously
    for (int32_t r : {0, 1}) {
      b.job.ranks[size_t(r)].state = RankState::kInCall;
      b.job.ranks[size_t(r)].current = b.Call("MPI_Ssend", fmt::Op::kSend, fmt::kCallP2p | fmt::kCallBlocking, 0, 1, 1 - r);
    }
    EXPECT_EQ(RuleFor(b.job, 0), "p2p-cycle");
    EXPECT_EQ(b.Run().verdict, Verdict::kDeadlock);
  }
  {
    JobBuilder b(2);  // 0 in MPI_Finalize while 1 receives from 0: finished, not waiting
    RankView& v = b.job.ranks[0];
    v.state = RankState::kInCall;
    v.current = b.Call("MPI_Finalize", fmt::Op::kCommMgmt, fmt::kCallFinalize | fmt::kCallBlocking, 0, 0);
    b.InRecv(1, 0);
    EXPECT_EQ(RuleFor(b.job, 0), "finished");
    Diagnosis d = b.Run();
    EXPECT_EQ(d.verdict, Verdict::kHang);
    ASSERT_EQ(d.culprits.size(), 1u);
    EXPECT_EQ(d.culprits[0].rank, 0);
    EXPECT_NE(d.culprits[0].why.find("without sending what rank 1 waits for"), std::string::npos) << d.culprits[0].why;
  }
  // 0 in world #2 while 1 receives from 0: a cycle through a collective and
  // p2p. Which strayed only history tells: with no message between them
  // before, both are named; after one, the call each made just before says
  // which came first in a step.
  enum class Before { kNothing, kMessage, kCollective };
  for (Before before : {Before::kNothing, Before::kMessage, Before::kCollective}) {
    JobBuilder b(2);
    b.InColl(0, "MPI_Allreduce", 2);
    b.InRecv(1, 0);
    b.job.ranks[1].current.seq = 2;
    b.SetEntered(1, 0, 1);
    if (before != Before::kNothing) {
      P2pTraffic t;
      t.comm = 0, t.peer = 0, t.tag = 0, t.received = 1;
      b.job.ranks[1].p2p.push_back(t);
      b.job.ranks[1].previous = before == Before::kMessage
                                    ? b.Call("MPI_Recv", fmt::Op::kRecv, fmt::kCallP2p | fmt::kCallBlocking, 0, 1, 0)
                                    : b.Call("MPI_Allreduce", fmt::Op::kAllreduce,
                                             fmt::kCallCollective | fmt::kCallBlocking, 0, 1);
    }
    EXPECT_EQ(RuleFor(b.job, 0), "skipped-into-p2p");
    Diagnosis d = b.Run();
    std::set<int32_t> culprits;
    for (const Culprit& c : d.culprits) culprits.insert(c.rank);
    switch (before) {
      case Before::kNothing:  // "rank 1 skipped #2" and "rank 0 went on without sending" alike
        EXPECT_EQ(culprits, (std::set<int32_t>{0, 1}));
        EXPECT_NE(d.culprits[0].why.find("nothing in the trace says which strayed"), std::string::npos);
        break;
      case Before::kMessage:  // a message, then this one: rank 1 skipped the collective between
        EXPECT_EQ(culprits, (std::set<int32_t>{1}));
        break;
      case Before::kCollective:  // the collective, then this message: rank 0 went on without sending
        EXPECT_EQ(culprits, (std::set<int32_t>{0}));
        break;
    }
  }
}

// Ranks `untraced` are blocked in an all-reduce seen only on their stacks
// (DDP's gradient all-reduce, untraced) after entering collectives #1-#3 on
// world; the others are in barrier #4 there (flagged by their watchdog,
// unless `flagged` is false: then for 0.5 s), or compute (`computing`).
Diagnosis UntracedAgainstTraced(int n, const std::set<int32_t>& untraced, int32_t computing = -1, bool flagged = true) {
  JobBuilder b(n);
  for (int32_t r = 0; r < n; ++r) {
    RankView& v = b.job.ranks[size_t(r)];
    v.path = "f";
    if (r == computing) {
      b.SetEntered(r, 0, 3);
    } else if (untraced.count(r)) {
      v.state = RankState::kInCall;
      v.current = b.Call("c10d::Reducer::finalize_backward", fmt::Op::kAllreduce, 0, -1, 0);
      v.current.from_stacks = true;
      v.basis = Basis::kStacks;
      b.SetEntered(r, 0, 3);
    } else {
      b.InColl(r, "dist.barrier", 4);
      v.watchdog = flagged;
      v.watchdog_timeout_s = 120;
      v.current.seconds = flagged ? 120 : 0.5;
    }
  }
  return b.Run();
}

// Stacks say where a rank is, never since when: at one look, a wait they
// show, or a mismatch they make with the traced ranks, is no evidence of a
// hang (a job at work shows both for a moment). A traced wait past its
// watchdog, a rank that cannot come, or a second look is.
TEST(Stages, OneLookAtWaitsOnlyStacksShowNamesNoCulprit) {
  {  // rank 0 in DDP's all-reduce, ranks 1-3 in the traced barrier for 0.5 s
    Diagnosis d = UntracedAgainstTraced(4, {0}, -1, false);
    EXPECT_EQ(d.verdict, Verdict::kUnknown) << d.summary;
    EXPECT_TRUE(d.culprits.empty()) << d.summary;
    EXPECT_NE(d.evidence.find("rank 0 is in calls only its stacks show, which say where, not since when"),
              std::string::npos)
        << d.evidence;
  }
  {  // the ranks in calls only stacks show: nothing traced waits
    JobBuilder b(3);
    for (int32_t r : {0, 1}) {
      RankView& v = b.job.ranks[size_t(r)];
      v.path = "f";
      v.state = RankState::kInCall;
      v.current = b.Call("c10d::ProcessGroupGloo::allreduce", fmt::Op::kAllreduce, 0, -1, 0);
      v.current.from_stacks = true;
      v.basis = Basis::kStacks;
    }
    b.job.ranks[2].path = "f";
    Diagnosis d = b.Run();
    EXPECT_EQ(d.verdict, Verdict::kUnknown) << d.summary;
    EXPECT_TRUE(d.culprits.empty()) << d.summary;
    // (Judged from the stacks alone: no traced rank is in a call.)
    EXPECT_NE(d.summary.find("One look at a running job: stacks say where each rank is, not since when"),
              std::string::npos)
        << d.summary;
    // The same with rank 2 stopped: it cannot come, whatever the time.
    b.job.ranks[2].state = RankState::kStopped;
    EXPECT_EQ(b.Run().verdict, Verdict::kHang) << b.Run().summary;
  }
  // Flagged by their watchdog: the traced ranks are stuck, the mismatch stands.
  EXPECT_EQ(UntracedAgainstTraced(4, {0}, -1, true).verdict, Verdict::kMismatch);
}

TEST(Mismatches, ACollectiveOnTheStacksInPlaceOfTheTracedOneIsAMismatchNeverNeverEntered) {
  {  // one rank out of data: in the barrier while three are in the all-reduce
    Diagnosis d = UntracedAgainstTraced(4, {0, 1, 2});
    EXPECT_EQ(d.verdict, Verdict::kMismatch) << d.summary;
    ASSERT_EQ(d.culprits.size(), 1u) << d.summary;
    EXPECT_EQ(d.culprits[0].rank, 3);
    EXPECT_NE(d.culprits[0].why.find("calls dist.barrier as collective #4 on world; the other members, having "
                                     "entered every one before it, are in c10d::Reducer::finalize_backward "
                                     "(allreduce, untraced) instead"),
              std::string::npos)
        << d.culprits[0].why;
    ASSERT_EQ(d.mismatches.size(), 1u);
    EXPECT_EQ(d.mismatches[0].untraced.ToString(), "0-2");
    EXPECT_EQ(d.mismatches[0].odd.ToString(), "3");
  }
  {  // one rank with a batch more: the untraced side is the odd one
    Diagnosis d = UntracedAgainstTraced(4, {0});
    EXPECT_EQ(d.verdict, Verdict::kMismatch) << d.summary;
    ASSERT_EQ(d.culprits.size(), 1u) << d.summary;
    EXPECT_EQ(d.culprits[0].rank, 0);
    EXPECT_EQ(d.culprits[0].why.find("never entered"), std::string::npos) << d.culprits[0].why;
    EXPECT_NE(d.culprits[0].why.find("is in c10d::Reducer::finalize_backward (allreduce, untraced), on a "
                                     "communicator the trace does not show, where collective #4 on world is"),
              std::string::npos)
        << d.culprits[0].why;
  }
  {  // two against two: a tie, every side named
    Diagnosis d = UntracedAgainstTraced(4, {0, 1});
    EXPECT_EQ(d.verdict, Verdict::kMismatch) << d.summary;
    EXPECT_EQ(d.culprits.size(), 4u) << d.summary;
    ASSERT_EQ(d.mismatches.size(), 1u);
    EXPECT_TRUE(d.mismatches[0].tie);
  }
  {  // a member elsewhere (computing): it may be what both wait for, so no mismatch is claimed
    Diagnosis d = UntracedAgainstTraced(4, {0}, 3);
    EXPECT_TRUE(d.mismatches.empty()) << d.summary;
    EXPECT_NE(d.verdict, Verdict::kMismatch) << d.summary;
  }
}

// Rank 0 waits in `completion` on receives from ranks 1 and 2; rank 1
// waits in a receive from rank 0; rank 2 computes.
Diagnosis WaitOnTwoWithOneInACycle(const std::string& completion) {
  JobBuilder b(3);
  RankView& v = b.job.ranks[0];
  v.state = RankState::kInCall;
  v.current = b.Call(completion, fmt::Op::kWait, fmt::kCallCompletion | fmt::kCallBlocking, -1, 0);
  v.pending = {b.Call("MPI_Irecv", fmt::Op::kRecv, fmt::kCallP2p | fmt::kCallNonblocking, 0, 1, 1),
               b.Call("MPI_Irecv", fmt::Op::kRecv, fmt::kCallP2p | fmt::kCallNonblocking, 0, 1, 2)};
  b.InRecv(1, 0);
  return b.Run();
}

TEST(Stages, AnOrWaitWaitsForTheRanksThatCanStillActAndAnAndWaitForAll) {
  // Waitany: rank 2 alone can release rank 0; no cycle with rank 1.
  for (const char* any : {"MPI_Waitany", "MPI_Testsome", "MPI_WAITANY"}) {
    Diagnosis d = WaitOnTwoWithOneInACycle(any);
    EXPECT_EQ(d.verdict, Verdict::kHang) << any;
    ASSERT_EQ(d.culprits.size(), 1u) << any;
    EXPECT_EQ(d.culprits[0].rank, 2) << any;
    EXPECT_TRUE(d.cycles.empty()) << any;
  }
  // Waitall: rank 0 needs rank 1's message too, and rank 1 needs rank 0's:
  // a deadlock whatever rank 2 does (rank 2 still owes its message).
  Diagnosis d = WaitOnTwoWithOneInACycle("MPI_Waitall");
  EXPECT_EQ(d.verdict, Verdict::kDeadlock);
  std::set<int32_t> culprits;
  for (const Culprit& c : d.culprits) culprits.insert(c.rank);
  EXPECT_EQ(culprits, (std::set<int32_t>{0, 1, 2}));
  ASSERT_EQ(d.cycles.size(), 1u);
}

TEST(Stages, ProgressIsJudgedOnRawCountersNeverOnConvertedTimes) {
  JobBuilder a(2), b(2);
  for (JobBuilder* j : {&a, &b}) {
    j->InColl(0, "MPI_Allreduce", 3);
    j->InColl(1, "MPI_Allreduce", 3);
    j->job.ranks[0].current.ticks = j->job.ranks[1].current.ticks = 1000;
    j->job.ranks[0].records = j->job.ranks[1].records = 40;
  }
  // The same records, read twice: the clock's calibration moved a microsecond.
  b.job.ranks[0].current.begin_real_ns = a.job.ranks[0].current.begin_real_ns + 1000;
  EXPECT_TRUE(FindProgress(b.job, a.job).Empty());
  // Records written in between while its main thread stayed in the same
  // call (the same BEGIN) are another thread's (a heartbeat's): not moved.
  b.job.ranks[1].records = 44;
  EXPECT_TRUE(FindProgress(b.job, a.job).Empty());
  // A rank that returned and called again (a new BEGIN) moved.
  b.job.ranks[1].current.ticks = 1200;
  EXPECT_EQ(FindProgress(b.job, a.job).ToString(), "1");
  // So does one whose call is on another thread (a listener's receive)
  // while its records move: the thread that works may be another.
  b.job.ranks[1].current.ticks = 1000;
  a.job.ranks[1].call_thread = b.job.ranks[1].call_thread = "listener";
  EXPECT_EQ(FindProgress(b.job, a.job).ToString(), "1");
}

// A rank outside calls whose stacks were read twice: the same stack, once
// before the capture's module map was there (raw addresses), once named,
// is no progress; a stack named both times at another place is.
TEST(Stages, AStackReadBeforeItsModulesWereKnownIsComparedWithNothing) {
  auto outside = [](JobBuilder& b, std::vector<Frame> frames) {
    RankView& v = b.job.ranks[1];
    v.state = RankState::kCompute;
    v.basis = Basis::kStacks;
    v.pid = 100;
    v.outside_since_ticks = 500;
    ThreadStack t;
    t.tid = 100;
    for (const Frame& f : frames) t.frames.push_back(b.job.InternFrame(f));
    v.stacks = {t};
  };
  Frame raw, sleep, slow, other;
  raw.offset = 0x7f85e45ae545;  // no module, no function: a bare address
  sleep.func = "clock_nanosleep";
  sleep.module = "/lib/libc.so.6";
  slow.func = "slow";
  slow.module = "/bin/prog";
  other.func = "compute";
  other.module = "/bin/prog";
  JobBuilder earlier(2), later(2);
  outside(earlier, {raw, raw});
  outside(later, {sleep, slow});
  EXPECT_TRUE(FindProgress(later.job, earlier.job).Empty());
  JobBuilder named(2);
  outside(named, {sleep, other});
  EXPECT_EQ(FindProgress(named.job, later.job).ToString(), "1");
}

TEST(Stages, OneSnapshotSaysSoAndTwoNeverBlameARankThatMoved) {
  JobBuilder b(3);  // 0, 1 in #2; 2 computes, waited for
  b.InColl(0, "MPI_Allreduce", 2);
  b.InColl(1, "MPI_Allreduce", 2);
  b.job.ranks[0].current.seconds = b.job.ranks[1].current.seconds = 12.0;
  b.SetEntered(2, 0, 1);
  Diagnosis one = b.Run();
  ASSERT_EQ(one.culprits.size(), 1u);
  bool caveat = false;
  for (const std::string& n : one.notes) caveat |= n.find("one snapshot") != std::string::npos && n.find("--interval") != std::string::npos;
  EXPECT_TRUE(caveat);
  // Read again: rank 2 wrote records in between (it is computing, slowly).
  JobBuilder earlier = b;
  earlier.job.ranks[2].records = 10;
  b.job.ranks[2].records = 25;
  Diagnosis two = Diagnose(b.job, &earlier.job);
  EXPECT_TRUE(two.progressing.Contains(2));
  EXPECT_TRUE(two.culprits.empty()) << "rank 2 moved: " << two.summary;
  for (const std::string& n : two.notes) EXPECT_EQ(n.find("one snapshot"), std::string::npos) << n;
}

// The collective a rank called as number n is a fact of its trace: a rank
// that moved between the two looks into a collective the others are not in
// (it started late) is still the odd one of the mismatch.
TEST(Stages, TheOddRankOfARecordedMismatchIsNamedThoughItMoved) {
  JobBuilder b(4);
  for (int r : {0, 1, 3}) {
    b.InColl(r, "MPI_Barrier", 1);
    b.job.ranks[size_t(r)].current.op = fmt::Op::kBarrier;
  }
  JobBuilder earlier = b;  // rank 2 still computing at the first look
  b.InColl(2, "MPI_Allreduce", 1);
  // The signatures the loader keeps: world's #1 is a barrier, rank 2's own
  // an all-reduce (the odd one), the pair flagged.
  CollSig barrier, allreduce;
  barrier.name = b.job.Intern("MPI_Barrier");
  allreduce.name = b.job.Intern("MPI_Allreduce");
  b.job.sig_tables.assign(1, Job::SigTable(1));
  *b.job.sig_tables[0][0].Slot(1) = {0, barrier};
  b.job.odd_index[Job::OddKey(0, 1, 2)] = allreduce;
  b.job.flagged = {{0, 1}};
  earlier.job.ranks[2].records = 3;
  b.job.ranks[2].records = 5;
  Diagnosis d = Diagnose(b.job, &earlier.job);
  EXPECT_TRUE(d.progressing.Contains(2));
  EXPECT_EQ(d.verdict, Verdict::kMismatch) << d.summary;
  ASSERT_EQ(d.culprits.size(), 1u) << d.summary;
  EXPECT_EQ(d.culprits[0].rank, 2);
}

// MPI_Init completes when every process has started it: a rank alone in
// it while another is stopped (past its own, or before) waits for that
// one; below MPI is said only when every rank is in it.
TEST(Stages, MpiInitWaitsForTheWholeJobBeforeBelowMpiIsSaid) {
  auto in_init = [](JobBuilder& b, int32_t r) {
    RankView& v = b.job.ranks[size_t(r)];
    v.state = RankState::kInCall;
    v.current = b.Call("MPI_Init", fmt::Op::kCommMgmt, fmt::kCallBlocking, -1, 0);
  };
  {
    JobBuilder b(2);
    in_init(b, 0);
    b.job.ranks[1].state = RankState::kStopped;
    b.job.ranks[1].silent_s = 8;
    Diagnosis d = b.Run();
    EXPECT_FALSE(d.below) << d.summary;
    ASSERT_EQ(d.culprits.size(), 1u) << d.summary;
    EXPECT_EQ(d.culprits[0].rank, 1);
    EXPECT_NE(d.culprits[0].why.find("is stopped"), std::string::npos) << d.culprits[0].why;
  }
  {
    JobBuilder b(2);  // rank 1 computes: nothing says it is below MPI
    in_init(b, 0);
    Diagnosis d = b.Run();
    EXPECT_FALSE(d.below) << d.summary;
    EXPECT_EQ(d.summary.find("below MPI"), std::string::npos) << d.summary;
  }
  {
    JobBuilder b(2);  // both in it: the launcher's exchange, below any rank
    in_init(b, 0);
    in_init(b, 1);
    Diagnosis d = b.Run();
    EXPECT_TRUE(d.below) << d.summary;
  }
}

// One look at a healthy job mid-call: ranks 0,1 still in barrier #5, which
// ranks 2,3 have already returned from. It completes for them too; nothing
// is below MPI, and one look cannot say more.
TEST(Stages, ACollectiveOthersReturnedFromIsCompletingNeverBelowMpi) {
  JobBuilder b(4);
  b.InColl(0, "MPI_Barrier", 5);
  b.InColl(1, "MPI_Barrier", 5);
  for (int r : {2, 3}) b.SetEntered(r, 0, 5);
  Diagnosis d = b.Run();
  EXPECT_FALSE(d.below) << d.summary;
  EXPECT_EQ(d.verdict, Verdict::kUnknown) << d.summary;
  EXPECT_TRUE(d.culprits.empty()) << d.summary;
  EXPECT_NE(d.summary.find("have already returned from"), std::string::npos) << d.summary;
}

// Ranks 0 and 2 exit with status 53 from inside MPI_Win_create (an MPI
// error under MPI_ERRORS_ARE_FATAL); mpirun then ends 1 and 3 with SIGTERM
// in their fence: a crash, 0 and 2 named, never "nothing was hung".
TEST(Stages, AFailureExitInsideACallBeforeTheLaunchersSigtermIsTheCrash) {
  JobBuilder b(4);
  for (int r = 0; r < 4; ++r) b.InColl(r, r % 2 ? "MPI_Win_fence" : "MPI_Win_create", 1);
  for (RankView& v : b.job.ranks) {
    v.path = "f";
    if (v.rank % 2 == 0) {
      v.ending = Ending::kExited;
      v.ended_in_call = true;
      v.exit_code = 53;
      v.end_real_ns = 1000000000;
    } else {
      v.ending = Ending::kTerminated;
      v.dead = true;
      v.term_signal = 15;
      v.term_sender = "mpirun (pid 9)";
      v.end_real_ns = 1100000000;
    }
    v.current.begin_real_ns = 990000000;
  }
  Diagnosis d = b.Run();
  EXPECT_EQ(d.verdict, Verdict::kCrash) << d.summary;
  std::set<int32_t> named;
  for (const Culprit& c : d.culprits) named.insert(c.rank);
  EXPECT_EQ(named, (std::set<int32_t>{0, 2})) << d.summary;
  EXPECT_EQ(d.summary.find("nothing was hung"), std::string::npos) << d.summary;
  // How it ended: ranks 1,3 by mpirun's SIGTERM. Ranks 0,2 began it (their
  // culprit lines say so): never "torn down", "a lost launcher" or "stuck".
  std::string notes;
  for (const std::string& n : d.notes) notes += n + "\n";
  EXPECT_NE(notes.find("then the job was torn down: ranks 1,3 ended by SIGTERM from mpirun (pid 9)"), std::string::npos)
      << notes;
  EXPECT_EQ(notes.find("lost launcher"), std::string::npos) << notes;
  EXPECT_EQ(notes.find("stuck"), std::string::npos) << notes;
}

TEST(Stages, TheVerdictSaysEachCulpritsOwnReason) {
  JobBuilder b(6);
  Job& job = b.job;
  Diagnosis d;
  d.verdict = Verdict::kHang;
  d.culprits = {{2, "h", 12, "is stopped: silent; never entered MPI_Allreduce #3 on world"},
                {4, "h", 14, "crashed with SIGSEGV; never entered MPI_Allreduce #3 on world"},
                {5, "h", 15, "is stopped: silent; never entered MPI_Allreduce #3 on world"}};
  Deaths deaths;
  // Two reasons, each said once with its ranks; never one rank's reason for all.
  EXPECT_EQ(Summarize(job, d, deaths), "ranks 2,5 are stopped: silent; rank 4 crashed with SIGSEGV");
  d.culprits.resize(1);
  EXPECT_EQ(Summarize(job, d, deaths), "rank 2 is stopped: silent");
}

// --- a rank's state, decided once from its facts (rank_state.cc) --------------------------

// Rank r's file says it is (or was) in collective #seq on world.
void TracedInColl(JobBuilder* b, int32_t r, uint64_t seq) {
  b->InColl(r, "MPI_Allreduce", seq);
  RankView& v = b->job.ranks[size_t(r)];
  v.traced_call = true;
  v.path = "f" + std::to_string(r);
  v.pid = 100 + r;
  v.call_tid = uint32_t(v.pid);
}

TEST(RankState, ARankThatEndedInsideACallIsWhereItWas) {
  JobBuilder b(4);
  for (int r = 0; r < 4; ++r) TracedInColl(&b, r, 6);
  // 0: killed inside it; 1: SIGTERMed inside it; 2: exited from another
  // thread (Open MPI's, its launcher gone) with status 195; 3: exit(0) from
  // another thread while its main thread sat in a call the watchdog flagged.
  b.job.ranks[0].ending = Ending::kKilled;
  b.job.ranks[0].dead = true;
  b.job.ranks[1].ending = Ending::kTerminated;
  b.job.ranks[1].dead = true;
  b.job.ranks[2].ending = Ending::kExited;
  b.job.ranks[2].exit_code = -61;
  b.job.ranks[3].ending = Ending::kExited;
  b.job.ranks[3].watchdog = true;
  load::DecideRankStates(&b.job);
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(b.job.ranks[size_t(r)].state, RankState::kInCall) << "rank " << r;
    EXPECT_TRUE(b.job.ranks[size_t(r)].ended_in_call) << "rank " << r;
    EXPECT_EQ(b.job.ranks[size_t(r)].basis, Basis::kTrace);
  }
}

TEST(RankState, ACleanExitThatLeftAHelperThreadInACallIsAnExit) {
  JobBuilder b(2);
  for (int r = 0; r < 2; ++r) TracedInColl(&b, r, 3);
  // A helper thread (not the main one) in a call nobody flagged; exit(0).
  for (int r = 0; r < 2; ++r) {
    b.job.ranks[size_t(r)].call_tid = 9000 + uint32_t(r);
    b.job.ranks[size_t(r)].ending = Ending::kExited;
    b.job.ranks[size_t(r)].watchdog = false;
  }
  load::DecideRankStates(&b.job);
  EXPECT_EQ(b.job.ranks[0].state, RankState::kExited);
  Diagnosis d = Diagnose(b.job);
  EXPECT_EQ(d.verdict, Verdict::kNoHang) << d.summary;
}

TEST(RankState, ASilentTraceIsPlacedByItsStacksAndAStaleHeartbeatIsStopped) {
  JobBuilder b(3);
  for (int r = 0; r < 3; ++r) {
    b.job.ranks[size_t(r)].path = "f" + std::to_string(r);
    b.job.ranks[size_t(r)].heartbeat_real_ns = 100000000000;
  }
  b.job.ranks[1].stack_call = b.Call("torch.distributed.barrier", fmt::Op::kBarrier, 0, -1, 0);
  b.job.ranks[1].stack_call.from_stacks = true;
  b.job.ranks[1].stacks.push_back(ThreadStack{});
  b.job.ranks[2].heartbeat_real_ns = 90000000000;  // silent 10 s while the others beat
  load::DecideRankStates(&b.job);
  EXPECT_EQ(b.job.ranks[0].state, RankState::kCompute);
  EXPECT_EQ(b.job.ranks[0].basis, Basis::kLiveness);
  EXPECT_EQ(b.job.ranks[1].state, RankState::kInCall);
  EXPECT_EQ(b.job.ranks[1].basis, Basis::kStacks);
  EXPECT_EQ(b.job.names[b.job.ranks[1].current.name], "torch.distributed.barrier");
  EXPECT_EQ(b.job.ranks[2].state, RankState::kStopped);
}

// In a dump, each snapshot is copied in turn, seconds apart on a loaded
// node: a rank is silent by its heartbeat's age when the dump found it
// running, not against a snapshot copied later.
TEST(RankState, ADumpJudgesEachHeartbeatByItsAgeWhenFound) {
  JobBuilder b(2);
  for (int r = 0; r < 2; ++r) {
    b.job.ranks[size_t(r)].path = "f" + std::to_string(r);
    b.job.ranks[size_t(r)].liveness = Liveness::kRunning;
    b.job.ranks[size_t(r)].dump_heartbeat_age_s = 0.5;
  }
  b.job.ranks[0].heartbeat_real_ns = 90000000000;  // copied 10 s before rank 1's
  b.job.ranks[1].heartbeat_real_ns = 100000000000;
  load::DecideRankStates(&b.job);
  EXPECT_EQ(b.job.ranks[0].state, RankState::kCompute);
  b.job.ranks[0].dump_heartbeat_age_s = 12;  // found silent: stopped, or wedged
  load::DecideRankStates(&b.job);
  EXPECT_EQ(b.job.ranks[0].state, RankState::kStopped);
}

// --- no-hang needs evidence ----------------------------------------------------------------

TEST(Evidence, SilentTracesAreUnknownNeverNoHang) {
  JobBuilder b(4);  // four traced ranks, none recorded a call, no stacks
  for (RankView& v : b.job.ranks) v.path = "f";
  Diagnosis d = b.Run();
  EXPECT_EQ(d.verdict, Verdict::kUnknown) << d.summary;
  EXPECT_NE(d.summary.find("none recorded a call"), std::string::npos) << d.summary;
  EXPECT_NE(d.summary.find("hangtrace dump"), std::string::npos) << d.summary;
}

// Silent because the storage gave some of them no room for their lanes:
// that is the reason said, not calls hangtrace does not wrap.
TEST(Evidence, SilentTracesTheStorageRefusedSayWhy) {
  JobBuilder b(4);
  for (RankView& v : b.job.ranks) v.path = "f";
  b.job.ranks[1].blind = b.job.ranks[3].blind = "not traced (no room in the trace folder for the record lanes of 1 thread)";
  Diagnosis d = b.Run();
  EXPECT_EQ(d.verdict, Verdict::kUnknown) << d.summary;
  EXPECT_TRUE(d.culprits.empty());
  EXPECT_EQ(d.summary.rfind("ranks 1,3 are not traced (no room in the trace folder for the record lanes of 1 thread), "
                            "and no rank recorded a call", 0),
            0u)
      << d.summary;
  EXPECT_EQ(d.summary.find("not ones hangtrace wraps"), std::string::npos) << d.summary;
}

TEST(Evidence, RanksOutsideCallsAreNoHangOnlyWhenKnownToWork) {
  JobBuilder b(2);
  b.job.records = 100;
  for (RankView& v : b.job.ranks) {
    v.path = "f";
    v.end_real_ns = 50000000000;
    v.last_record_real_ns = v.end_real_ns - 200000000;  // left a call 0.2 s ago
  }
  EXPECT_EQ(b.Run().verdict, Verdict::kNoHang);
  b.job.ranks[1].last_record_real_ns = b.job.ranks[1].end_real_ns - 40000000000;  // 40 s ago
  Diagnosis d = b.Run();
  EXPECT_EQ(d.verdict, Verdict::kUnknown) << d.summary;
  EXPECT_EQ(d.summary.rfind("rank 1 has been outside any traced call for up to 40 s", 0), 0u) << d.summary;
  // Its stacks show it computing (no blocking call): known to work.
  b.job.ranks[1].basis = Basis::kStacks;
  EXPECT_EQ(b.Run().verdict, Verdict::kNoHang);
}

TEST(Evidence, ACrashNobodyWaitsForNamesWhoCrashedFirst) {
  JobBuilder b(3);
  for (RankView& v : b.job.ranks) v.path = "f";
  for (int r : {1, 2}) {
    b.job.ranks[size_t(r)].state = RankState::kCrashed;
    b.job.ranks[size_t(r)].ending = Ending::kCrashed;
    b.job.ranks[size_t(r)].signal = 6;
  }
  b.job.ranks[1].end_real_ns = 2000000000;
  b.job.ranks[2].end_real_ns = 1000000000;  // first
  Diagnosis d = b.Run();
  EXPECT_EQ(d.verdict, Verdict::kCrash);
  ASSERT_EQ(d.culprits.size(), 1u) << d.summary;
  EXPECT_EQ(d.culprits[0].rank, 2);
  EXPECT_NE(d.culprits[0].why.find("crashed first with SIGABRT"), std::string::npos) << d.culprits[0].why;
  EXPECT_NE(d.culprits[0].why.find("rank 1 crashed after it"), std::string::npos) << d.culprits[0].why;
}

TEST(Classes, RanksAtAnotherTagOrPythonLineAreAnotherClass) {
  JobBuilder b(4);
  for (int r : {1, 3}) b.InRecv(r, 2);
  b.job.ranks[3].current.tag = 1;  // rank 1 waits for tag 0, rank 3 for tag 1
  b.InColl(0, "MPI_Allreduce", 2);
  b.InColl(2, "MPI_Allreduce", 2);
  Frame line;
  line.lang = Frame::Lang::kPython, line.func = "train_step", line.file = "/home/u/train.py", line.line = 212;
  b.job.ranks[2].user_frame = b.job.InternFrame(line);  // another line of the program
  Classes c = Classify(b.job);
  EXPECT_NE(c.class_of[1], c.class_of[3]);
  EXPECT_NE(c.class_of[0], c.class_of[2]);
}

TEST(Classes, ANativePlaceSplitsNoClassAndIsShownOnlyWhenAllAgree) {
  // A native stack read partly (from two registers) may lack the program's
  // frame: ranks in one call are one class whatever their native place, and
  // the class names a place only when every rank of it is there.
  JobBuilder b(4);
  for (int r = 0; r < 4; ++r) b.InColl(r, "MPI_Allreduce", 2);
  Frame main_line;
  main_line.func = "main", main_line.module = "/home/u/app", main_line.file = "app.c", main_line.line = 40;
  Frame other_line = main_line;
  other_line.line = 52, other_line.offset = 0x80;
  const int64_t at40 = b.job.InternFrame(main_line), at52 = b.job.InternFrame(other_line);
  for (int r : {0, 1}) b.job.ranks[size_t(r)].user_frame = at40;
  b.job.ranks[2].user_frame = at52;  // rank 3's place was not read
  Classes c = Classify(b.job);
  ASSERT_EQ(c.groups.size(), 1u);
  EXPECT_EQ(c.groups[0].ranks.Count(), 4u);
  EXPECT_EQ(c.groups[0].user_frame, -1) << "a place that not every rank shares is said of none";
  b.job.ranks[2].user_frame = at40;
  b.job.ranks[3].user_frame = at40;
  EXPECT_EQ(Classify(b.job).groups[0].user_frame, at40);
  // Nor whether its main thread's stack was read (a capture that timed out
  // on one rank under load): the trace places it in the call.
  b.job.ranks[3].main_stack_unread = true;
  EXPECT_EQ(Classify(b.job).groups.size(), 1u);
}

// --- what stacks say -----------------------------------------------------------------------

TEST(StackCalls, TheCallsOfTheLibrariesUsersRun) {
  Job job;
  auto native = [&](const char* f) {
    Frame x;
    x.func = f;
    return job.InternFrame(x);
  };
  auto python = [&](const char* f, const char* file) {
    Frame x;
    x.lang = Frame::Lang::kPython;
    x.func = f;
    x.file = file;
    return job.InternFrame(x);
  };
  const char* c10d = "/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py";
  struct Case {
    std::vector<uint32_t> frames;  // innermost first
    std::string name;
    fmt::Op op;
    StackCallKind kind;
  } cases[] = {
      // The outermost of the run of torch.distributed frames: what the program called.
      {{native("__futex_abstimed_wait_common"), native("c10d::Work::wait(std::chrono::duration<long>)"),
        python("all_gather", c10d), python("all_gather_object", c10d), python("main", "/home/u/train.py")},
       "torch.distributed.all_gather_object", fmt::Op::kAllgather, StackCallKind::kCommunication},
      {{native("pthread_cond_wait"), native("c10d::Reducer::finalize_backward()"), python("main", "/home/u/t.py")},
       "c10d::Reducer::finalize_backward", fmt::Op::kAllreduce, StackCallKind::kCommunication},
      {{native("__sched_yield"), native("PMPI_Allreduce"), native("ompi_allreduce_f"), native("mpi_allreduce_")},
       "MPI_Allreduce", fmt::Op::kAllreduce, StackCallKind::kCommunication},
      {{native("MPIR_Wait_impl"), native("mpi_recv_"), native("MAIN__")}, "MPI_RECV", fmt::Op::kRecv,
       StackCallKind::kCommunication},
      {{native("poll"), native("gloo::transport::tcp::UnboundBuffer::waitRecv(int*)")},
       "gloo::transport::tcp::UnboundBuffer::waitRecv", fmt::Op::kRecv, StackCallKind::kCommunication},
      {{native("__GI___fcntl64_nocancel"), native("__libc_fcntl64"), native("lockf_wrapper")}, "fcntl (a file lock)",
       fmt::Op::kOther, StackCallKind::kFileLock},
      {{native("clock_nanosleep"), native("sleep"), native("main")}, "clock_nanosleep", fmt::Op::kNone,
       StackCallKind::kSleep},
      {{native("expf"), native("forward")}, "", fmt::Op::kNone, StackCallKind::kNone},
  };
  const StackCalls calls(job);
  for (const Case& c : cases) {
    ThreadStack t;
    t.frames = c.frames;
    const StackCall got = calls.Find(t);
    EXPECT_EQ(got.kind, c.kind) << c.name;
    EXPECT_EQ(got.name, c.name);
    EXPECT_EQ(got.op, c.op) << c.name;
  }
  EXPECT_EQ(SyscallName("72"), "fcntl");
  EXPECT_EQ(OpOfCallName("MPI_Ireduce_scatter_block"), fmt::Op::kReducescatter);
  EXPECT_EQ(OpOfCallName("ncclAllGather"), fmt::Op::kAllgather);
}

TEST(Stages, AnotherCollectiveIsSaidAsCallsNotAsAnArgument) {
  JobBuilder b(2);
  Mismatch m;
  m.comm = 0;
  m.seq = 6;
  m.field = "op";
  RankSet most, odd;
  most.Add(0);
  odd.Add(1);
  m.values = {{"MPI_Allreduce", most}, {"MPI_Barrier", odd}};
  m.odd = odd;
  EXPECT_EQ(MismatchWhy(b.job, m, 1),
            "calls MPI_Barrier as collective #6 on world (the other members call MPI_Allreduce)");
}

TEST(Stages, DocsDescribeEveryRuleInTableOrder) {
  // docs/ANALYSIS.md has one "#### rule `NAME`" section per rule, in the
  // order of kBlameRules: a rule added here must be explained there.
  std::ifstream in(HT_SOURCE_DIR "/docs/ANALYSIS.md");
  std::stringstream doc;
  doc << in.rdbuf();
  const std::string text = doc.str();
  size_t at = 0;
  for (size_t i = 0; i < kNumBlameRules; ++i) {
    size_t found = text.find(std::string("#### rule `") + kBlameRules[i].name + "`");
    ASSERT_NE(found, std::string::npos) << "docs/ANALYSIS.md does not explain rule " << kBlameRules[i].name;
    EXPECT_GT(found, at) << kBlameRules[i].name << " is out of order in docs/ANALYSIS.md";
    at = found;
  }
  size_t sections = 0;
  for (size_t p = 0; (p = text.find("#### rule `", p)) != std::string::npos; ++p) ++sections;
  EXPECT_EQ(sections, kNumBlameRules) << "docs/ANALYSIS.md explains a rule the code does not have";
}

}  // namespace
}  // namespace hangtrace
