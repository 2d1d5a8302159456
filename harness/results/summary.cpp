#include "harness/results/summary.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "harness/util/text_file.h"
#include "lina/error.h"

namespace lina::harness {
namespace fs = std::filesystem;
using nlohmann::json;

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
  s.samples = static_cast<long long>(r.opt_number(row, "samples", ctx).value_or(0));
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
      s.base_ms = r.opt_number(c, "base_median_ms", ctx);
      s.head_ms = r.opt_number(c, "head_median_ms", ctx);
      s.speedup = r.opt_number(c, "speedup", ctx);
      s.ci_low = r.opt_number(c, "ci_low", ctx);
      s.ci_high = r.opt_number(c, "ci_high", ctx);
      s.change_pct = r.opt_number(c, "change_pct", ctx);
      const bool paired = s.verdict != "new" && s.verdict != "removed";
      if (paired && (!s.base_ms || !s.head_ms)) {
        r.fail(ctx + (s.base_ms ? "head_median_ms" : "base_median_ms"), "missing for a `" + s.verdict + "` row");
      }
      if (paired && !s.speedup && *s.head_ms > 0) s.speedup = *s.base_ms / *s.head_ms;
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

SummaryFile load_summary_file(const fs::path& path) {
  const std::string text = read_text_file(path);
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    throw Error(ErrorCode::invalid_argument, path.string(), path.string() + ": not valid JSON: " + e.what());
  }
  return parse_summary_file(doc, path);
}

std::vector<SummaryComparison> ranked(const std::vector<SummaryComparison>& cmps) {
  std::vector<SummaryComparison> out = cmps;
  std::stable_sort(out.begin(), out.end(), [](const SummaryComparison& a, const SummaryComparison& b) {
    if (a.change_pct.has_value() != b.change_pct.has_value()) return a.change_pct.has_value();
    if (!a.change_pct) return false;
    return std::fabs(*a.change_pct) > std::fabs(*b.change_pct);
  });
  return out;
}

std::optional<double> geomean_speedup(const std::vector<SummaryComparison>& cmps) {
  double log_sum = 0;
  int n = 0;
  for (const auto& c : cmps) {
    if (c.speedup && *c.speedup > 0 && c.verdict != "new" && c.verdict != "removed") {
      log_sum += std::log(*c.speedup);
      ++n;
    }
  }
  if (n == 0) return std::nullopt;
  return std::exp(log_sum / n);
}

std::string change_flag(const SummaryComparison& c, double threshold_pct) {
  if (c.verdict == "new") return "new";
  if (c.verdict == "removed") return "removed";
  if (!c.change_pct) return "";
  if (std::fabs(*c.change_pct) < threshold_pct) return "";
  if (c.verdict == "noise") return "within noise";
  return *c.change_pct > 0 ? "REGRESSION" : "IMPROVED";
}

namespace {

std::string num(const std::optional<double>& v, const char* f = "{:.4f}") {
  return v ? fmt::format(fmt::runtime(f), *v) : std::string("-");
}
std::string clocks(const SummaryRow& r) {
  if (!r.clock_before && !r.clock_after) return "-";
  std::string s = num(r.clock_before, "{:.0f}") + "->" + num(r.clock_after, "{:.0f}");
  if (r.throttled) s += " THROTTLED";
  return s;
}
std::string short_sha(const std::string& s) { return s.empty() ? "-" : s; }

struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::string text() const {
    std::vector<size_t> w(header.size());
    for (size_t i = 0; i < header.size(); ++i) w[i] = header[i].size();
    for (const auto& r : rows)
      for (size_t i = 0; i < r.size(); ++i) w[i] = std::max(w[i], r[i].size());
    auto line = [&](const std::vector<std::string>& r) {
      std::string s = " ";
      for (size_t i = 0; i < r.size(); ++i) s += " " + r[i] + std::string(w[i] - r[i].size() + 1, ' ');
      while (!s.empty() && s.back() == ' ') s.pop_back();
      return s + "\n";
    };
    std::string out = line(header);
    for (const auto& r : rows) out += line(r);
    return out;
  }
  std::string markdown() const {
    auto cell = [](std::string s) {
      std::string o;
      for (char c : s) o += (c == '|') ? std::string("\\|") : std::string(1, c);
      return o;
    };
    std::string out = "|";
    for (const auto& h : header) { out += ' '; out += cell(h); out += " |"; }
    out += "\n|";
    for (size_t i = 0; i < header.size(); ++i) out += "---|";
    out += "\n";
    for (const auto& r : rows) {
      out += "|";
      for (const auto& c : r) { out += ' '; out += cell(c); out += " |"; }
      out += "\n";
    }
    return out;
  }
};

