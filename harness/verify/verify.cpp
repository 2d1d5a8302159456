#include "harness/verify/verify.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <ostream>
#include <set>
#include <sstream>

#include "harness/verify/baseline.h"
#include "harness/verify/compare_refs.h"
#include "harness/verify/frozen.h"
#include "harness/engine/registry.h"
#include "harness/util/json_file.h"
#include "harness/util/subprocess.h"
#include "harness/util/text_file.h"
#include "lina/build_info.h"
#include "lina/error.h"
#include "lina/version.h"

namespace lina::harness {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const double pos = p * static_cast<double>(v.size() - 1);
  const auto i = static_cast<std::size_t>(pos);
  const double f = pos - static_cast<double>(i);
  return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

// A row whose sample statistics are recomputed over the samples pooled across rounds.
json pooled_row(const json& last_row, const std::vector<double>& t, int rounds) {
  json r = last_row;
  double sum = 0, sq = 0;
  for (double x : t) sum += x;
  const double mean = sum / static_cast<double>(t.size());
  for (double x : t) sq += (x - mean) * (x - mean);
  r["times_ms"] = t;
  r["samples"] = t.size();
  r["median_ms"] = median_of(t);
  r["mean_ms"] = mean;
  r["std_ms"] = t.size() > 1 ? std::sqrt(sq / static_cast<double>(t.size() - 1)) : 0.0;
  r["min_ms"] = *std::min_element(t.begin(), t.end());
  r["p10_ms"] = percentile(t, 0.10);
  r["p20_ms"] = percentile(t, 0.20);
  r["p80_ms"] = percentile(t, 0.80);
  r["p90_ms"] = percentile(t, 0.90);
  r["rounds"] = rounds;
  return r;
}

struct Side {
  std::string name;  // "candidate" / "baseline"
  fs::path exe;
  std::map<std::string, RoundSamples> rounds;  // per cell, one vector of samples per round (the bootstrap's first level)
  std::map<std::string, json> last_row;
  std::map<std::string, std::string> check;  // "pass", "FAIL", "unverified"
  std::vector<std::string> order;            // cell keys in first-seen order
  RunFile last_file;
  bool has(const std::string& k) const { return rounds.count(k) > 0; }
  std::vector<double> pooled(const std::string& k) const { return pooled_samples(rounds.at(k)); }  // over rounds
};

std::string check_label(const std::optional<bool>& c) { return !c ? "unverified" : *c ? "pass" : "FAIL"; }

void absorb(Side& s, const RunFile& f) {
  for (const RunRow& r : f.rows) {
    const std::string k = r.key();
    if (!s.has(k)) s.order.push_back(k);
    s.rounds[k].push_back(r.times_ms);
    s.last_row[k] = r.row;
    const std::string now = check_label(r.check_pass);
    auto it = s.check.find(k);
    // The worst outcome over rounds sticks: FAIL > unverified > pass.
    if (it == s.check.end() || now == "FAIL" || (now == "unverified" && it->second == "pass")) s.check[k] = now;
  }
  s.last_file = f;
}

std::string fmt_ms(double x) { return std::isfinite(x) ? fmt::format("{:.4f}", x) : "-"; }

json gate_json(const GateResult& g, bool ran) {
  if (!ran) return json{{"suite", nullptr}, {"filter", nullptr}, {"selected", 0}, {"passed", 0}, {"failed", 0}, {"skipped", 0}, {"status", "skipped"}};
  json fails = json::array();
  for (const auto& t : g.tests)
    if (t.result == "failed") fails.push_back({{"name", t.name}, {"message", t.message}});
  json skips = json::array();
  for (const auto& t : g.tests)
    if (t.result == "skipped") skips.push_back(t.name);
  return json{{"suite", g.suite},       {"filter", g.filter.empty() ? json(nullptr) : json(g.filter)},
              {"selected", g.selected}, {"passed", g.passed},
              {"failed", g.failed},     {"skipped", g.skipped},
              {"status", gate_status_name(g.status)}, {"failures", fails}, {"skipped_tests", skips},
              {"problem", g.problem.empty() ? json(nullptr) : json(g.problem)},
              {"build_sha", g.build_sha ? json(*g.build_sha) : json(nullptr)}};
}

void print_gate(const GateResult& g, std::ostream& out) {
  out << fmt::format("gate: {} ({}){}: {} selected, {} passed, {} failed, {} skipped\n", gate_status_name(g.status),
                     fs::path(g.suite).filename().string(), g.filter.empty() ? "" : " filter '" + g.filter + "'", g.selected,
                     g.passed, g.failed, g.skipped);
  for (const auto& t : g.tests) {
    if (t.result == "failed") out << "  FAILED  " << t.name << "\n" << "          " << last_chars(t.message, 1500) << "\n";
    if (t.result == "skipped") out << "  skipped " << t.name << (t.message.empty() ? "" : ": " + t.message) << "\n";
  }
  if (!g.problem.empty()) out << "  problem: " << g.problem << "\n";
  if (!g.log_path.empty()) out << "  gate log: " << g.log_path << "\n";
}

// The SHA a ready-made baseline must report: a full 40-hex SHA is taken as typed (the results prove
// it; the tree may be a copy without git history), anything else is resolved in the checkout.
std::string resolve_base_sha(const fs::path& repo, const std::string& ref) {
  const bool full_sha = ref.size() == 40 && ref.find_first_not_of("0123456789abcdef") == std::string::npos;
  return full_sha ? ref : resolve_ref(repo, ref);
}

}  // namespace

