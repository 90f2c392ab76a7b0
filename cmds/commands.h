// The subcommands of `hangtrace`, one source file each (cmds/<name>.cc).
#pragma once

namespace hangtrace {

int RunCommand(int argc, char** argv);      // run.cc
int InspectCommand(int argc, char** argv);  // inspect.cc
int EnvCommand(int argc, char** argv);      // env.cc
int AnalyzeCommand(int argc, char** argv);  // analyze.cc
int SimulateCommand(int argc, char** argv);  // simulate.cc
int DumpCommand(int argc, char** argv);      // dump.cc
int SrunDumpCommand(int argc, char** argv);  // srun_dump.cc

struct CommandEntry {
  const char* name;
  const char* summary;
  int (*main)(int argc, char** argv);
};

}  // namespace hangtrace
