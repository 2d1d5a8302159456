// Each `lina` subcommand registers itself on the app; its callback returns the process exit code.
#pragma once
#include <CLI/CLI.hpp>
#include <optional>
#include <string>

namespace lina::cli {

// Documented exit codes (docs/architecture.md section 4).
enum Exit : int {
  kOk = 0,
  kGateFailed = 1,
  kUsage = 2,
  kBaselineFailed = 3,
  kGateSelectedNothing = 4,
  kRegression = 5,
};

// The whole text as a number (std::stod alone accepts "5abc"); nullopt if it is not one.
inline std::optional<double> parse_number(const std::string& text) {
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size()) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

// Percentages such as --threshold: CLI11's Range lets NaN through (every comparison is false).
inline const CLI::Validator kPercent(
    [](std::string& text) -> std::string {
      const std::optional<double> v = parse_number(text);
      if (!v) return "got '" + text + "', expected a number";
      if (!(*v >= 0.0 && *v <= 1000.0)) return "got " + text + ", expected a percentage in [0, 1000]";
      return {};
    },
    "PCT");

// Seeds: a decimal integer in [0, 2^64) (CLI11 would wrap "-1" or print an unreadable range).
inline const CLI::Validator kSeed(
    [](std::string& text) -> std::string {
      if (text.empty() || text.size() > 20 || text.find_first_not_of("0123456789") != std::string::npos)
        return "got '" + text + "', expected an integer in [0, 2^64)";
      if (text.size() == 20 && text > "18446744073709551615") return "got '" + text + "', expected an integer in [0, 2^64)";
      return {};
    },
    "SEED");

// Counts and amounts with a lower bound (CLI11's PositiveNumber / NonNegativeNumber print the
// double range "0.000000 to 1797693...": unreadable). integer: no fraction, no exponent.
inline CLI::Validator at_least(double min, bool integer) {
  const std::string expected = std::string(integer ? "an integer" : "a number") + " >= " +
                               (integer ? std::to_string(static_cast<long long>(min)) : CLI::detail::to_string(min));
  return CLI::Validator(
      [min, integer, expected](std::string& text) -> std::string {
        const std::optional<double> v = parse_number(text);
        if (!v || (integer && text.find_first_not_of("+-0123456789") != std::string::npos))
          return "got '" + text + "', expected " + expected;
        if (!(*v >= min)) return "got " + text + ", expected " + expected;
        return {};
      },
      integer ? "INT" : "NUM");
}
// Refs and paths: an empty value would silently mean "none" (`--base ""` would verify without a baseline).
inline const CLI::Validator kNonEmpty(
    [](std::string& text) -> std::string { return text.empty() ? "got '', expected a non-empty value" : std::string(); }, "TEXT");

inline const CLI::Validator kPositiveInt = at_least(1, true);
inline const CLI::Validator kNonNegativeInt = at_least(0, true);
inline const CLI::Validator kNonNegative = at_least(0, false);

// `--safe-gate on|off` of run, verify and compare: chunk_kda's cells with safe_gate=True and lower_bound -5 (on,
// FLA's registry, the default) or neither (off: FLA's KDA layer default); the other ops have no safe_gate.
inline CLI::Option* add_safe_gate_option(CLI::App& sub, std::string& value) {
  return sub.add_option("--safe-gate", value,
                        "chunk_kda's cells: safe_gate=True with lower_bound -5 (on, FLA's registry, default) or neither (off: "
                        "FLA's KDA layer)")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return text == "on" || text == "off" ? std::string() : "got '" + text + "', expected on or off";
          },
          "on|off"));
}

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
void register_merge(CLI::App& app, Outcome& outcome);
void register_cmd(CLI::App& app, Outcome& outcome);
void register_profile(CLI::App& app, Outcome& outcome);
void register_train_bench(CLI::App& app, Outcome& outcome);
void register_gen_bench(CLI::App& app, Outcome& outcome);

}  // namespace lina::cli
