// The diagnosis as pictures: the wait-for graph (who waits for whom, the
// culprits and cycles marked) and the merged stack tree as Graphviz DOT,
// and the job's timeline as a Perfetto (Chrome trace event) file.
// docs/OUTPUTS.md shows each.
#pragma once

#include <string>

#include "merger/diagnose.h"
#include "merger/model.h"
#include "merger/report.h"

namespace hangtrace {

// What a class is doing, in a few lines: its ranks, its call (or state),
// how long, and its place in the program.
std::string ClassText(const Job& job, const Diagnosis& d, const ClassLine& l);

// The wait-for graph between the classes (ClassLines), as data (the DOT
// below and the HTML page draw it): the first `shown` classes, and an edge
// from a class to each class holding ranks it waits for (`to` -1: ranks of
// no class shown, or without a file).
struct ClassWaits {
  struct Edge {
    int from = 0, to = -1;
    RankSet ranks;              // the ranks of `to` that `from` waits for
    bool cycle = false;         // an edge of a cycle of waits
    bool into_culprit = false;  // it waits for a culprit
  };
  std::vector<ClassLine> classes;
  size_t shown = 0;
  std::vector<Edge> edges;
  RankSet culprits;
  RankSet CulpritsOf(size_t i) const;  // the culprits among class i's ranks
};
ClassWaits WaitsBetweenClasses(const Job& job, const Diagnosis& d);

// The classes of ranks as nodes (ranks, call, communicator, sequence
// number, how long), "waits for" as edges; culprits red, the edges of a
// cycle red, ranks without a file dashed. What a person looks at first.
std::string WaitGraphDot(const Job& job, const Diagnosis& d);

// The merged stack tree: Python frames shaded apart from native ones, the
// branches that hold a culprit red, the frames where ranks part ways bold,
// and the service threads every rank has (hangtrace's own, MPI's and
// gloo's progress and event loops) folded into one node each.
std::string StackTreeDot(const Job& job, const Diagnosis& d, const StackNode& root);

// A subtree of the merged stacks that is a service thread every rank has
// (hangtrace's own, MPI's, PMIx's and gloo's event loops, an idle c10d
// worker): folded into one node wherever the tree is drawn.
bool IsServiceSubtree(const Job& job, const StackNode& n);

// Writes a Perfetto/Chrome trace: a track group per rank named "rank R
// (host, pid P)", a track per thread named as the thread is, calls as
// slices, calls still in flight open to the end, and a flow arrow from each
// waiting call to the call of the rank it waits for. The ranks are the
// loader's (one process per rank); their files are read again (the Job
// keeps no records). False with `error` on failure.
bool WritePerfetto(const Job& job, const Diagnosis& d, const std::string& out, std::string* error);

// Renders DOT to SVG into `svg_fd` with Graphviz's `dot`, when it is
// installed; false with the reason otherwise.
bool RenderSvg(const std::string& dot_text, int svg_fd, std::string* error);

}  // namespace hangtrace
