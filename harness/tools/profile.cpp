#include "harness/tools/profile.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "harness/verify/compare_refs.h"
#include "lina/error.h"

namespace lina::harness {
namespace fs = std::filesystem;

std::vector<std::string> nvtx_includes(const ProfileSpec& spec) {
  std::vector<std::string> out;
  if (!spec.modes.empty() && !spec.shapes.empty()) {
    // Exact names; the trailing '/' makes each a push/pop range filter.
    for (const auto& m : spec.modes)
      for (const auto& s : spec.shapes) out.push_back("lina:timed:" + spec.op + ":" + m + ":" + s + "/");
  } else {
    // In ncu's NVTX syntax '*' is a range-stack quantifier, not a wildcard: use a regex.
    out.push_back("regex:^lina:timed:" + spec.op + ":.*/");
  }
  return out;
}

std::vector<std::string> ncu_profile_argv(const std::string& ncu, const ProfileSpec& spec, const fs::path& report_base,
                                          const std::string& lina, const fs::path& json) {
  std::vector<std::string> a{ncu, "--nvtx"};
  for (const auto& f : nvtx_includes(spec)) a.insert(a.end(), {"--nvtx-include", f});
  // Leave clocks as `lina run` sees them (no locking to base clocks), so numbers match the benchmark.
  a.insert(a.end(), {"--clock-control", "none", "--set", spec.set, "--import-source", "yes", "-f", "-o", report_base.string()});
  if (spec.launch_count > 0) a.insert(a.end(), {"--launch-count", std::to_string(spec.launch_count)});
  const auto run = lina_run_argv(lina, {spec.op}, spec.modes, spec.shapes, json.string(), std::nullopt, 1, spec.safe_gate);
  a.insert(a.end(), run.begin(), run.end());
  return a;
}

std::vector<std::string> ncu_export_argv(const std::string& ncu, const fs::path& rep) {
  return {ncu, "--import", rep.string(), "--csv", "--page", "raw"};
}

std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, any = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') { field += '"'; ++i; }
      else if (c == '"') quoted = false;
      else field += c;
      continue;
    }
    if (c == '"') { quoted = true; any = true; }
    else if (c == ',') { row.push_back(field); field.clear(); any = true; }
    else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      if (any || !field.empty()) { row.push_back(field); rows.push_back(row); }
      row.clear(); field.clear(); any = false;
    } else { field += c; any = true; }
  }
  if (any || !field.empty()) { row.push_back(field); rows.push_back(row); }
  return rows;
}

namespace {

// ncu prints numbers with thousands separators ("12,345.6") unless told otherwise.
std::optional<double> number(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), ','), s.end());
  if (s.empty() || s == "n/a" || s == "N/A") return std::nullopt;
  try {
    size_t pos = 0;
    const double v = std::stod(s, &pos);
    if (pos != s.size()) return std::nullopt;
    return v;
  } catch (...) {
    return std::nullopt;
  }
}

double to_us(double v, const std::string& unit) {
  if (unit == "nsecond" || unit == "ns") return v / 1e3;
  if (unit == "usecond" || unit == "us") return v;
  if (unit == "msecond" || unit == "ms") return v * 1e3;
  if (unit == "second" || unit == "s") return v * 1e6;
  return v / 1e3;  // ncu's base unit for durations is nanoseconds
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio" -> "long_scoreboard"
std::optional<std::string> stall_reason(const std::string& metric) {
  static const std::string a = "smsp__average_warps_issue_stalled_", a_end = "_per_issue_active.ratio";
  static const std::string b = "smsp__pcsamp_warps_issue_stalled_";
  if (metric.rfind(a, 0) == 0 && metric.size() > a.size() + a_end.size() &&
      metric.compare(metric.size() - a_end.size(), a_end.size(), a_end) == 0) {
    return metric.substr(a.size(), metric.size() - a.size() - a_end.size());
  }
  if (metric.rfind(b, 0) == 0 && metric.find("not_issued") == std::string::npos) return metric.substr(b.size());
  return std::nullopt;
}

}  // namespace

