// Terminal output of a run: an aligned table grouped by mode, then shape, and the progress line.
#pragma once
#include <string>
#include <vector>

#include "harness/results/results.h"

namespace lina::harness {

// Columns: op, mode, shape, median ms, p10-p90 ms, ns/th, GB/s, %HBM, TFLOP/s, check. Rows are
// ordered by mode (fwd, infer, bwd, fwdbwd), then by shape in first-seen order, then by op; a
// blank line separates modes. Numeric columns are right-aligned.
std::string format_table(const std::vector<ResultRow>& rows);

// One-word state of a row's check: "pass", "FAIL", "n/a" (no reference could run) or "off".
std::string check_word(const CheckResult& c);

// "[3/12] chunk_gla fwd B1_T256_H2_D64 ..." (no newline; the caller rewrites it in place).
std::string progress_line(std::size_t index, std::size_t total, const std::string& op, const std::string& mode,
                          const std::string& shape, const std::string& state);

}  // namespace lina::harness
