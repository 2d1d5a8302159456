#include "harness/results/schema.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "harness/util/json_file.h"
#include "harness/util/text_file.h"
#include "lina/error.h"

namespace lina::harness {
namespace fs = std::filesystem;
using nlohmann::json;

// ---- writing ----

void write_json_file(const std::string& path, const json& doc) { write_file_atomically(path, doc.dump(2) + "\n", "--json"); }

// ---- the full contract of a run file ----

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
  const json doc = read_json_file(path);
  validate_document(doc, path);
  return doc;
}

// ---- typed views for summarize, compare and the loop log ----

const char* check_label(CheckState s) {
  switch (s) {
    case CheckState::pass: return "pass";
    case CheckState::fail: return "FAIL";
    case CheckState::unverified: return "UNVERIFIED";
  }
  return "?";
}

namespace {

// Field readers: every error names the file and the full key path ("results[2].median_ms").
struct Reader {
  const fs::path& path;
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    throw Error(ErrorCode::invalid_argument, key, path.string() + ": key `" + key + "`: " + what);
  }
  static const char* type_name(const json& v) { return v.type_name(); }
  const json* find(const json& obj, const std::string& k) const {
    auto it = obj.find(k);
    return it == obj.end() ? nullptr : &*it;
  }
  std::string req_string(const json& obj, const std::string& k, const std::string& ctx) const {
    const json* v = find(obj, k);
    if (!v) fail(ctx + k, "missing (expected a string)");
    if (!v->is_string()) fail(ctx + k, std::string("expected a string, found ") + type_name(*v));
    return v->get<std::string>();
  }
  std::string opt_string(const json& obj, const std::string& k, const std::string& ctx) const {
    const json* v = find(obj, k);
    if (!v || v->is_null()) return {};
    if (!v->is_string()) fail(ctx + k, std::string("expected a string or null, found ") + type_name(*v));
    return v->get<std::string>();
  }
  double req_number(const json& obj, const std::string& k, const std::string& ctx) const {
    const json* v = find(obj, k);
    if (!v) fail(ctx + k, "missing (expected a number)");
    if (!v->is_number()) fail(ctx + k, std::string("expected a number, found ") + type_name(*v));
    return v->get<double>();
  }
  std::optional<double> opt_number(const json& obj, const std::string& k, const std::string& ctx) const {
    const json* v = find(obj, k);
    if (!v || v->is_null()) return std::nullopt;
    if (!v->is_number()) fail(ctx + k, std::string("expected a number or null, found ") + type_name(*v));
    return v->get<double>();
  }
  // A count stored as a JSON number: integral and within what a long long and a double hold exactly.
  long long opt_count(const json& obj, const std::string& k, const std::string& ctx) const {
    const std::optional<double> v = opt_number(obj, k, ctx);
    if (!v) return 0;
    if (!(*v >= 0 && *v <= 9007199254740992.0) || std::floor(*v) != *v)
      fail(ctx + k, "seen " + find(obj, k)->dump() + ", expected an integer in [0, 2^53]");
    return static_cast<long long>(*v);
  }
  // A time or a ratio: finite and > 0.
  std::optional<double> opt_positive(const json& obj, const std::string& k, const std::string& ctx) const {
    const std::optional<double> v = opt_number(obj, k, ctx);
    if (v && !(*v > 0 && std::isfinite(*v))) fail(ctx + k, "seen " + find(obj, k)->dump() + ", expected a positive number");
    return v;
  }
  bool opt_bool(const json& obj, const std::string& k, const std::string& ctx) const {
    const json* v = find(obj, k);
    if (!v || v->is_null()) return false;
    if (!v->is_boolean()) fail(ctx + k, std::string("expected a bool, found ") + type_name(*v));
    return v->get<bool>();
  }
  const json* opt_object(const json& obj, const std::string& k, const std::string& ctx) const {
    const json* v = find(obj, k);
    if (!v || v->is_null()) return nullptr;
    if (!v->is_object()) fail(ctx + k, std::string("expected an object or null, found ") + type_name(*v));
    return v;
  }
  const json& req_array(const json& obj, const std::string& k, const std::string& ctx) const {
    const json* v = find(obj, k);
    if (!v) fail(ctx + k, "missing (expected an array)");
    if (!v->is_array()) fail(ctx + k, std::string("expected an array, found ") + type_name(*v));
    return *v;
  }
};