Table comparison_table(const SummaryFile& f, const SummaryOptions& opt) {
  Table t{{"op", "mode", "shape", "base ms", "head ms", "speedup", "95% CI", "change %", "verdict", "check", "flag"}, {}};
  auto r = ranked(f.comparisons);
  if (opt.top > 0 && static_cast<int>(r.size()) > opt.top) r.resize(opt.top);
  for (const auto& c : r) {
    std::string ci = (c.ci_low && c.ci_high) ? fmt::format("[{:.3f}, {:.3f}]", *c.ci_low, *c.ci_high) : "-";
    t.rows.push_back({c.op, c.mode, c.shape, num(c.base_ms), num(c.head_ms), num(c.speedup, "{:.3f}x"), ci,
                      num(c.change_pct, "{:+.2f}"), c.verdict, check_label(c.check), change_flag(c, opt.threshold_pct)});
  }
  return t;
}

Table stats_table(const std::vector<SummaryRow>& rows) {
  Table t{{"op", "mode", "shape", "median", "mean", "std", "min", "p10", "p90", "n", "frac_hbm", "frac_tc", "sm MHz", "check"}, {}};
  for (const auto& r : rows) {
    const std::string op = row_op_label(r);
    if (!r.not_run.empty()) {
      t.rows.push_back({op, r.mode, r.shape, "not run", "-", "-", "-", "-", "-", "0", "-", "-", "-", "-"});
      continue;
    }
    t.rows.push_back({op, r.mode, r.shape, num(r.median_ms), num(r.mean_ms), num(r.std_ms), num(r.min_ms),
                      num(r.p10_ms), num(r.p90_ms), std::to_string(r.samples), num(r.frac_hbm, "{:.3f}"),
                      num(r.frac_tc, "{:.3f}"), clocks(r), is_reference_row(r) ? "reference" : check_label(r.check)});
  }
  return t;
}

std::vector<std::string> header_lines(const SummaryFile& f) {
  std::vector<std::string> l;
  l.push_back(fmt::format("head sha: {}{}", short_sha(f.head_sha), f.head_dirty ? " (dirty tree)" : ""));
  if (!f.base_sha.empty() || !f.base_ref.empty()) {
    l.push_back(fmt::format("base sha: {}{}", short_sha(f.base_sha), f.base_ref.empty() ? "" : " (ref " + f.base_ref + ")"));
  }
  l.push_back("gpu: " + (f.gpu.empty() ? std::string("-") : f.gpu));
  l.push_back("command: " + (f.command.empty() ? std::string("-") : f.command));
  if (!f.base_command.empty()) l.push_back("base command: " + f.base_command);
  if (f.gate.is_object()) {
    auto g = [&](const char* k) { return f.gate.contains(k) ? f.gate[k].dump() : std::string("-"); };
    l.push_back(fmt::format("gate: {} (selected {}, passed {}, failed {}, skipped {})", g("status"), g("selected"),
                            g("passed"), g("failed"), g("skipped")));
  }
  if (f.verdict.is_object()) {
    std::string reasons;
    if (f.verdict.contains("reasons") && f.verdict["reasons"].is_array())
      for (const auto& r : f.verdict["reasons"]) reasons += (reasons.empty() ? "" : "; ") + (r.is_string() ? r.get<std::string>() : r.dump());
    l.push_back(fmt::format("verdict: promote={} label={}{}", f.verdict.value("promote", json()).dump(),
                            f.verdict.value("label", json()).dump(), reasons.empty() ? "" : " — " + reasons));
  }
  return l;
}

}  // namespace

