// The gate as a black box: a GoogleTest executable per op (tests/gate/<op>_gate.cpp) is listed,
// filtered with a pytest-style keyword expression, run with --gtest_output=json, and its report
// is read back into counts, an outcome and the failing tests' messages.
#pragma once
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lina::harness {

// FLA's `-k`: words joined by `and`, `or`, `not` and parentheses (precedence not > and > or).
// A word matches when it is a case-sensitive substring of the full test name ("Suite.Test").
class KeywordExpr {
 public:
  // Longest expression and deepest nesting (parentheses and `not`) taken: far beyond a real filter,
  // short of exhausting the stack of the recursive parser and matcher.
  static constexpr std::size_t kMaxLength = 4096;
  static constexpr int kMaxDepth = 64;
  // Throws lina::Error (invalid_argument, argument "--gate-k") on a syntax error or past those limits.
  static KeywordExpr parse(const std::string& text);
  bool matches(const std::string& test_name) const;
  const std::string& text() const { return text_; }

  struct Node;
 private:
  std::string text_;
  std::shared_ptr<const Node> root_;
};

enum class GateStatus { green, partial, red, empty };
std::string gate_status_name(GateStatus s);  // "green", "partial", "red", "empty"

struct GateTest {
  std::string name;     // "ChunkGla/Fwd.B2_T1024_H4_D128"
  std::string result;   // "passed", "failed", "skipped"
  std::string message;  // failure or skip messages, joined
  double time_s = 0;
};

struct GateResult {
  std::string suite;     // executable path
  std::string filter;    // the --gate-k expression; empty = the full gate
  int selected = 0, passed = 0, failed = 0, skipped = 0;
  GateStatus status = GateStatus::empty;
  std::vector<GateTest> tests;  // every selected test that reported
  std::string problem;          // crash / missing report / exit code mismatch, when there was one
  int exit_code = 0;            // the gate process's exit status
  std::string output_tail;      // last part of the gate's stdout+stderr
  std::string log_path;         // full gate output (when a log directory was given)
  // The lina build the suite reports (top-level "lina_git_sha" of its report; absent: a suite built
  // before the suites recorded it, or not a lina suite)
  std::optional<std::string> build_sha;
};

// Parses `--gtest_list_tests` output into full names ("Suite.Test"), comments dropped.
std::vector<std::string> parse_gtest_list(const std::string& text);
// Parses a GoogleTest JSON report (1.10 .. 1.14) into per-test results and counts (status not set).
GateResult parse_gtest_json(const std::string& json_text);
// Counts and problems -> the outcome (filtered or skipped -> partial; any failure or problem -> red).
GateStatus classify_gate(const GateResult& r);

struct GateRunOptions {
  std::filesystem::path executable;
  std::string k_expr;                         // empty: every test
  std::map<std::string, std::string> env;     // extra environment for the gate (e.g. LINA_FAULT_INJECT)
  std::optional<std::filesystem::path> log_dir;  // keep gate_output.txt + gate_report.json here
};

// Lists, selects, runs. A selection of nothing returns status empty without running anything.
// An executable that cannot be listed -> lina::Error (invalid_argument, "gate").
GateResult run_gate(const GateRunOptions& opts);

// tests/lina_<op>_gate next to this build: $LINA_GATE_DIR, then <exe dir>/../tests, then <exe dir>.
// Not found -> lina::Error naming every place looked at.
std::filesystem::path find_gate_executable(const std::string& op, const std::filesystem::path& self_exe);

}  // namespace lina::harness
