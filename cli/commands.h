// Each `lina` subcommand registers itself on the app; its callback returns the process exit code.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

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

// Percentages such as --threshold: CLI11's Range lets NaN through (every comparison is false).
inline const CLI::Validator kPercent(
    [](std::string& text) -> std::string {
      double v = 0;
      try {
        std::size_t used = 0;
        v = std::stod(text, &used);
        if (used != text.size()) return "got '" + text + "', expected a number";
      } catch (const std::exception&) {
        return "got '" + text + "', expected a number";
      }
      if (!(v >= 0.0 && v <= 1000.0)) return "got " + text + ", expected a percentage in [0, 1000]";
      return {};
    },
    "PCT");

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
