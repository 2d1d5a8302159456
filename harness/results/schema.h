// The lina.bench/1 schema (docs/json-schema.md) in one place: its name, and every reader and writer
// of its files. Three readers accept what their caller needs, each naming the file and the key it
// refuses:
//   validate_document / read_results_file   the full contract that `lina run` writes (every key)
//   parse_summary_file / load_summary_file  typed views of run, verify and compare files for
//                                           summarize, compare and the loop log (optional keys may
//                                           be absent; side-by-side files' rows too)
//   read_run_file                           a `lina run --json` file read back by `lina verify`
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lina::harness {

inline constexpr const char* kSchema = "lina.bench/1";

// Writes `doc` (indented) to `path`; lina::Error(runtime) naming --json on I/O errors.
void write_json_file(const std::string& path, const nlohmann::json& doc);

// Validates a parsed document: schema, kind, and every required key of tool, machine, config and
// each result row. Errors are lina::Error(invalid_argument) "file '<file>': key `<path>`: <problem>".
void validate_document(const nlohmann::json& doc, const std::string& file);
// Reads, parses and validates a results file.
nlohmann::json read_results_file(const std::string& path);
const std::vector<std::string>& required_row_keys();

// pass: check present and passed; fail: present and failed; unverified: null / missing / no pass.
enum class CheckState { pass, fail, unverified };
const char* check_label(CheckState s);

struct SummaryRow {
  std::string op, mode, shape;
  nlohmann::json shape_keys;  // object or null
  std::string backend;
  std::string impl;     // side-by-side files: lina-cuda or fla-triton (part of the key); empty elsewhere
  std::string not_run;  // side-by-side files: why this side has no timings (its `skipped` or `error`); empty when timed
  long long samples = 0;
  double median_ms = 0;
  std::optional<double> mean_ms, std_ms, min_ms, p10_ms, p90_ms;
  std::optional<double> frac_hbm, frac_tc, gbps, tflops;
  std::optional<double> clock_before, clock_after;
  bool throttled = false;
  CheckState check = CheckState::unverified;
  std::optional<double> err_ratio;
  std::string key() const;  // op|mode|shape|shape_keys[|impl]: rows match only when every shape key does
};

// The op column of a row: "op", or "op [impl]" for a side-by-side file's row.
std::string row_op_label(const SummaryRow& r);
// A side-by-side file's reference row (impl set, not lina's): shown, but neither a claim nor loop evidence.
bool is_reference_row(const SummaryRow& r);

struct SummaryComparison {
  std::string op, mode, shape;
  nlohmann::json shape_keys;
  std::optional<double> base_ms, head_ms, speedup, ci_low, ci_high, change_pct;
  std::string verdict;  // faster, slower, noise, new, removed
  CheckState check = CheckState::unverified;  // the head cell's check
  std::string key() const;
};

struct SummaryFile {
  std::filesystem::path path;
  std::string kind;  // run, verify, compare
  std::string head_sha, base_ref, base_sha, gpu, command, base_command;
  bool head_dirty = false;
  nlohmann::json gate, verdict;  // as in the file (null when absent)
  std::vector<SummaryRow> rows, base_rows;
  std::vector<SummaryComparison> comparisons;
};

// Parses and validates one document; errors name `path` and the offending key (lina::Error,
// invalid_argument -> exit 2).
SummaryFile parse_summary_file(const nlohmann::json& doc, const std::filesystem::path& path);
SummaryFile load_summary_file(const std::filesystem::path& path);

// One result row read back from a `lina run --json` file, keyed by op/mode/shape.
struct RunRow {
  std::string op, mode, shape;
  std::vector<double> times_ms;
  std::optional<bool> check_pass;  // nullopt: not verified (check null or absent)
  nlohmann::json row;              // the row as written
  std::string key() const { return op + "/" + mode + "/" + shape; }
};

struct RunFile {
  std::string git_sha, gpu;
  nlohmann::json tool, machine;
  std::vector<RunRow> rows;
};

// Reads and checks one `lina run --json` file; problems -> lina::Error naming the file and key.
RunFile read_run_file(const std::filesystem::path& file);
// The same on a document already parsed; `file` names it in errors.
RunFile parse_run_file(const nlohmann::json& doc, const std::filesystem::path& file);

}  // namespace lina::harness
