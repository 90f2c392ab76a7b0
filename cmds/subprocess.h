// Running another program from a subcommand (srun-dump runs squeue, scontrol
// and srun; auto-report runs this binary's dump): one helper, with a
// deadline, so that a program that does not end cannot hold the caller.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace hangtrace {

// Runs argv, capturing stdout and stderr; kills it (TERM, then KILL) after
// `timeout_s`. Returns the exit status, -1 when it could not run, -2 on
// timeout. `tick`, when given, is called with the seconds spent while it runs.
int Capture(const std::vector<std::string>& argv, double timeout_s, std::string* out, std::string* err,
            const std::function<void(double)>& tick = {});

// This binary's path (/proc/self/exe), or "hangtrace".
std::string SelfPath();

}  // namespace hangtrace
