// Each `lina` subcommand registers itself on the app; its callback returns the process exit code.
#pragma once
#include <CLI/CLI.hpp>

namespace lina::cli {

// Documented exit codes (DESIGN section 4).
enum Exit : int {
  kOk = 0,
  kGateFailed = 1,
  kUsage = 2,
  kBaselineFailed = 3,
  kGateSelectedNothing = 4,
  kRegression = 5,
};

// The subcommand that ran stores its exit code here.
struct Outcome {
  int code = kOk;
};

void register_list(CLI::App& app, Outcome& outcome);
void register_run(CLI::App& app, Outcome& outcome);
void register_verify(CLI::App& app, Outcome& outcome);
void register_check(CLI::App& app, Outcome& outcome);
void register_loop(CLI::App& app, Outcome& outcome);
void register_compare(CLI::App& app, Outcome& outcome);
void register_summarize(CLI::App& app, Outcome& outcome);
void register_cmd(CLI::App& app, Outcome& outcome);
void register_profile(CLI::App& app, Outcome& outcome);
void register_train_bench(CLI::App& app, Outcome& outcome);

}  // namespace lina::cli
