// Result rows of the lina.bench/1 schema (docs/json-schema.md) and the run document that carries
// them; reading, validating and writing files is harness/results/schema.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/engine/stats.h"
#include "harness/results/schema.h"
#include "harness/engine/workload.h"

namespace lina::harness {

struct TensorCheck {
  std::string name;  // o, ht, dq, ...
  double err_ratio = 0, max_abs = 0, tolerance = 0;
  bool has_nan = false, pass = false;
};

// The correctness check of one cell. pass is null when no check could run (reason says why).
struct CheckResult {
  std::string reference;  // "fp64-host" | "fp32-gpu" | "none"
  std::optional<bool> pass;
  std::optional<double> tolerance, err_ratio, max_abs;  // of the worst tensor (largest err_ratio / tolerance)
  std::string reason;                                  // set when pass is null
  std::vector<TensorCheck> tensors;
};

struct ResultRow {
  std::string op, mode, shape;
  ShapeKeys keys;
  std::string backend, timer;
  std::vector<std::string> kernels;
  std::vector<double> times_ms;
  Summary stats;
  double noise = 0;
  std::string stop_reason;
  double bytes = 0, flops = 0, gbps = 0, tflops = 0, frac_hbm = 0, frac_tc = 0, ns_per_token_head = 0;
  std::string bytes_model, flops_model;
  std::optional<double> peak_mem_bytes;
  std::optional<double> sm_clock_before, sm_clock_after;
  bool throttled = false;
  CheckResult check;
};

// Fills stats / noise-independent derived fields (gbps, tflops, fractions, ns per token-head) from
// times_ms, bytes, flops and the ceilings.
void derive(ResultRow& row, double hbm_gbps, double bf16_tflops, double token_heads);

nlohmann::json to_json(const ShapeKeys& k);
nlohmann::json to_json(const CheckResult& c);
nlohmann::json to_json(const ResultRow& r);
ResultRow row_from_json(const nlohmann::json& j);  // assumes a validated row

// A `kind: run` document with empty gate / baseline / comparisons / verdict.
nlohmann::json make_run_document(const nlohmann::json& tool, const nlohmann::json& machine,
                                 const nlohmann::json& config, const std::vector<ResultRow>& rows,
                                 const nlohmann::json& failures = nlohmann::json::array());

}  // namespace lina::harness
