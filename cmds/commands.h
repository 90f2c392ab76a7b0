// The subcommands of `hangtrace`, one source file each (cmds/<name>.cc).
#pragma once

#include <cstddef>
#include <string>

namespace CLI {
class App;
class Validator;
}

namespace hangtrace {

int RunCommand(int argc, char** argv);      // run.cc
int InspectCommand(int argc, char** argv);  // inspect.cc
int EnvCommand(int argc, char** argv);      // env.cc
int AnalyzeCommand(int argc, char** argv);  // analyze.cc
int SimulateCommand(int argc, char** argv);  // simulate.cc
int DumpCommand(int argc, char** argv);      // dump.cc
int SrunDumpCommand(int argc, char** argv);  // srun_dump.cc
int LsCommand(int argc, char** argv);        // ls.cc
int CleanCommand(int argc, char** argv);     // clean.cc
int AutoReportCommand(int argc, char** argv);  // auto_report.cc

// Exit status of every subcommand that judges a job (analyze, srun-dump):
// documented in --help and the README ("Exit status").
enum ExitStatus : int {
  kExitNoHang = 0,      // nothing wrong found (or a command that succeeded)
  kExitCouldNot = 1,    // could not analyze: no readable file, a path that cannot be used;
                        // or the verdict is `unknown` (the evidence cannot decide)
  kExitUsage = 2,       // a usage error
  kExitFound = 3,       // a hang, deadlock, mismatch or crash was found
};

// A number of seconds, 0 or more: "--timeout: -1 is not a number of
// seconds >= 0" (CLI11's own range check prints DBL_MAX in 300 digits).
const CLI::Validator& Seconds();

// Levenshtein distance, for "did you mean" (main.cc).
size_t EditDistance(const std::string& a, const std::string& b);

// After a parse error: "did you mean --format?" for an option that is near
// one of the command's own (on stderr; nothing when none is near).
void SuggestOption(const CLI::App& app, int argc, char** argv);

// CLI11_PARSE with the documented status: --help 0, a usage error 2 (CLI11's
// own codes are 100 and up), and a suggestion for a misspelt option.
#define HT_PARSE(app, argc, argv)                                \
  try {                                                          \
    (app).parse((argc), (argv));                                 \
  } catch (const CLI::ParseError& e) {                           \
    const int ht_code = (app).exit(e);                           \
    if (ht_code != 0) ::hangtrace::SuggestOption((app), (argc), (argv)); \
    return ht_code == 0 ? 0 : ::hangtrace::kExitUsage;           \
  }

struct CommandEntry {
  const char* name;
  const char* summary;
  int (*main)(int argc, char** argv);
};

}  // namespace hangtrace
