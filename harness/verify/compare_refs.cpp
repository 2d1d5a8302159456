#include "harness/verify/compare_refs.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include <fmt/format.h>

#include "harness/verify/baseline.h"
#include "harness/verify/compare.h"
#include "harness/util/json_file.h"
#include "harness/util/subprocess.h"
#include "harness/util/terminal_text.h"
#include "harness/util/text_file.h"
#include "harness/engine/stats.h"
#include "harness/results/summary.h"
#include "lina/build_info.h"
#include "lina/error.h"
#include "lina/version.h"


namespace lina::harness {
namespace fs = std::filesystem;
using nlohmann::json;

fs::path build_ref_binary(const fs::path& repo, const std::string& ref, const std::string& flag) {
  try {
    BaselineOptions bo;
    bo.repo = repo;
    bo.ref = ref;
    // Same backend choice as this build, so both sides run the same code paths.
    bo.cmake_args = {std::string("-DLINA_WITH_CUDA=") + (LINA_BUILD_CUDA_ENABLED ? "ON" : "OFF")};
    const Baseline b = prepare_baseline(bo);
    for (const auto& w : b.warnings) std::fprintf(stderr, "lina: warning: %s\n", w.c_str());
    std::fprintf(stderr, "lina: %s %s -> %s (%s)\n", flag.c_str(), ref.c_str(), b.lina_exe.c_str(), b.reused ? "cached" : "built");
    return b.lina_exe;
  } catch (const BaselineError& e) {
    throw CompareSideError(e.what());
  }
}

std::vector<std::string> lina_run_argv(const std::string& lina, const std::vector<std::string>& ops,
                                       const std::vector<std::string>& modes, const std::vector<std::string>& shapes,
                                       const std::string& json_path, std::optional<std::uint64_t> seed, int gpus, bool safe_gate,
                                       const std::string& backend) {
  std::string op_list;
  for (const auto& o : ops) op_list += (op_list.empty() ? "" : ",") + o;
  // --no-base: each side is measured alone; the pairing happens here, round by round.
  std::vector<std::string> a{lina, "run", "--op", op_list, "--no-base"};
  if (!modes.empty()) {
    a.push_back("--modes");
    a.insert(a.end(), modes.begin(), modes.end());
  }
  if (!shapes.empty()) {
    std::string s;
    for (const auto& x : shapes) s += (s.empty() ? "" : ",") + x;
    a.insert(a.end(), {"--shapes", s});
  }
  if (!backend.empty()) a.insert(a.end(), {"--backend", backend});
  if (seed) a.insert(a.end(), {"--seed", std::to_string(*seed)});
  if (gpus > 1) a.insert(a.end(), {"--gpus", std::to_string(gpus)});
  if (!safe_gate) a.insert(a.end(), {"--safe-gate", "off"});  // only when asked: older builds lack the option
  a.insert(a.end(), {"--json", json_path});
  return a;
}

std::string shard_mismatch(const json& base_row, const json& head_row) {
  const json none;
  const json& b = base_row.contains("shard") ? base_row["shard"] : none;
  const json& h = head_row.contains("shard") ? head_row["shard"] : none;
  if (b == h) return {};
  return "timed on shard " + b.dump() + " for the base and " + h.dump() + " for the head (two GPUs: the two builds' cell plans differ)";
}

namespace {

std::string row_key(const json& row) {
  const json keys = row.contains("shape_keys") ? row["shape_keys"] : json(nullptr);
  return row.value("op", "") + "|" + row.value("mode", "") + "|" + row.value("shape", "") + "|" + keys.dump();
}

struct Pooled {
  json row;  // the cell's first row, with pooled samples and statistics
  RoundSamples round_times;  // one vector per round (the interval's first level; pooled for the statistics)
  int rounds = 0;
};

// Pools every round's samples per cell, in order of first appearance.
std::pair<std::vector<std::string>, std::map<std::string, Pooled>> pool(const std::vector<json>& runs) {
  std::vector<std::string> order;
  std::map<std::string, Pooled> cells;
  for (const auto& doc : runs) {
    for (const auto& row : doc.at("results")) {
      const std::string k = row_key(row);
      auto [it, fresh] = cells.try_emplace(k);
      Pooled& p = it->second;
      if (fresh) { order.push_back(k); p.row = row; }
      ++p.rounds;
      std::vector<double>& rt = p.round_times.emplace_back();
      if (row.contains("times_ms") && row["times_ms"].is_array() && !row["times_ms"].empty()) {
        for (const auto& t : row["times_ms"]) rt.push_back(t.get<double>());
      } else {
        rt.push_back(row.at("median_ms").get<double>());
      }
      // A cell is only as verified as its worst round.
      const json& chk = row.contains("check") ? row["check"] : json(nullptr);
      const bool failed = chk.is_object() && chk.contains("pass") && chk["pass"] == false;
      const bool missing = !chk.is_object() || !chk.contains("pass") || chk["pass"].is_null();
      const json& cur = p.row.contains("check") ? p.row["check"] : json(nullptr);
      const bool cur_failed = cur.is_object() && cur.contains("pass") && cur["pass"] == false;
      if (failed || (missing && !cur_failed)) p.row["check"] = chk;
      if (row.value("throttled", false)) p.row["throttled"] = true;
    }
  }
  for (auto& [k, p] : cells) {
    const std::vector<double> times = pooled_samples(p.round_times);
    const Summary st = summarize(times);
    json& r = p.row;
    r["times_ms"] = times;
    r["samples"] = times.size();
    r["median_ms"] = st.median;
    r["mean_ms"] = st.mean;
    r["std_ms"] = st.std;
    r["min_ms"] = st.min;
    r["p10_ms"] = st.p10;
    r["p20_ms"] = st.p20;
    r["p80_ms"] = st.p80;
    r["p90_ms"] = st.p90;
    r["noise"] = st.noise();
    r["rounds"] = p.rounds;
  }
  return {order, cells};
}

}  // namespace

json compare_documents(const std::vector<json>& base_runs, const std::vector<json>& head_runs, const CompareSide& base,
                       const CompareSide& head, const CompareOptions& opt) {
  if (base_runs.empty() || head_runs.empty()) throw Error(ErrorCode::invalid_argument, "rounds", "compare needs at least one run per side");
  auto [base_order, base_cells] = pool(base_runs);
  auto [head_order, head_cells] = pool(head_runs);
  json comparisons = json::array();
  auto cmp_row = [](const json& r) {
    return json{{"op", r.value("op", "")}, {"mode", r.value("mode", "")}, {"shape", r.value("shape", "")},
                {"shape_keys", r.contains("shape_keys") ? r["shape_keys"] : json(nullptr)}};
  };
  std::uint64_t salt = 0;
  for (const auto& k : head_order) {
    const Pooled& h = head_cells.at(k);
    json c = cmp_row(h.row);
    c["head_median_ms"] = h.row["median_ms"];
    auto it = base_cells.find(k);
    if (it == base_cells.end()) {
      c.update(json{{"base_median_ms", nullptr}, {"speedup", nullptr}, {"ci_low", nullptr}, {"ci_high", nullptr},
                    {"change_pct", nullptr}, {"verdict", "new"}});
    } else {
      // Rounds, then samples (harness/verify/compare.h, RoundSamples: a round's samples share its process's state); the
      // medians are the pooled rows' medians, the verdict verify's rule; change_pct is the latency change.
      const CellComparison cc = compare_rounds(it->second.round_times, h.round_times, opt.bootstrap_seed + salt++, opt.threshold_pct, opt.bootstrap);
      c.update(json{{"base_median_ms", cc.base_median_ms}, {"speedup", cc.speedup}, {"ci_low", cc.ci_low}, {"ci_high", cc.ci_high},
                    {"change_pct", cc.latency_change_pct()}, {"verdict", cc.verdict}});
      if (const std::string why = shard_mismatch(it->second.row, h.row); !why.empty()) c["gpu_mismatch"] = why;
    }
    comparisons.push_back(c);
  }
  for (const auto& k : base_order) {
    if (head_cells.count(k)) continue;
    json c = cmp_row(base_cells.at(k).row);
    c.update(json{{"base_median_ms", base_cells.at(k).row["median_ms"]}, {"head_median_ms", nullptr}, {"speedup", nullptr},
                  {"ci_low", nullptr}, {"ci_high", nullptr}, {"change_pct", nullptr}, {"verdict", "removed"}});
    comparisons.push_back(c);
  }
  json head_rows = json::array(), base_rows = json::array();
  for (const auto& k : head_order) head_rows.push_back(head_cells.at(k).row);
  for (const auto& k : base_order) base_rows.push_back(base_cells.at(k).row);

  const json& last_head = head_runs.back();
  const json& last_base = base_runs.back();
  auto sha_of = [](const json& d) { return d.contains("tool") && d["tool"].is_object() ? d["tool"].value("git_sha", "") : std::string(); };
  auto dirty_of = [](const json& d) { return d.contains("tool") && d["tool"].is_object() && d["tool"].value("git_dirty", false); };
  auto command_of = [](const json& d) { return d.contains("config") && d["config"].is_object() ? d["config"].value("command", "") : std::string(); };
  json config = last_head.contains("config") && last_head["config"].is_object() ? last_head["config"] : json::object();
  config["command"] = opt.command;
  config["rounds"] = opt.rounds;
  config["threshold_pct"] = opt.threshold_pct;
  config["gpus"] = opt.gpus;
  config["safe_gate"] = opt.safe_gate;

  int slower = 0, faster = 0, added = 0, removed = 0;
  std::vector<std::string> reasons;
  for (const auto& c : comparisons) {
    const std::string v = c["verdict"];
    slower += v == "slower"; faster += v == "faster"; added += v == "new"; removed += v == "removed";
    if (v == "slower") reasons.push_back(fmt::format("{} {} {} slower by {:.1f}%", c["op"].get<std::string>(), c["mode"].get<std::string>(), c["shape"].get<std::string>(), c["change_pct"].get<double>()));
    if (c.contains("gpu_mismatch"))
      reasons.push_back(fmt::format("{} {} {} {}", c["op"].get<std::string>(), c["mode"].get<std::string>(), c["shape"].get<std::string>(),
                                    c["gpu_mismatch"].get<std::string>()));
  }
  if (removed) reasons.push_back(fmt::format("{} cells removed", removed));
  if (added) reasons.push_back(fmt::format("{} cells new", added));
  reasons.push_back("compare runs no gate: it never promotes (use lina verify)");
  return json{{"schema", kSchema},
              {"kind", "compare"},
              {"tool", {{"name", "lina"}, {"version", lina::kVersion}, {"git_sha", LINA_BUILD_GIT_SHA}, {"git_dirty", static_cast<bool>(LINA_BUILD_GIT_DIRTY)}}},
              {"machine", last_head.contains("machine") ? last_head["machine"] : json(nullptr)},
              {"config", config},
              {"head", {{"ref", head.ref}, {"sha", sha_of(last_head)}, {"git_dirty", dirty_of(last_head)}, {"binary", head.binary.string()}, {"command", command_of(last_head)}}},
              {"results", head_rows},
              {"gate", nullptr},
              {"baseline", {{"ref", base.ref}, {"sha", sha_of(last_base)}, {"git_dirty", dirty_of(last_base)}, {"binary", base.binary.string()}, {"command", command_of(last_base)}, {"results", base_rows}}},
              {"comparisons", comparisons},
              {"verdict", {{"promote", false}, {"label", slower ? "regression" : faster ? "faster" : "no significant change"}, {"reasons", reasons}}}};
}

json run_compare(const CompareSide& base, const CompareSide& head, const CompareOptions& opt, const fs::path& workdir) {
  std::error_code ec;
  if (fs::equivalent(base.binary, head.binary, ec)) {
    throw Error(ErrorCode::invalid_argument, "--base-binary", "base and head are the same binary (" + base.binary.string() + "): a baseline can never be the candidate");
  }
  if (opt.rounds < 1) throw Error(ErrorCode::invalid_argument, "--rounds", "--rounds must be >= 1");
  fs::create_directories(workdir);
  std::vector<json> runs[2];
  const CompareSide* sides[2] = {&base, &head};
  for (int round = 0; round < opt.rounds; ++round) {
    // Alternate the order so that neither side always runs on a warmer (or hotter) GPU.
    for (int j = 0; j < 2; ++j) {
      const int s = (round % 2 == 0) ? j : 1 - j;
      const CompareSide& side = *sides[s];
      const fs::path out = workdir / fmt::format("{}_round{}.json", side.name, round);
      fs::remove(out, ec);
      const auto argv = lina_run_argv(side.binary.string(), opt.ops, opt.modes, opt.shapes, out.string(), opt.seed, opt.gpus,
                                      opt.safe_gate);
      ProcessOptions po;
      po.timeout = child_timeout(kDefaultTimeout);
      auto r = run_process(argv, po);
      if (r.exit_code != 0) {
        const std::string err = r.timed_out ? timeout_message(po) : r.err_or_spawn_error();
        // A build from before `lina run --gpus` refuses the option (exit 2).
        const std::string hint = opt.gpus > 1 && r.exit_code == 2 ? " (a build older than `lina run --gpus` cannot shard: compare without --gpus)" : "";
        throw CompareSideError(fmt::format("{} ({}): `{} run` exited {} in round {}{}:\n{}", side.name, side.binary.string(),
                                           side.binary.string(), r.exit_code, round, hint, last_chars(err, 2000)));
      }
      // A side's broken output is that side's failure (exit 3), whatever is wrong with it.
      json doc;
      std::string sha;
      try {
        doc = read_json_file(out);
        const SummaryFile f = parse_summary_file(doc, out);  // validates the contract; names file and key
        sha = f.head_sha;
      } catch (const std::exception& e) {
        throw CompareSideError(fmt::format("{}: {} did not write a readable result: {}", side.name, out.string(), e.what()));
      }
      // A side must be provably the commit it claims to be.
      if (!side.sha.empty() && sha != side.sha) {
        throw CompareSideError(fmt::format("{}: {} reports git_sha `{}`, expected {} ({}); refusing the comparison",
                                           side.name, side.binary.string(), sha, side.sha, side.ref));
      }
      runs[s].push_back(std::move(doc));
    }
  }
  return compare_documents(runs[0], runs[1], base, head, opt);
}

std::vector<std::string> regressions(const json& doc) {
  std::vector<std::string> out;
  for (const auto& c : doc.at("comparisons"))
    if (c.value("verdict", "") == "slower") out.push_back(c.value("op", "") + " " + c.value("mode", "") + " " + c.value("shape", ""));
  return out;
}

std::string render_compare_text(const json& doc, double threshold_pct) {
  const SummaryFile f = parse_summary_file(doc, "(compare)");
  std::string out = fmt::format("base {} ({})  vs  head {} ({})\n", f.base_sha, f.base_ref, f.head_sha, doc["head"].value("ref", ""));
  auto section = [&](const char* title, const char* verdict) {
    std::string s;
    for (const auto& c : ranked(f.comparisons)) {
      if (c.verdict != verdict) continue;
      if (c.speedup) {
        s += fmt::format("  {} {} {}: {:.4f} -> {:.4f} ms, speedup {:.3f}x [{:.3f}, {:.3f}], {:+.2f}%\n", c.op, c.mode, c.shape,
                         *c.base_ms, *c.head_ms, *c.speedup, c.ci_low.value_or(NAN), c.ci_high.value_or(NAN), *c.change_pct);
      } else {
        s += fmt::format("  {} {} {}\n", c.op, c.mode, c.shape);
      }
    }
    if (!s.empty()) out += std::string(title) + ":\n" + s;
  };
  section("regressions", "slower");
  section("improvements", "faster");
  section("within noise or under threshold", "noise");
  section("new cells (head only)", "new");
  section("removed cells (base only)", "removed");
  auto g = geomean_speedup(f.comparisons);
  out += fmt::format("geomean speedup {} over {} paired cells (threshold {}%)\n", g ? fmt::format("{:.3f}x", *g) : "-",
                     std::count_if(f.comparisons.begin(), f.comparisons.end(), [](const auto& c) { return c.speedup.has_value(); }),
                     threshold_pct);
  return terminal_safe(out);
}

}  // namespace lina::harness
