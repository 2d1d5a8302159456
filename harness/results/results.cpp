#include "harness/results/results.h"

#include <algorithm>
#include <fstream>
#include <sstream>

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

void write_json_file(const std::string& path, const json& doc) {
  std::ofstream f(path);
  if (!f) throw Error(ErrorCode::runtime, "--json", "cannot open '" + path + "' for writing");
  f << doc.dump(2) << "\n";
  if (!f) throw Error(ErrorCode::runtime, "--json", "writing '" + path + "' failed");
}

const std::vector<std::string>& required_row_keys() {
  static const std::vector<std::string> keys{
      "op",    "mode",   "shape",  "shape_keys", "backend", "kernels", "samples",  "times_ms", "median_ms",
      "mean_ms", "std_ms", "min_ms", "p10_ms",   "p20_ms",  "p80_ms",  "p90_ms",   "noise",    "stop_reason",
      "bytes", "flops",  "gbps",   "tflops",     "frac_hbm", "frac_tc", "peak_mem_bytes", "sm_clock_mhz",
      "throttled", "check"};
  return keys;
}

namespace {
[[noreturn]] void bad(const std::string& file, const std::string& key, const std::string& problem) {
  throw Error(ErrorCode::invalid_argument, key, "file '" + file + "': key `" + key + "`: " + problem);
}

void require_keys(const json& obj, const std::string& prefix, const std::vector<std::string>& keys, const std::string& file) {
  if (!obj.is_object()) bad(file, prefix, "expected an object, seen " + std::string(obj.type_name()));
  for (const auto& k : keys)
    if (!obj.contains(k)) bad(file, prefix.empty() ? k : prefix + "." + k, "missing");
}

void require_type(const json& v, bool ok, const std::string& file, const std::string& key, const std::string& expected) {
  if (!ok) bad(file, key, "expected " + expected + ", seen " + v.dump());
}
}  // namespace

void validate_document(const json& doc, const std::string& file) {
  if (!doc.is_object()) bad(file, "(top level)", "expected a JSON object");
  if (!doc.contains("schema")) bad(file, "schema", "missing (expected \"" + std::string(kSchema) + "\")");
  if (doc["schema"] != kSchema) bad(file, "schema", "seen " + doc["schema"].dump() + ", expected \"" + kSchema + "\"");
  require_keys(doc, "", {"kind", "tool", "machine", "config", "results"}, file);
  const auto& kind = doc["kind"];
  require_type(kind, kind == "run" || kind == "verify" || kind == "compare", file, "kind", "run, verify or compare");
  require_keys(doc["tool"], "tool", {"name", "version", "git_sha", "git_dirty"}, file);
  require_keys(doc["machine"], "machine",
               {"gpu", "sm_count", "compute_capability", "driver", "cuda_runtime", "compiler", "host", "cpu", "ceilings"}, file);
  require_keys(doc["machine"]["ceilings"], "machine.ceilings", {"hbm_gbps", "bf16_tflops", "source"}, file);
  require_keys(doc["config"], "config",
               {"seed", "backend", "l2_flush", "graphs", "min_samples", "max_noise", "time_budget_s", "command"}, file);
  const auto& rows = doc["results"];
  require_type(rows, rows.is_array(), file, "results", "an array");
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::string p = "results[" + std::to_string(i) + "]";
    const auto& r = rows[i];
    require_keys(r, p, required_row_keys(), file);
    require_keys(r["shape_keys"], p + ".shape_keys", {"B", "T", "H", "HV", "K", "V", "varlen", "num_seqs"}, file);
    require_keys(r["sm_clock_mhz"], p + ".sm_clock_mhz", {"before", "after"}, file);
    require_keys(r["check"], p + ".check", {"reference", "tolerance", "err_ratio", "max_abs", "pass", "tensors"}, file);
    require_type(r["times_ms"], r["times_ms"].is_array(), file, p + ".times_ms", "an array of numbers");
    for (const auto& t : r["times_ms"]) require_type(t, t.is_number(), file, p + ".times_ms", "an array of numbers");
    for (const char* k : {"median_ms", "mean_ms", "std_ms", "min_ms", "p10_ms", "p20_ms", "p80_ms", "p90_ms", "noise",
                          "bytes", "flops", "gbps", "tflops", "frac_hbm", "frac_tc"})
      require_type(r[k], r[k].is_number(), file, p + "." + k, "a number");
    for (const char* k : {"op", "mode", "shape", "backend", "stop_reason"})
      require_type(r[k], r[k].is_string(), file, p + "." + k, "a string");
    require_type(r["check"]["pass"], r["check"]["pass"].is_boolean() || r["check"]["pass"].is_null(), file,
                 p + ".check.pass", "true, false or null");
  }
}

json read_results_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw Error(ErrorCode::invalid_argument, path, "file '" + path + "': cannot be read");
  json doc;
  try {
    doc = json::parse(f);
  } catch (const json::parse_error& e) {
    throw Error(ErrorCode::invalid_argument, path, "file '" + path + "': not valid JSON (" + e.what() + ")");
  }
  validate_document(doc, path);
  return doc;
}

}  // namespace lina::harness