std::vector<KernelProfile> parse_ncu_raw_csv(const std::string& csv, const std::string& source) {
  auto rows = parse_csv(csv);
  // Skip anything ncu printed before the table (==PROF== lines, warnings).
  size_t h = 0;
  while (h < rows.size() && (rows[h].empty() || rows[h][0] != "ID")) ++h;
  if (h == rows.size()) throw Error(ErrorCode::invalid_argument, source, source + ": no ncu CSV header (a row starting with \"ID\")");
  const auto& header = rows[h];
  auto col = [&](std::initializer_list<const char*> names) -> int {
    for (const char* n : names)
      for (size_t i = 0; i < header.size(); ++i) if (header[i] == n) return static_cast<int>(i);
    return -1;
  };
  const int name_c = col({"Kernel Name", "Function Name", "Demangled Name"});
  const int dur_c = col({"gpu__time_duration.sum"});
  if (name_c < 0) throw Error(ErrorCode::invalid_argument, source, source + ": column `Kernel Name` missing");
  if (dur_c < 0) throw Error(ErrorCode::invalid_argument, source, source + ": column `gpu__time_duration.sum` missing");
  // ncu 2025 (H200) names it gpu__dram_throughput; older releases dram__throughput.
  const int dram_c = col({"gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "dram__throughput.avg.pct_of_peak_sustained_elapsed"});
  const int occ_c = col({"sm__warps_active.avg.pct_of_peak_sustained_active"});
  const int reg_c = col({"launch__registers_per_thread"});
  std::vector<std::pair<int, std::string>> stall_cols;
  for (size_t i = 0; i < header.size(); ++i)
    if (auto r = stall_reason(header[i]); r && *r != "selected")  // `selected` is the issuing warp, not a stall
      stall_cols.emplace_back(static_cast<int>(i), *r);
  // Prefer the per-issue ratios when both families are present; they do not need source sampling.
  const bool have_ratio = std::any_of(stall_cols.begin(), stall_cols.end(), [&](const auto& sc) {
    return header[sc.first].rfind("smsp__average_warps_issue_stalled_", 0) == 0;
  });
  if (have_ratio) {
    std::erase_if(stall_cols, [&](const auto& sc) { return header[sc.first].rfind("smsp__pcsamp_", 0) == 0; });
  }

  size_t first = h + 1;
  std::vector<std::string> units(header.size());
  if (first < rows.size() && !rows[first].empty() && rows[first][0].empty()) {  // the units row
    units = rows[first];
    units.resize(header.size());
    ++first;
  }
  struct Acc {
    std::vector<double> dur;
    std::vector<double> dram, occ, reg;
    std::map<std::string, std::vector<double>> stalls;
  };
  std::vector<std::string> order;
  std::map<std::string, Acc> acc;
  for (size_t r = first; r < rows.size(); ++r) {
    const auto& row = rows[r];
    if (row.size() != header.size()) {
      throw Error(ErrorCode::invalid_argument, source,
                  fmt::format("{}: row {} has {} fields, the header has {}", source, r + 1, row.size(), header.size()));
    }
    const std::string& name = row[name_c];
    auto d = number(row[dur_c]);
    if (!d) throw Error(ErrorCode::invalid_argument, source, fmt::format("{}: row {}: gpu__time_duration.sum `{}` is not a number", source, r + 1, row[dur_c]));
    if (!acc.count(name)) order.push_back(name);
    Acc& a = acc[name];
    a.dur.push_back(to_us(*d, units[dur_c]));
    auto add = [&](int c, std::vector<double>& v) {
      if (c < 0) return;
      if (auto x = number(row[c])) v.push_back(*x);
    };
    add(dram_c, a.dram);
    add(occ_c, a.occ);
    add(reg_c, a.reg);
    for (const auto& [c, reason] : stall_cols)
      if (auto x = number(row[c])) a.stalls[reason].push_back(*x);
  }
  auto mean = [](const std::vector<double>& v) -> std::optional<double> {
    if (v.empty()) return std::nullopt;
    double s = 0;
    for (double x : v) s += x;
    return s / static_cast<double>(v.size());
  };
  std::vector<KernelProfile> out;
  for (const auto& name : order) {
    const Acc& a = acc[name];
    KernelProfile k;
    k.name = name;
    k.launches = static_cast<int>(a.dur.size());
    k.duration_us = median(a.dur);
    k.dram_pct = mean(a.dram);
    k.occupancy_pct = mean(a.occ);
    k.registers = mean(a.reg);
    for (const auto& [reason, v] : a.stalls) k.stalls.emplace_back(reason, *mean(v));
    std::stable_sort(k.stalls.begin(), k.stalls.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
    out.push_back(std::move(k));
  }
  return out;
}

std::string render_profile_side_by_side(const std::vector<KernelProfile>& base, const std::vector<KernelProfile>& head,
                                        bool have_base, int top_stalls) {
  auto opt = [](const std::optional<double>& v, const char* f) { return v ? fmt::format(fmt::runtime(f), *v) : std::string("-"); };
  auto stalls = [&](const KernelProfile* k) {
    if (!k) return std::string("-");
    std::string s;
    for (int i = 0; i < top_stalls && i < static_cast<int>(k->stalls.size()); ++i)
      s += fmt::format("{}{} {:.2f}", s.empty() ? "" : ", ", k->stalls[i].first, k->stalls[i].second);
    return s.empty() ? std::string("-") : s;
  };
  std::vector<std::string> names;
  for (const auto& k : base) names.push_back(k.name);
  for (const auto& k : head)
    if (std::find(names.begin(), names.end(), k.name) == names.end()) names.push_back(k.name);
  auto find = [](const std::vector<KernelProfile>& v, const std::string& n) -> const KernelProfile* {
    for (const auto& k : v) if (k.name == n) return &k;
    return nullptr;
  };
  std::string out;
  for (const auto& n : names) {
    const KernelProfile* b = find(base, n);
    const KernelProfile* h = find(head, n);
    out += "kernel " + n + "\n";
    auto line = [&](const char* what, auto get) {
      if (have_base) out += fmt::format("  {:<22} {:>16} {:>16}\n", what, get(b), get(h));
      else out += fmt::format("  {:<22} {:>16}\n", what, get(h));
    };
    if (have_base) out += fmt::format("  {:<22} {:>16} {:>16}\n", "", "base", "head");
    line("launches", [](const KernelProfile* k) { return k ? std::to_string(k->launches) : std::string("absent"); });
    line("duration us (median)", [](const KernelProfile* k) { return k ? fmt::format("{:.2f}", k->duration_us) : std::string("-"); });
    line("DRAM throughput %", [&](const KernelProfile* k) { return k ? opt(k->dram_pct, "{:.1f}") : std::string("-"); });
    line("achieved occupancy %", [&](const KernelProfile* k) { return k ? opt(k->occupancy_pct, "{:.1f}") : std::string("-"); });
    line("registers / thread", [&](const KernelProfile* k) { return k ? opt(k->registers, "{:.0f}") : std::string("-"); });
    if (have_base) out += "  top stalls base: " + stalls(b) + "\n";
    out += "  top stalls" + std::string(have_base ? " head: " : ": ") + stalls(h) + "\n";
    if (have_base && b && h && b->duration_us > 0) out += fmt::format("  duration change: {:+.1f}%\n", (h->duration_us / b->duration_us - 1) * 100);
  }
  return out;
}

}  // namespace lina::harness
