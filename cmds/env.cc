// hangtrace env: the environment variables the runtime reads, from the one
// table in tracer/config.h.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cmds/commands.h"
#include "tracer/config.h"

namespace hangtrace {

int EnvCommand(int argc, char** argv) {
  CLI::App app{"List the HANGTRACE_* environment variables the traced process reads.", "hangtrace env"};
  bool markdown = false;
  app.add_flag("--markdown", markdown, "print a Markdown table (the README's environment table)");
  HT_PARSE(app, argc, argv);
  int n = 0;
  const SettingDoc* docs = SettingDocs(&n);
  if (markdown) {
    printf("| variable | default | meaning |\n| --- | --- | --- |\n");
    for (int i = 0; i < n; ++i) {
      printf("| `%s` | `%s` | %s |\n", docs[i].env, *docs[i].default_value ? docs[i].default_value : "(unset)",
             docs[i].description);
    }
    return 0;
  }
  for (int i = 0; i < n; ++i) {
    printf("%-20s default %s\n    %s\n", docs[i].env,
           *docs[i].default_value ? docs[i].default_value : "(unset)", docs[i].description);
  }
  return 0;
}

}  // namespace hangtrace
