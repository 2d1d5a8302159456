// Reading lina.bench/1 files for `lina summarize` (and the loop log): validated, typed views of
// run / verify / compare files, ranking by change, and the final-claim statistics block.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lina::harness {

inline constexpr const char* kSchema = "lina.bench/1";

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

struct SummaryOptions {
  double threshold_pct = 5.0;
  int top = 0;  // 0: every comparison
};

// Comparisons ranked by |change_pct|, largest first; new/removed rows last.
std::vector<SummaryComparison> ranked(const std::vector<SummaryComparison>& cmps);
// Geometric mean of speedups over the cells that have one; nullopt when none.
std::optional<double> geomean_speedup(const std::vector<SummaryComparison>& cmps);
// REGRESSION / IMPROVED / within noise / new / removed / "" (below threshold).
std::string change_flag(const SummaryComparison& c, double threshold_pct);

// FAILED check / UNVERIFIED / THROTTLED / NOT RUN lines for the head cells of `f` (a side-by-side file's FLA rows are the
// reference, not claims: only NOT RUN applies to them).
std::vector<std::string> claim_warnings(const SummaryFile& f);

std::string render_summary_text(const std::vector<SummaryFile>& files, const SummaryOptions& opt);
std::string render_summary_markdown(const std::vector<SummaryFile>& files, const SummaryOptions& opt);

}  // namespace lina::harness
