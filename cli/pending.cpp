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

void register_list(CLI::App& app, Outcome& o) { pending(app, o, "list", "List the registered ops"); }
void register_run(CLI::App& app, Outcome& o) { pending(app, o, "run", "Benchmark ops"); }
void register_verify(CLI::App& app, Outcome& o) { pending(app, o, "verify", "Gate, then time candidate vs baseline"); }
void register_check(CLI::App& app, Outcome& o) { pending(app, o, "check", "Run one op on .npy inputs and compare with the reference"); }

}  // namespace lina::cli
