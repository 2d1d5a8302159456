// Subcommands whose implementation has not landed yet: each says so and exits 2.
// Every implemented command deletes its line here and defines register_<name> in cli/<name>.cpp.
#include <cstdio>

#include "cli/commands.h"

namespace lina::cli {
namespace {
void pending(CLI::App& app, Outcome& outcome, const char* name, const char* what) {
  auto* sub = app.add_subcommand(name, what);
  sub->allow_extras();
  sub->callback([&outcome, name] {
    std::fprintf(stderr, "lina %s: not available in this build yet\n", name);
    outcome.code = kUsage;
  });
}
}  // namespace

void register_loop(CLI::App& app, Outcome& o) { pending(app, o, "loop", "Optimization-loop log"); }
void register_compare(CLI::App& app, Outcome& o) { pending(app, o, "compare", "Compare two git refs"); }
void register_summarize(CLI::App& app, Outcome& o) { pending(app, o, "summarize", "Summarize result files"); }
void register_cmd(CLI::App& app, Outcome& o) { pending(app, o, "cmd", "Print one safe command"); }
void register_profile(CLI::App& app, Outcome& o) { pending(app, o, "profile", "Nsight Compute hand-off"); }

}  // namespace lina::cli