std::vector<std::string> claim_warnings(const SummaryFile& f) {
  std::vector<std::string> w;
  auto scan = [&](const std::vector<SummaryRow>& rows, const char* side) {
    for (const auto& r : rows) {
      const std::string who = r.impl.empty() ? side : r.impl;
      if (!r.not_run.empty()) {
        w.push_back(fmt::format("NOT RUN: {} {} {} ({}): {}", r.op, r.mode, r.shape, who, r.not_run));
        continue;
      }
      if (is_reference_row(r)) continue;
      if (r.check == CheckState::fail) w.push_back(fmt::format("FAILED check: {} {} {} ({})", r.op, r.mode, r.shape, who));
      if (r.check == CheckState::unverified) w.push_back(fmt::format("UNVERIFIED: {} {} {} ({}): no passing check recorded", r.op, r.mode, r.shape, who));
      if (r.throttled) w.push_back(fmt::format("THROTTLED: {} {} {} ({})", r.op, r.mode, r.shape, who));
    }
  };
  scan(f.rows, "head");
  return w;
}


std::string render_summary_text(const std::vector<SummaryFile>& files, const SummaryOptions& opt) {
  std::string out;
  for (const auto& f : files) {
    out += fmt::format("== {} ({})\n", f.path.string(), f.kind);
    for (const auto& l : header_lines(f)) out += "  " + l + "\n";
    if (!f.comparisons.empty()) {
      const size_t shown = opt.top > 0 ? std::min<size_t>(opt.top, f.comparisons.size()) : f.comparisons.size();
      out += fmt::format("\n  comparisons ranked by |change| (threshold {}%, {} of {}):\n", opt.threshold_pct, shown, f.comparisons.size());
      out += comparison_table(f, opt).text();
      auto g = geomean_speedup(f.comparisons);
      out += "  geomean speedup: " + (g ? fmt::format("{:.3f}x", *g) : std::string("-")) + "\n";
    }
    out += "\n  final-claim stats, head (ms):\n" + stats_table(f.rows).text();
    if (!f.base_rows.empty()) out += "\n  final-claim stats, base (ms):\n" + stats_table(f.base_rows).text();
    auto w = claim_warnings(f);
    if (!w.empty()) {
      out += "\n";
      for (const auto& s : w) out += "  " + s + "\n";
    }
    out += "\n";
  }
  return out;
}

std::string render_summary_markdown(const std::vector<SummaryFile>& files, const SummaryOptions& opt) {
  std::string out;
  for (const auto& f : files) {
    out += fmt::format("## `{}` ({})\n\n", f.path.string(), f.kind);
    for (const auto& l : header_lines(f)) out += "- " + l + "\n";
    if (!f.comparisons.empty()) {
      out += fmt::format("\n### Comparisons ranked by |change| (threshold {}%)\n\n", opt.threshold_pct);
      out += comparison_table(f, opt).markdown();
      auto g = geomean_speedup(f.comparisons);
      out += "\nGeomean speedup: " + (g ? fmt::format("{:.3f}x", *g) : std::string("-")) + "\n";
    }
    out += "\n### Final-claim stats, head (ms)\n\n" + stats_table(f.rows).markdown();
    if (!f.base_rows.empty()) out += "\n### Final-claim stats, base (ms)\n\n" + stats_table(f.base_rows).markdown();
    auto w = claim_warnings(f);
    if (!w.empty()) {
      out += "\n";
      for (const auto& s : w) out += "- **" + s + "**\n";
    }
    out += "\n";
  }
  return out;
}

}  // namespace lina::harness