std::string cell_key(const std::string& op, const std::string& mode, const std::string& shape, const json& keys) {
  // nlohmann::json objects keep keys sorted, so dump() is canonical.
  return op + "|" + mode + "|" + shape + "|" + keys.dump();
}

SummaryRow parse_row(const Reader& r, const json& row, const std::string& ctx) {
  if (!row.is_object()) r.fail(ctx.substr(0, ctx.size() - 1), std::string("expected an object, found ") + row.type_name());
  SummaryRow s;
  s.op = r.req_string(row, "op", ctx);
  s.mode = r.req_string(row, "mode", ctx);
  s.shape = r.req_string(row, "shape", ctx);
  if (const json* k = r.opt_object(row, "shape_keys", ctx)) s.shape_keys = *k;
  s.backend = r.opt_string(row, "backend", ctx);
  s.impl = r.opt_string(row, "impl", ctx);
  if (!r.find(row, "median_ms")) {  // a side-by-side side that could not run says why instead of timing
    for (const char* why : {"skipped", "error"})
      if (s.not_run.empty()) s.not_run = r.opt_string(row, why, ctx);
    if (!s.not_run.empty()) return s;
  }
  s.samples = r.opt_count(row, "samples", ctx);
  s.median_ms = r.req_number(row, "median_ms", ctx);
  if (!(s.median_ms > 0) || !std::isfinite(s.median_ms)) r.fail(ctx + "median_ms", "seen " + std::to_string(s.median_ms) + ", expected a positive time");
  s.mean_ms = r.opt_number(row, "mean_ms", ctx);
  s.std_ms = r.opt_number(row, "std_ms", ctx);
  s.min_ms = r.opt_number(row, "min_ms", ctx);
  s.p10_ms = r.opt_number(row, "p10_ms", ctx);
  s.p90_ms = r.opt_number(row, "p90_ms", ctx);
  s.frac_hbm = r.opt_number(row, "frac_hbm", ctx);
  s.frac_tc = r.opt_number(row, "frac_tc", ctx);
  s.gbps = r.opt_number(row, "gbps", ctx);
  s.tflops = r.opt_number(row, "tflops", ctx);
  if (const json* clk = r.opt_object(row, "sm_clock_mhz", ctx)) {
    s.clock_before = r.opt_number(*clk, "before", ctx + "sm_clock_mhz.");
    s.clock_after = r.opt_number(*clk, "after", ctx + "sm_clock_mhz.");
  }
  s.throttled = r.opt_bool(row, "throttled", ctx);
  if (const json* chk = r.opt_object(row, "check", ctx)) {
    const json* pass = r.find(*chk, "pass");
    if (pass && !pass->is_null() && !pass->is_boolean()) {
      r.fail(ctx + "check.pass", std::string("expected a bool or null, found ") + pass->type_name());
    }
    if (pass && pass->is_boolean()) s.check = pass->get<bool>() ? CheckState::pass : CheckState::fail;
    s.err_ratio = r.opt_number(*chk, "err_ratio", ctx + "check.");
  }
  return s;
}

std::vector<SummaryRow> parse_rows(const Reader& r, const json& arr, const std::string& ctx) {
  std::vector<SummaryRow> rows;
  for (size_t i = 0; i < arr.size(); ++i) rows.push_back(parse_row(r, arr[i], fmt::format("{}[{}].", ctx, i)));
  return rows;
}

}  // namespace

std::string SummaryRow::key() const { return cell_key(op, mode, shape, shape_keys) + (impl.empty() ? "" : "|" + impl); }
std::string row_op_label(const SummaryRow& r) { return r.impl.empty() ? r.op : r.op + " [" + r.impl + "]"; }
bool is_reference_row(const SummaryRow& r) { return !r.impl.empty() && r.impl.rfind("lina", 0) != 0; }
std::string SummaryComparison::key() const { return cell_key(op, mode, shape, shape_keys); }