bool is_promotion_gpu(const std::string& gpu, const std::string& cc) {
  const double cap = std::atof(cc.c_str());
  if (!(cap >= 9.0)) return false;
  // Datacenter parts; consumer/workstation parts of the same architecture are supplementary.
  for (const char* name : {"H100", "H200", "H800", "H20", "GH200", "B100", "B200", "B300", "GB200", "GB300"})
    if (gpu.find(name) != std::string::npos) return true;
  return false;
}

VerifyOutcome verify(const VerifyOptions& o, std::ostream& out) {
  VerifyOutcome res;
  if (!lookup_op(o.op)) throw_invalid("--op", "'" + o.op + "'", op_name_list(" or "));
  if (o.rounds < 1) throw_invalid("--rounds", std::to_string(o.rounds), "at least 1");
  if (o.gpus < 1) throw_invalid("--gpus", std::to_string(o.gpus), "at least 1");
  // Every argument is checked here, before the gate, the baseline build and the rounds (minutes).
  const OpSpec& op = find_op(o.op);
  resolve_modes(op, o.modes);  // a mode the op does not run (bwd of a decode op) is refused here
  if (!o.shapes.empty()) resolve_shapes(o.shapes, o.seed, [&op](const std::string& n) { return op.shape_set(n); });
  if (!o.gate_k.empty()) KeywordExpr::parse(o.gate_k);
  if (o.json) check_output_path(*o.json, "--json");
  if (o.base && o.base->empty()) throw_invalid("--base", "''", "a git ref (leave --base out to verify without a baseline)");
  if (o.backend == "cuda" && cuda_device_count() == 0) {
    out << "lina verify: --backend cuda needs an NVIDIA GPU, and " << (cuda_backend_compiled() ? "none is visible" : "this build has no CUDA backend")
        << "; use --backend cpu\n";
    res.exit_code = kVerifyUsage;
    return res;
  }
  const fs::path cand_exe = o.candidate_exe.empty() ? current_executable() : o.candidate_exe;
  json doc = {{"schema", kSchema}, {"kind", "verify"}};
  doc["tool"] = {{"name", "lina"}, {"version", kVersion}, {"git_sha", LINA_BUILD_GIT_SHA}, {"git_dirty", LINA_BUILD_GIT_DIRTY}};
  doc["config"] = {{"op", o.op}, {"seed", o.seed}, {"backend", o.backend.empty() ? json(nullptr) : json(o.backend)},
                   {"rounds", o.rounds}, {"threshold_pct", o.threshold_pct}, {"modes", o.modes}, {"shapes", o.shapes},
                   {"base", o.base ? json(*o.base) : json(nullptr)}, {"no_gate", o.no_gate}, {"gpus", o.gpus},
                   {"safe_gate", o.safe_gate}};
  doc["results"] = json::array();
  doc["comparisons"] = json::array();
  doc["baseline"] = nullptr;
  doc["verdict"] = nullptr;
  doc["machine"] = nullptr;
  auto finish = [&](int code) {
    res.exit_code = code;
    res.json = doc;
    if (o.json) write_file_atomically(*o.json, doc.dump(2) + "\n", "--json");
    return res;
  };
  // An unknown ref is found before the gate runs, not after it.
  std::string base_sha;
  if (o.base && !o.baseline_exe) {
    try {
      base_sha = resolve_ref(o.repo, *o.base);
    } catch (const BaselineError& e) {
      out << "lina verify: baseline refused: " << e.what() << "\n";
      return finish(kVerifyBaselineFailed);
    }
  }

  // 1. Gate.
  GateResult gate;
  if (o.no_gate) {
    out << "gate: NOT RUN (--no-gate): every number below is UNVERIFIED\n";
    doc["gate"] = gate_json(gate, false);
  } else {
    const fs::path gexe = o.gate_exe ? *o.gate_exe : find_gate_executable(o.op, cand_exe);
    out << "gate: running " << gexe.string() << (o.gate_k.empty() ? "" : " -k '" + o.gate_k + "'") << " ...\n" << std::flush;
    GateRunOptions g;
    g.executable = gexe;
    g.k_expr = o.gate_k;
    g.env = o.gate_env;
    gate = run_gate(g);
    doc["gate"] = gate_json(gate, true);
    if (gate.status == GateStatus::empty) {
      out << "gate: the filter '" << o.gate_k << "' selects no test of " << gexe.filename().string()
          << " (not a failure, nothing was checked; `" << gexe.filename().string() << " --gtest_list_tests` lists them)\n";
      return finish(kVerifyGateEmpty);
    }
    print_gate(gate, out);
    if (gate.status == GateStatus::red) {
      if (!gate.output_tail.empty() && gate.failed == 0) out << "gate output (tail):\n" << gate.output_tail << "\n";
      out << "verdict: gate RED: nothing is timed\n";
      doc["verdict"] = {{"promote", false}, {"label", "gate failed"}, {"reasons", {"gate red: " + std::to_string(gate.failed) + " failed" + (gate.problem.empty() ? "" : "; " + gate.problem)}}};
      return finish(kVerifyGateFailed);
    }
  }

  // 2. Baseline build (or the ready-made one of a test).
  std::optional<Baseline> base;
  if (o.base) {
    try {
      if (o.baseline_exe) {
        Baseline b;
        b.ref = *o.base;
        b.sha = !o.baseline_sha.empty() ? o.baseline_sha : resolve_base_sha(o.repo, *o.base);
        b.lina_exe = *o.baseline_exe;
        b.reused = true;
        base = b;
      } else {
        BaselineOptions bo;
        bo.repo = o.repo;
        bo.ref = *o.base;
        bo.cmake_args = o.baseline_cmake_args;
        out << "baseline: " << *o.base << " ...\n" << std::flush;
        base = prepare_baseline(bo);
      }
    } catch (const BaselineError& e) {
      out << "lina verify: baseline refused: " << e.what() << "\n";
      return finish(kVerifyBaselineFailed);
    }
    for (const auto& w : base->warnings) out << "warning: " << w << "\n";
    out << "baseline: " << base->ref << " = " << base->sha << (base->reused ? " (ready: " : " (built: ") << base->lina_exe.string() << ")\n";
  }

  // 3. Timing: the same `lina run` arguments on both sides, alternating which goes first.
  TempDir tmp("lina-verify");
  auto run_args = [&](const fs::path& exe, const fs::path& json_out) {
    return lina_run_argv(exe.string(), {o.op}, o.modes, o.shapes, json_out.string(), o.seed, o.gpus, o.safe_gate, o.backend);
  };
  Side cand{"candidate", cand_exe, {}, {}, {}, {}, {}};
  Side bside{"baseline", base ? base->lina_exe : fs::path(), {}, {}, {}, {}, {}};
  doc["config"]["command"] = quote_argv(run_args(cand_exe, "<json>"));
  for (int r = 0; r < o.rounds; ++r) {
    std::vector<Side*> order = {&cand};
    if (base) order = (r % 2 == 0) ? std::vector<Side*>{&cand, &bside} : std::vector<Side*>{&bside, &cand};
    for (Side* s : order) {
      const fs::path jf = tmp.path() / fmt::format("{}-{}.json", s->name, r);
      out << fmt::format("round {}/{}: {} ...\n", r + 1, o.rounds, s->name) << std::flush;
      ProcessOptions po;
      po.timeout = child_timeout(kDefaultTimeout);
      const ProcessResult pr = run_process(run_args(s->exe, jf), po);
      const bool is_base = s == &bside;
      if (!pr.spawned || pr.exit_code != 0) {
        out << "lina verify: the " << s->name << "'s `lina run` "
            << (pr.timed_out ? timeout_message(po) : pr.spawned ? "exited with code " + std::to_string(pr.exit_code) : pr.spawn_error)
            << (is_base && o.gpus > 1 && pr.spawned && pr.exit_code == kVerifyUsage
                    ? " (a baseline older than `lina run --gpus` cannot shard: verify without --gpus)" : "")
            << "\n" << last_chars(pr.err, 3000) << "\n";
        if (is_base) return finish(kVerifyBaselineFailed);
        return finish(pr.spawned && pr.exit_code == kVerifyUsage ? kVerifyUsage : 1);
      }
      RunFile f;
      try {
        f = read_run_file(jf);
      } catch (const Error& e) {
        out << "lina verify: the " << s->name << "'s results: " << e.what() << "\n";
        if (is_base) return finish(kVerifyBaselineFailed);
        throw;
      }
      if (is_base && f.git_sha != base->sha) {
        out << "lina verify: baseline refused: its results report git SHA '" << f.git_sha << "', but --base " << base->ref
            << " is " << base->sha << " (a baseline must prove which commit it measured)\n";
        return finish(kVerifyBaselineFailed);
      }
      // The gate judged the kernels it was linked with: they must be the candidate's, whose results prove
      // its build (the first candidate run already stops a mismatch).
      if (!is_base && !o.no_gate && (!gate.build_sha || *gate.build_sha != f.git_sha)) {
        const std::string gname = fs::path(gate.suite).filename().string();
        const std::string why =
            gate.build_sha ? fmt::format("{} was built from lina {}, but the candidate's results report {}", gname, *gate.build_sha, f.git_sha)
                           : fmt::format("{} does not report which lina build it was made from (a suite built before the suites recorded it)", gname);
        out << "lina verify: gate refused: " << why
            << " (a gate checks the kernels it was linked with: pass the candidate build's suite with --gate-bin)\n";
        doc["verdict"] = {{"promote", false}, {"label", "gate not of the candidate's build"}, {"reasons", {"gate refused: " + why}}};
        return finish(kVerifyGateFailed);
      }
      absorb(*s, f);
    }
  }
  doc["machine"] = cand.last_file.machine;

  // 4. Rows, comparisons, table.
  for (const auto& k : cand.order) doc["results"].push_back(pooled_row(cand.last_row[k], cand.pooled(k), o.rounds));
  std::vector<std::pair<RoundSamples, RoundSamples>> matched;
  int faster = 0, slower = 0;
  std::vector<std::string> check_problems;
  std::vector<std::string> gpu_mismatches;  // cells whose two sides ran on different shards of `--gpus`
  for (const auto& k : cand.order)
    if (cand.check[k] != "pass") check_problems.push_back(k + ": " + (cand.check[k] == "FAIL" ? "check FAILED" : "not verified (check null)"));
  const std::string unv = o.no_gate ? " UNVERIFIED" : "";
  if (base) {
    json brows = json::array();
    for (const auto& k : bside.order) brows.push_back(pooled_row(bside.last_row[k], bside.pooled(k), o.rounds));
    doc["baseline"] = {{"ref", base->ref}, {"sha", base->sha}, {"results", brows}, {"machine", bside.last_file.machine}};
    out << fmt::format("\n{:<44} {:>10} {:>10} {:>26} {:>8} {}\n", "cell", "base ms", "cand ms", "speedup [95% CI]", "verdict", "check");
    std::set<std::string> seen;
    std::uint64_t cell_seed = o.seed;
    std::vector<std::string> keys = cand.order;
    for (const auto& k : bside.order)
      if (!cand.has(k)) keys.push_back(k);
    for (const auto& k : keys) {
      const json& rowj = cand.last_row.count(k) ? cand.last_row[k] : bside.last_row[k];
      json c = {{"op", rowj.value("op", "")}, {"mode", rowj.value("mode", "")}, {"shape", rowj.value("shape", "")},
                {"shape_keys", rowj.value("shape_keys", json(nullptr))}};
      const bool in_c = cand.has(k), in_b = bside.has(k);
      if (in_c && in_b) {
        const CellComparison cc = compare_rounds(bside.rounds[k], cand.rounds[k], ++cell_seed, o.threshold_pct);
        matched.emplace_back(bside.rounds[k], cand.rounds[k]);
        if (const std::string why = shard_mismatch(bside.last_row[k], cand.last_row[k]); !why.empty()) {
          c["gpu_mismatch"] = why;
          gpu_mismatches.push_back(k + ": " + why);
        }
        faster += cc.verdict == "faster";
        slower += cc.verdict == "slower";
        c.update({{"base_median_ms", cc.base_median_ms}, {"head_median_ms", cc.head_median_ms}, {"speedup", cc.speedup},
                  {"ci_low", cc.ci_low}, {"ci_high", cc.ci_high}, {"change_pct", cc.latency_change_pct()}, {"verdict", cc.verdict},
                  {"check", cand.check[k]}, {"base_check", bside.check[k]}});
        out << fmt::format("{:<44} {:>10} {:>10} {:>8.3f}x [{:.3f}, {:.3f}] {:>8} {}{}\n", k, fmt_ms(cc.base_median_ms),
                           fmt_ms(cc.head_median_ms), cc.speedup, cc.ci_low, cc.ci_high, cc.verdict, cand.check[k], unv);
      } else {
        const std::string v = in_c ? "new" : "removed";
        const double median = median_of(in_c ? cand.pooled(k) : bside.pooled(k));  // the one side that has the cell
        c.update({{"base_median_ms", in_b ? json(median) : json(nullptr)},
                  {"head_median_ms", in_c ? json(median) : json(nullptr)}, {"speedup", nullptr},
                  {"ci_low", nullptr}, {"ci_high", nullptr}, {"change_pct", nullptr}, {"verdict", v},
                  {"check", in_c ? json(cand.check[k]) : json(nullptr)}});
        out << fmt::format("{:<44} {:>10} {:>10} {:>26} {:>8} {}\n", k, in_b ? fmt_ms(median) : "-", in_c ? fmt_ms(median) : "-",
                           "-", v, in_c ? cand.check[k] : "-");
      }
      doc["comparisons"].push_back(c);
    }
  } else {
    out << fmt::format("\n{:<44} {:>10} {:>10} {}\n", "cell", "cand ms", "min ms", "check");
    for (const auto& k : cand.order) {
      const std::vector<double> t = cand.pooled(k);
      out << fmt::format("{:<44} {:>10} {:>10} {}{}\n", k, fmt_ms(median_of(t)), fmt_ms(*std::min_element(t.begin(), t.end())), cand.check[k], unv);
    }
  }

  // 5. Mechanism evidence: roofline fractions as the candidate reported them.
  out << "\nroofline (candidate):\n";
  for (const auto& k : cand.order) {
    const json& r = cand.last_row[k];
    auto num = [&](const char* key, const char* f) {
      return r.contains(key) && r[key].is_number() ? fmt::format(fmt::runtime(f), r[key].get<double>()) : std::string("-");
    };
    out << fmt::format("  {:<42} {:>9} GB/s {:>8} TFLOP/s  HBM {:>6}  TC {:>6}\n", k, num("gbps", "{:.1f}"), num("tflops", "{:.2f}"),
                       num("frac_hbm", "{:.3f}"), num("frac_tc", "{:.3f}"));
  }

  // 6. Verdict with every reason.
  std::vector<std::string> reasons;
  bool promote = true;
  std::string label;
  auto reason = [&](bool ok, const std::string& text) {
    reasons.push_back(std::string(ok ? "[ok] " : "[no] ") + text);
    promote = promote && ok;
  };
  if (o.no_gate) reason(false, "gate not run (--no-gate): UNVERIFIED");
  else if (gate.status == GateStatus::green) reason(true, fmt::format("full gate green: {}/{} passed, no skips, no filter", gate.passed, gate.selected));
  else
    reason(false, fmt::format("gate {}: {}/{} passed, {} skipped{} (a partial or filtered gate is a signal, never a promotion)",
                              gate_status_name(gate.status), gate.passed, gate.selected, gate.skipped,
                              gate.filter.empty() ? "" : ", filter '" + gate.filter + "'"));
  if (check_problems.empty()) reason(true, fmt::format("every benchmarked cell's own check passed ({} cells)", cand.order.size()));
  for (const auto& p : check_problems) reason(false, "cell " + p);
  if (!base) {
    reason(false, "no baseline (--base REF): nothing to compare against");
  } else {
    const std::string cg = cand.last_file.gpu, bg = bside.last_file.gpu;
    reason(!cg.empty() && cg == bg, cg.empty() ? "no GPU reported by the candidate (CPU timings)"
                                               : cg == bg ? "same GPU on both sides: " + cg : "different GPUs: candidate " + cg + ", baseline " + bg);
  }
  for (const auto& m : gpu_mismatches) reason(false, "cell " + m);
  const std::string cc_str = cand.last_file.machine.is_object() && cand.last_file.machine.contains("compute_capability")
                                 ? (cand.last_file.machine["compute_capability"].is_string() ? cand.last_file.machine["compute_capability"].get<std::string>()
                                                                                            : cand.last_file.machine["compute_capability"].dump())
                                 : "";
  const bool dc = is_promotion_gpu(cand.last_file.gpu, cc_str);
  reason(dc, dc ? "sm_90+ datacenter GPU: " + cand.last_file.gpu
                : "hardware '" + (cand.last_file.gpu.empty() ? std::string("cpu") : cand.last_file.gpu) + "' is not an sm_90+ datacenter GPU: supplementary");
  GeomeanComparison gm;
  if (base && !matched.empty()) {
    gm = bootstrap_geomean_rounds(matched, o.seed);
    out << fmt::format("\ngeomean speedup over {} cells: {:.3f}x [{:.3f}, {:.3f}]  ({} faster, {} slower, {} within noise)\n", gm.cells,
                       gm.geomean, gm.ci_low, gm.ci_high, faster, slower, gm.cells - faster - slower);
    doc["geomean"] = {{"speedup", gm.geomean}, {"ci_low", gm.ci_low}, {"ci_high", gm.ci_high}, {"cells", gm.cells},
                      {"faster", faster}, {"slower", slower}};
    const bool win = gm.ci_low > 1.0 && faster > 0 && slower == 0;
    reason(win, win ? fmt::format("repeatable win: geomean {:.3f}x, interval [{:.3f}, {:.3f}] above 1, {} faster cells, none slower", gm.geomean,
                                  gm.ci_low, gm.ci_high, faster)
                    : fmt::format("no repeatable win: geomean {:.3f}x [{:.3f}, {:.3f}], {} faster, {} slower", gm.geomean, gm.ci_low,
                                  gm.ci_high, faster, slower));
  } else if (base) {
    reason(false, "no cell was measured on both sides");
  }
  const fs::path pdir = o.repo / "profile" / (o.op + "-opt");
  json contract;
  if (fs::is_regular_file(pdir / "contract.json")) {
    try {
      contract = read_json_file(pdir / "contract.json");
    } catch (const Error& e) {
      reason(false, e.what());
    }
  }
  std::string profile;
  std::error_code ec;
  if (fs::is_directory(pdir, ec))
    for (const auto& e : fs::directory_iterator(pdir))
      if (e.path().extension() == ".ncu-rep") profile = e.path().string();
  if (profile.empty() && contract.is_object() && contract.contains("profile") && !contract["profile"].is_null() && !contract["profile"].empty())
    profile = contract["profile"].dump();
  reason(!profile.empty(), profile.empty() ? "needs profiler evidence: no .ncu-rep in " + pdir.string() + " and no profile linked in its contract.json (roofline figures above are mechanism evidence only)"
                                           : "profiler evidence: " + profile);
  if (contract.is_object() && contract.contains("frozen_hashes") && contract["frozen_hashes"].is_object()) {
    const auto now = frozen_hashes(o.repo, o.op);
    std::vector<std::string> changed;
    for (const auto& [path, h] : contract["frozen_hashes"].items()) {
      auto it = now.find(path);
      if (it == now.end() || !h.is_string() || it->second != h.get<std::string>()) changed.push_back(path);
    }
    for (const auto& [path, h] : now)
      if (!contract["frozen_hashes"].contains(path)) changed.push_back(path + " (new)");
    if (changed.empty()) reason(true, fmt::format("frozen gate unchanged ({} files hashed at `lina loop init`)", now.size()));
    for (const auto& c : changed) reason(false, "frozen file changed since `lina loop init`: " + c + ": refusing to promote");
  } else {
    reason(false, "no frozen-hash record (" + (pdir / "contract.json").string() + " key frozen_hashes): run `lina loop init --op " + o.op + "` first");
  }

  if (promote) label = "promote";
  else if (o.no_gate) label = "UNVERIFIED";
  else if (!check_problems.empty()) label = "check failed";
  else if (slower > 0) label = "regression";
  else if (!dc) label = "supplementary";
  else if (base && !(gm.ci_low > 1.0 && faster > 0)) label = "within noise";
  else label = "not promoted";
  out << "\nverdict: " << (promote ? "PROMOTE" : "do not promote") << " (" << label << ")\n";
  for (const auto& r : reasons) out << "  " << r << "\n";
  doc["verdict"] = {{"promote", promote}, {"label", label}, {"reasons", reasons}};
  return finish(o.fail_on_regression && slower > 0 ? kVerifyRegression : kVerifyOk);
}

}  // namespace lina::harness
