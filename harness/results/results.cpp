#include "harness/results/results.h"

#include <algorithm>

#include "lina/error.h"

namespace lina::harness {

using nlohmann::json;

namespace {
json opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }
std::optional<double> opt_double(const json& j) {
  if (j.is_null()) return std::nullopt;
  return j.get<double>();
}
}  // namespace

void derive(ResultRow& r, double hbm_gbps, double bf16_tflops, double token_heads) {
  r.stats = summarize(r.times_ms);
  r.noise = r.stats.noise();
  const double s = r.stats.median * 1e-3;
  r.gbps = s > 0 ? r.bytes / s / 1e9 : 0;
  r.tflops = s > 0 ? r.flops / s / 1e12 : 0;
  r.frac_hbm = hbm_gbps > 0 ? r.gbps / hbm_gbps : 0;
  r.frac_tc = bf16_tflops > 0 ? r.tflops / bf16_tflops : 0;
  r.ns_per_token_head = token_heads > 0 ? r.stats.median * 1e6 / token_heads : 0;
}

json to_json(const ShapeKeys& k) {
  return {{"B", k.B},   {"T", k.T}, {"H", k.H}, {"HV", k.HV}, {"K", k.K}, {"V", k.V},
          {"varlen", k.varlen ? json(*k.varlen) : json(nullptr)}, {"num_seqs", k.num_seqs}};
}

json to_json(const CheckResult& c) {
  json tensors = json::array();
  for (const auto& t : c.tensors)
    tensors.push_back({{"name", t.name}, {"err_ratio", t.err_ratio}, {"max_abs", t.max_abs},
                       {"tolerance", t.tolerance}, {"has_nan", t.has_nan}, {"pass", t.pass}});
  return {{"reference", c.reference}, {"pass", c.pass ? json(*c.pass) : json(nullptr)},
          {"tolerance", opt(c.tolerance)}, {"err_ratio", opt(c.err_ratio)}, {"max_abs", opt(c.max_abs)},
          {"reason", c.reason.empty() ? json(nullptr) : json(c.reason)}, {"tensors", tensors}};
}

json to_json(const ResultRow& r) {
  return {{"op", r.op},
          {"mode", r.mode},
          {"shape", r.shape},
          {"shape_keys", to_json(r.keys)},
          {"backend", r.backend},
          {"timer", r.timer},
          {"kernels", r.kernels},
          {"samples", r.times_ms.size()},
          {"times_ms", r.times_ms},
          {"median_ms", r.stats.median},
          {"mean_ms", r.stats.mean},
          {"std_ms", r.stats.std},
          {"min_ms", r.stats.min},
          {"p10_ms", r.stats.p10},
          {"p20_ms", r.stats.p20},
          {"p80_ms", r.stats.p80},
          {"p90_ms", r.stats.p90},
          {"noise", r.noise},
          {"stop_reason", r.stop_reason},
          {"bytes", r.bytes},
          {"flops", r.flops},
          {"bytes_model", r.bytes_model},
          {"flops_model", r.flops_model},
          {"gbps", r.gbps},
          {"tflops", r.tflops},
          {"frac_hbm", r.frac_hbm},
          {"frac_tc", r.frac_tc},
          {"ns_per_token_head", r.ns_per_token_head},
          {"peak_mem_bytes", opt(r.peak_mem_bytes)},
          {"sm_clock_mhz", {{"before", opt(r.sm_clock_before)}, {"after", opt(r.sm_clock_after)}}},
          {"throttled", r.throttled},
          {"check", to_json(r.check)}};
}

ResultRow row_from_json(const json& j) {
  ResultRow r;
  r.op = j.at("op");
  r.mode = j.at("mode");
  r.shape = j.at("shape");
  const auto& k = j.at("shape_keys");
  r.keys = ShapeKeys{k.at("B"), k.at("T"), k.at("H"), k.at("HV"), k.at("K"), k.at("V"),
                     k.at("varlen").is_null() ? std::nullopt : std::optional<std::string>(k.at("varlen").get<std::string>()),
                     k.at("num_seqs")};
  r.backend = j.at("backend");
  r.timer = j.value("timer", "");
  r.kernels = j.at("kernels").get<std::vector<std::string>>();
  r.times_ms = j.at("times_ms").get<std::vector<double>>();
  r.stats.n = r.times_ms.size();
  r.stats.median = j.at("median_ms");
  r.stats.mean = j.at("mean_ms");
  r.stats.std = j.at("std_ms");
  r.stats.min = j.at("min_ms");
  r.stats.p10 = j.at("p10_ms");
  r.stats.p20 = j.at("p20_ms");
  r.stats.p80 = j.at("p80_ms");
  r.stats.p90 = j.at("p90_ms");
  r.stats.max = r.times_ms.empty() ? 0 : *std::max_element(r.times_ms.begin(), r.times_ms.end());
  r.noise = j.at("noise");
  r.stop_reason = j.at("stop_reason");
  r.bytes = j.at("bytes");
  r.flops = j.at("flops");
  r.bytes_model = j.value("bytes_model", "");
  r.flops_model = j.value("flops_model", "");
  r.gbps = j.at("gbps");
  r.tflops = j.at("tflops");
  r.frac_hbm = j.at("frac_hbm");
  r.frac_tc = j.at("frac_tc");
  r.ns_per_token_head = j.value("ns_per_token_head", 0.0);
  r.peak_mem_bytes = opt_double(j.at("peak_mem_bytes"));
  r.sm_clock_before = opt_double(j.at("sm_clock_mhz").at("before"));
  r.sm_clock_after = opt_double(j.at("sm_clock_mhz").at("after"));
  r.throttled = j.at("throttled");
  const auto& c = j.at("check");
  r.check.reference = c.at("reference");
  if (!c.at("pass").is_null()) r.check.pass = c.at("pass").get<bool>();
  r.check.tolerance = opt_double(c.at("tolerance"));
  r.check.err_ratio = opt_double(c.at("err_ratio"));
  r.check.max_abs = opt_double(c.at("max_abs"));
  if (c.contains("reason") && c["reason"].is_string()) r.check.reason = c["reason"];
  for (const auto& t : c.at("tensors"))
    r.check.tensors.push_back({t.at("name"), t.at("err_ratio"), t.at("max_abs"), t.at("tolerance"), t.at("has_nan"), t.at("pass")});
  return r;
}

json make_run_document(const json& tool, const json& machine, const json& config, const std::vector<ResultRow>& rows,
                       const json& failures) {
  json results = json::array();
  for (const auto& r : rows) results.push_back(to_json(r));
  return {{"schema", kSchema}, {"kind", "run"},         {"tool", tool},          {"machine", machine},
          {"config", config},  {"results", results},    {"failures", failures},  {"gate", nullptr},
          {"baseline", nullptr}, {"comparisons", json::array()}, {"verdict", nullptr}};
}


}  // namespace lina::harness