SummaryFile parse_summary_file(const json& doc, const fs::path& path) {
  Reader r{path};
  if (!doc.is_object()) r.fail("(top level)", std::string("expected a JSON object, found ") + doc.type_name());
  SummaryFile f;
  f.path = path;
  const std::string schema = r.req_string(doc, "schema", "");
  if (schema != kSchema) r.fail("schema", "`" + schema + "` is not supported, expected `" + kSchema + "`");
  f.kind = r.req_string(doc, "kind", "");
  if (f.kind != "run" && f.kind != "verify" && f.kind != "compare") {
    r.fail("kind", "`" + f.kind + "`: expected run, verify or compare");
  }
  if (const json* tool = r.opt_object(doc, "tool", "")) {
    f.head_sha = r.opt_string(*tool, "git_sha", "tool.");
    f.head_dirty = r.opt_bool(*tool, "git_dirty", "tool.");
  }
  if (const json* head = r.opt_object(doc, "head", "")) {  // compare files: the measured head side
    if (auto sha = r.opt_string(*head, "sha", "head."); !sha.empty()) f.head_sha = sha;
    f.head_dirty = r.opt_bool(*head, "git_dirty", "head.");
  }
  if (const json* m = r.opt_object(doc, "machine", "")) f.gpu = r.opt_string(*m, "gpu", "machine.");
  if (const json* c = r.opt_object(doc, "config", "")) f.command = r.opt_string(*c, "command", "config.");
  if (const json* g = r.opt_object(doc, "gate", "")) f.gate = *g;
  if (const json* v = r.opt_object(doc, "verdict", "")) f.verdict = *v;
  f.rows = parse_rows(r, r.req_array(doc, "results", ""), "results");
  if (const json* b = r.opt_object(doc, "baseline", "")) {
    f.base_ref = r.opt_string(*b, "ref", "baseline.");
    f.base_sha = r.opt_string(*b, "sha", "baseline.");
    f.base_command = r.opt_string(*b, "command", "baseline.");
    if (r.find(*b, "results")) f.base_rows = parse_rows(r, r.req_array(*b, "results", "baseline."), "baseline.results");
  }
  const json* cmps = r.find(doc, "comparisons");
  if (f.kind == "compare" && !cmps) r.fail("comparisons", "missing (a compare file must carry comparison rows)");
  if (cmps && !cmps->is_null()) {
    if (!cmps->is_array()) r.fail("comparisons", std::string("expected an array, found ") + cmps->type_name());
    std::map<std::string, CheckState> checks;
    for (const auto& row : f.rows) checks[row.key()] = row.check;
    for (size_t i = 0; i < cmps->size(); ++i) {
      const json& c = (*cmps)[i];
      const std::string ctx = fmt::format("comparisons[{}].", i);
      if (!c.is_object()) r.fail(ctx.substr(0, ctx.size() - 1), std::string("expected an object, found ") + c.type_name());
      SummaryComparison s;
      s.op = r.req_string(c, "op", ctx);
      s.mode = r.req_string(c, "mode", ctx);
      s.shape = r.req_string(c, "shape", ctx);
      if (const json* k = r.opt_object(c, "shape_keys", ctx)) s.shape_keys = *k;
      s.verdict = r.req_string(c, "verdict", ctx);
      static const char* verdicts[] = {"faster", "slower", "noise", "new", "removed"};
      if (std::none_of(std::begin(verdicts), std::end(verdicts), [&](const char* v) { return s.verdict == v; })) {
        r.fail(ctx + "verdict", "`" + s.verdict + "`: expected faster, slower, noise, new or removed");
      }
      s.base_ms = r.opt_positive(c, "base_median_ms", ctx);
      s.head_ms = r.opt_positive(c, "head_median_ms", ctx);
      s.speedup = r.opt_positive(c, "speedup", ctx);
      s.ci_low = r.opt_positive(c, "ci_low", ctx);
      s.ci_high = r.opt_positive(c, "ci_high", ctx);
      if (s.ci_low && s.ci_high && *s.ci_low > *s.ci_high)
        r.fail(ctx + "ci_low", fmt::format("seen {} above ci_high {}, expected ci_low <= ci_high", *s.ci_low, *s.ci_high));
      s.change_pct = r.opt_number(c, "change_pct", ctx);
      const bool paired = s.verdict != "new" && s.verdict != "removed";
      if (paired && (!s.base_ms || !s.head_ms)) {
        r.fail(ctx + (s.base_ms ? "head_median_ms" : "base_median_ms"), "missing for a `" + s.verdict + "` row");
      }
      // A verdict the medians contradict would print as "faster" and flag a regression at once.
      if ((s.verdict == "faster" && *s.head_ms > *s.base_ms) || (s.verdict == "slower" && *s.head_ms < *s.base_ms))
        r.fail(ctx + "verdict", fmt::format("seen `{}` with base_median_ms {} and head_median_ms {}, expected a verdict the medians agree with",
                                            s.verdict, *s.base_ms, *s.head_ms));
      if (paired && !s.speedup) s.speedup = *s.base_ms / *s.head_ms;
      // The latency change from the medians whenever a row has both: older verify files stored
      // (speedup - 1) x 100 under change_pct, with the opposite sign.
      if (paired && *s.base_ms > 0) s.change_pct = (*s.head_ms / *s.base_ms - 1.0) * 100.0;
      auto it = checks.find(s.key());
      if (it != checks.end()) s.check = it->second;
      f.comparisons.push_back(std::move(s));
    }
  }
  return f;
}

SummaryFile load_summary_file(const fs::path& path) { return parse_summary_file(read_json_file(path), path); }

// ---- a run file read back by verify ----

namespace {

[[noreturn]] void bad_file(const fs::path& f, const std::string& key, const std::string& what) {
  throw Error(ErrorCode::invalid_argument, key, "run file " + f.string() + ": key '" + key + "' " + what);
}

std::string json_str(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_string()) return "";
  return j[key].get<std::string>();
}

}  // namespace

RunFile read_run_file(const fs::path& file) {
  if (!fs::is_regular_file(file)) throw Error(ErrorCode::invalid_argument, "json", "run file " + file.string() + " was not written");
  return parse_run_file(parse_json_text(read_text_file(file, "json"), "run file " + file.string(), "json"), file);
}

RunFile parse_run_file(const json& j, const fs::path& file) {
  if (!j.is_object()) bad_file(file, "(top level)", "is not an object");
  // value() would throw nlohmann's type_error for a "schema" that is not a string: check the type first
  if (!j.contains("schema") || !j["schema"].is_string() || j["schema"] != kSchema)
    bad_file(file, "schema", "is " + (j.contains("schema") ? j["schema"].dump() : std::string("(absent)")) +
                                 ", expected '" + kSchema + "'");
  RunFile f;
  f.tool = j.value("tool", json::object());
  f.machine = j.value("machine", json::object());
  f.git_sha = json_str(f.tool, "git_sha");
  f.gpu = json_str(f.machine, "gpu");
  if (!j.contains("results") || !j["results"].is_array()) bad_file(file, "results", "is missing or not an array");
  for (const auto& r : j["results"]) {
    RunRow row;
    row.row = r;
    row.op = json_str(r, "op");
    row.mode = json_str(r, "mode");
    row.shape = json_str(r, "shape");
    if (row.op.empty() || row.mode.empty() || row.shape.empty()) bad_file(file, "results[].op/mode/shape", "is missing in a row");
    if (!r.contains("times_ms") || !r["times_ms"].is_array() || r["times_ms"].empty())
      bad_file(file, "results[].times_ms", "is missing or empty for " + row.key());
    for (const auto& t : r["times_ms"]) {
      if (!t.is_number() || !(t.get<double>() > 0)) bad_file(file, "results[].times_ms", "holds a non-positive or non-numeric sample for " + row.key());
      row.times_ms.push_back(t.get<double>());
    }
    if (r.contains("check") && r["check"].is_object() && r["check"].contains("pass") && r["check"]["pass"].is_boolean())
      row.check_pass = r["check"]["pass"].get<bool>();
    f.rows.push_back(std::move(row));
  }
  return f;
}

}  // namespace lina::harness
