#include <gtest/gtest.h>

#include <fstream>
#include <sys/stat.h>
#include <tuple>

#include "harness/verify/compare.h"
#include "harness/verify/compare_refs.h"
#include "harness/util/subprocess.h"
#include "harness/util/text_file.h"
#include "harness/results/summary.h"
#include "lina/build_info.h"
#include "lina/error.h"
#include "tools_support.h"

namespace lina::harness {
namespace {
using nlohmann::json;

json keys(int B, int T, int H, const char* varlen = nullptr) {
  return json{{"B", B}, {"T", T}, {"H", H}, {"HV", H}, {"K", 128}, {"V", 128},
              {"varlen", varlen ? json(varlen) : json(nullptr)}, {"num_seqs", B}};
}

json cell(const std::string& mode, const std::string& shape, const json& k, double center, bool pass = true) {
  std::vector<double> t;
  for (int i = 0; i < 12; ++i) t.push_back(center * (1.0 + 0.004 * ((i * 7) % 5 - 2)));  // +-0.8 % spread
  return json{{"op", "chunk_kda"}, {"mode", mode}, {"shape", shape}, {"shape_keys", k}, {"times_ms", t},
              {"median_ms", center}, {"check", {{"pass", pass}, {"err_ratio", 0.001}}}};
}

json run_doc(const std::string& sha, std::vector<json> rows) {
  return json{{"schema", "lina.bench/1"}, {"kind", "run"}, {"tool", {{"name", "lina"}, {"git_sha", sha}, {"git_dirty", false}}},
              {"machine", {{"gpu", "NVIDIA H200"}}}, {"config", {{"command", "lina run --op chunk_kda"}}},
              {"results", rows}, {"gate", nullptr}, {"baseline", nullptr}, {"comparisons", json::array()}, {"verdict", nullptr}};
}

const json kB1 = keys(1, 8192, 96), kB2 = keys(2, 16384, 16), kVL = keys(1, 32768, 16, "longtail"), kVU = keys(1, 32768, 16, "uniform");

json base_run() {
  return run_doc(std::string(40, 'b'), {cell("fwd", "B1_T8192_H96_D128", kB1, 2.0), cell("fwd", "B2_T16384_H16_D128", kB2, 1.0),
                                        cell("bwd", "B1_T8192_H96_D128", kB1, 5.0), cell("fwd", "varlen_T32768_H16_D128", kVL, 1.5),
                                        cell("infer", "B1_T8192_H96_D128", kB1, 0.7)});
}
json head_run() {
  // fwd B1 20 % faster, fwd B2 12 % slower, bwd unchanged, varlen distribution changed under the
  // same shape name (a different cell), infer dropped, fwdbwd added.
  return run_doc(std::string(40, 'h'), {cell("fwd", "B1_T8192_H96_D128", kB1, 1.6), cell("fwd", "B2_T16384_H16_D128", kB2, 1.12),
                                        cell("bwd", "B1_T8192_H96_D128", kB1, 5.0), cell("fwd", "varlen_T32768_H16_D128", kVU, 1.5),
                                        cell("fwdbwd", "B1_T8192_H96_D128", kB1, 7.0, false)});
}

// A run with the one cell fwd B1_T8192_H96_D128 centred on `center` ms.
json b1_run(double center) { return run_doc(std::string(40, 'b'), {cell("fwd", "B1_T8192_H96_D128", kB1, center)}); }

const json* find(const json& cmps, const std::string& mode, const std::string& shape, const json& k) {
  for (const auto& c : cmps)
    if (c["mode"] == mode && c["shape"] == shape && c["shape_keys"] == k) return &c;
  return nullptr;
}

// Two of the base's three rounds ran 8 % slow with identical code (a process's memory placement moves all of its
// samples): the pooled samples' bootstrap excludes 1, but a resample of rounds may draw the fast round alone, so the
// interval reaches 1 and the verdict is noise.
TEST(ToolsCompare, SlowRoundsAreNotAVerdict) {
  CompareSide base{"base", "main", "", "/b"}, head{"head", "HEAD", "", "/h"};
  CompareOptions opt;
  opt.rounds = 3;
  opt.threshold_pct = 2.0;
  const json doc = compare_documents({b1_run(2.16), b1_run(2.16), b1_run(2.0)}, {b1_run(2.0), b1_run(2.0), b1_run(2.0)}, base, head, opt);
  const json* c = find(doc["comparisons"], "fwd", "B1_T8192_H96_D128", kB1);
  ASSERT_NE(c, nullptr);
  EXPECT_GT((*c)["speedup"].get<double>(), 1.05);  // the pooled medians
  EXPECT_LE((*c)["ci_low"].get<double>(), 1.0) << c->dump();
  EXPECT_EQ((*c)["verdict"], "noise");
  std::vector<double> pb, ph;  // the same samples pooled: what the interval was before rounds counted
  const json slow = b1_run(2.16), fast = b1_run(2.0);
  for (const json* d : {&slow, &slow, &fast})
    for (const auto& t : (*d)["results"][0]["times_ms"]) pb.push_back(t.get<double>());
  for (int r = 0; r < 3; ++r)
    for (const auto& t : fast["results"][0]["times_ms"]) ph.push_back(t.get<double>());
  EXPECT_GT(compare_samples(pb, ph, 7, kDefaultThresholdPct, 2000).ci_low, 1.0);
}

// `lina run --gpus N` rows name their shard: a cell the two sides timed on different GPUs is marked and named in the
// verdict's reasons; the same shard on both sides, or rows of one-process runs, are not.
TEST(ToolsCompare, ACellTimedOnTwoGpusIsNamed) {
  CompareSide base{"base", "main", "", "/b"}, head{"head", "HEAD", "", "/h"};
  CompareOptions opt;
  opt.rounds = 1;
  opt.gpus = 2;
  json b = base_run(), h = head_run();
  for (auto* d : {&b, &h})
    for (std::size_t i = 0; i < (*d)["results"].size(); ++i) (*d)["results"][i]["shard"] = static_cast<int>(i % 2);
  h["results"][1]["shard"] = 0;  // fwd B2: shard 1 for the base, 0 for the head
  const json doc = compare_documents({b}, {h}, base, head, opt);
  EXPECT_EQ(doc["config"]["gpus"], 2);
  const json* moved = find(doc["comparisons"], "fwd", "B2_T16384_H16_D128", kB2);
  ASSERT_NE(moved, nullptr);
  EXPECT_EQ((*moved)["gpu_mismatch"], "timed on shard 1 for the base and 0 for the head (two GPUs: the two builds' cell plans differ)");
  const json* same = find(doc["comparisons"], "fwd", "B1_T8192_H96_D128", kB1);
  ASSERT_NE(same, nullptr);
  EXPECT_FALSE(same->contains("gpu_mismatch")) << same->dump();
  int named = 0;
  for (const auto& r : doc["verdict"]["reasons"]) named += r.get<std::string>().find("B2_T16384_H16_D128 timed on shard 1") != std::string::npos;
  EXPECT_EQ(named, 1) << doc["verdict"].dump();
  EXPECT_TRUE(shard_mismatch(base_run()["results"][0], head_run()["results"][0]).empty());
  EXPECT_EQ(lina_run_argv("lina", {"chunk_kda"}, {}, {}, "o.json", 3, 4),
            (std::vector<std::string>{"lina", "run", "--op", "chunk_kda", "--no-base", "--seed", "3", "--gpus", "4", "--json", "o.json"}));
  // --safe-gate off reaches both sides; the default adds nothing (builds older than the option still run)
  EXPECT_EQ(lina_run_argv("lina", {"chunk_kda"}, {}, {}, "o.json", std::nullopt, 1, false),
            (std::vector<std::string>{"lina", "run", "--op", "chunk_kda", "--no-base", "--safe-gate", "off", "--json", "o.json"}));
}

// compare and verify read one rule (harness/verify/compare.h, speedup_verdict): the threshold applies to the speedup, so a
// 1.051x cell whose interval excludes 1 is faster for both (its latency change is -4.85 %, under a 5 % latency
// threshold: compare alone called it noise), and a 0.951x cell (latency +5.1 %) is noise for both.
TEST(ToolsCompare, VerdictIsVerifysRule) {
  CompareSide base{"base", "main", "", "/b"}, head{"head", "HEAD", "", "/h"};
  CompareOptions opt;
  opt.rounds = 3;
  opt.threshold_pct = 5.0;
  const auto rounds_of = [](const json& run) {
    std::vector<double> t;
    for (const auto& x : run["results"][0]["times_ms"]) t.push_back(x.get<double>());
    return RoundSamples{t, t, t};
  };
  for (const auto& [b, h, want] : {std::tuple{2.102, 2.0, "faster"}, std::tuple{2.0, 2.102, "noise"}}) {
    const json doc = compare_documents({b1_run(b), b1_run(b), b1_run(b)}, {b1_run(h), b1_run(h), b1_run(h)}, base, head, opt);
    const json* c = find(doc["comparisons"], "fwd", "B1_T8192_H96_D128", kB1);
    ASSERT_NE(c, nullptr);
    EXPECT_TRUE((*c)["ci_low"].get<double>() > 1.0 || (*c)["ci_high"].get<double>() < 1.0) << c->dump();  // not the interval
    EXPECT_EQ((*c)["verdict"], want) << c->dump();
    const CellComparison v = compare_rounds(rounds_of(b1_run(b)), rounds_of(b1_run(h)), 1, opt.threshold_pct);
    EXPECT_EQ((*c)["verdict"], v.verdict) << "verify's rule on the same samples";
    EXPECT_NEAR((*c)["change_pct"].get<double>(), (h / b - 1.0) * 100.0, 1e-9);  // still the latency change
  }
}

TEST(ToolsCompare, MatchesRowsOnEveryShapeKey) {
  CompareSide base{"base", "main", "", "/b"}, head{"head", "HEAD", "", "/h"};
  CompareOptions opt;
  opt.rounds = 2;
  const json doc = compare_documents({base_run(), base_run()}, {head_run(), head_run()}, base, head, opt);
  const json& c = doc["comparisons"];
  ASSERT_EQ(c.size(), 7u);  // 4 head cells paired or new + fwdbwd new + 2 removed
  auto v = [&](const std::string& m, const std::string& s, const json& k) {
    const json* r = find(c, m, s, k);
    return r ? (*r)["verdict"].get<std::string>() : std::string("missing");
  };
  EXPECT_EQ(v("fwd", "B1_T8192_H96_D128", kB1), "faster");
  EXPECT_EQ(v("fwd", "B2_T16384_H16_D128", kB2), "slower");
  EXPECT_EQ(v("bwd", "B1_T8192_H96_D128", kB1), "noise");
  EXPECT_EQ(v("fwd", "varlen_T32768_H16_D128", kVU), "new");
  EXPECT_EQ(v("fwd", "varlen_T32768_H16_D128", kVL), "removed");
  EXPECT_EQ(v("fwdbwd", "B1_T8192_H96_D128", kB1), "new");
  EXPECT_EQ(v("infer", "B1_T8192_H96_D128", kB1), "removed");
  const json& f = *find(c, "fwd", "B1_T8192_H96_D128", kB1);
  EXPECT_NEAR(f["speedup"].get<double>(), 1.25, 1e-12);
  EXPECT_NEAR(f["change_pct"].get<double>(), -20.0, 1e-9);
  EXPECT_GT(f["ci_low"].get<double>(), 1.2);
  EXPECT_LT(f["ci_high"].get<double>(), 1.3);
  const json& n = *find(c, "bwd", "B1_T8192_H96_D128", kB1);
  EXPECT_LE(n["ci_low"].get<double>(), 1.0);
  EXPECT_GE(n["ci_high"].get<double>(), 1.0);
  // Rows pool every round's samples.
  EXPECT_EQ(doc["results"][0]["samples"], 24);
  EXPECT_EQ(doc["results"][0]["rounds"], 2);
  EXPECT_EQ(doc["baseline"]["sha"], std::string(40, 'b'));
  EXPECT_EQ(doc["head"]["sha"], std::string(40, 'h'));
  EXPECT_EQ(regressions(doc), std::vector<std::string>{"chunk_kda fwd B2_T16384_H16_D128"});
  EXPECT_EQ(doc["verdict"]["promote"], false);
  // The document is a valid compare file for summarize.
  const SummaryFile s = parse_summary_file(doc, "doc");
  EXPECT_EQ(s.kind, "compare");
  EXPECT_EQ(s.comparisons.size(), 7u);
  const std::string text = render_compare_text(doc, 5);
  EXPECT_NE(text.find("regressions:\n  chunk_kda fwd B2_T16384_H16_D128"), std::string::npos) << text;
  EXPECT_NE(text.find("removed cells (base only):"), std::string::npos) << text;
}

TEST(ToolsCompare, ThresholdGatesVerdicts) {
  CompareSide base{"base", "", "", "/b"}, head{"head", "", "", "/h"};
  CompareOptions opt;
  opt.threshold_pct = 30;  // both real changes are under 30 % as speedups (1.25x, 0.89x; verify's rule)
  const json doc = compare_documents({base_run()}, {head_run()}, base, head, opt);
  EXPECT_EQ((*find(doc["comparisons"], "fwd", "B1_T8192_H96_D128", kB1))["verdict"], "noise");
  EXPECT_TRUE(regressions(doc).empty());
}

TEST(ToolsCompare, BootstrapIsDeterministicAndCoversTruth) {
  std::vector<double> b, h;
  for (int i = 0; i < 30; ++i) { b.push_back(2.0 + 0.01 * (i % 7)); h.push_back(1.0 + 0.005 * (i % 5)); }
  const CellComparison c1 = compare_samples(b, h, 7, kDefaultThresholdPct, 2000), c2 = compare_samples(b, h, 7, kDefaultThresholdPct, 2000);
  const double lo = c1.ci_low, hi = c1.ci_high;
  EXPECT_EQ(lo, c2.ci_low);
  EXPECT_EQ(hi, c2.ci_high);
  EXPECT_LT(lo, 2.03 / 1.01);
  EXPECT_GT(hi, 2.03 / 1.01 - 0.02);
  EXPECT_GT(lo, 1.9);
  EXPECT_LT(hi, 2.1);
}

// A stand-in `lina` that answers `run ... --json PATH` with a canned document and logs its name.
std::string fake_lina(const std::filesystem::path& dir, const std::string& name, const json& doc, int exit_code = 0) {
  const auto canned = dir / (name + ".json");
  write_text_file(canned, doc.dump());
  const auto script = dir / name;
  write_text_file(script, "#!/bin/sh\necho " + name + " >> '" + (dir / "order.log").string() + "'\nout=\n"
                          "while [ $# -gt 0 ]; do [ \"$1\" = --json ] && out=\"$2\"; shift; done\n"
                          "cp '" + canned.string() + "' \"$out\"\nexit " + std::to_string(exit_code) + "\n");
  chmod(script.c_str(), 0755);
  return script.string();
}

TEST(ToolsCompare, AlternatesRoundsAndProvesShas) {
  lina::testing::TempDir tmp;
  CompareSide base{"base", "main", std::string(40, 'b'), fake_lina(tmp.path, "base_lina", base_run())};
  CompareSide head{"head", "HEAD", std::string(40, 'h'), fake_lina(tmp.path, "head_lina", head_run())};
  CompareOptions opt;
  opt.ops = {"chunk_kda"};
  opt.rounds = 3;
  const json doc = run_compare(base, head, opt, tmp.path / "runs");
  EXPECT_EQ(read_text_file(tmp.path / "order.log"), "base_lina\nhead_lina\nhead_lina\nbase_lina\nbase_lina\nhead_lina\n");
  EXPECT_EQ(doc["results"][0]["samples"], 36);
  // A binary that reports another commit than its ref is refused.
  CompareSide liar = base;
  liar.sha = std::string(40, 'c');
  EXPECT_THROW(run_compare(liar, head, opt, tmp.path / "runs2"), CompareSideError);
  CompareSide broken{"base", "", "", fake_lina(tmp.path, "broken_lina", base_run(), 3)};
  EXPECT_THROW(run_compare(broken, head, opt, tmp.path / "runs3"), CompareSideError);
  EXPECT_THROW(run_compare(head, head, opt, tmp.path / "runs4"), Error);  // same binary on both sides
}

TEST(ToolsCompare, CliExitCodeOnRegression) {
  const auto lina = lina::testing::lina_binary();
  if (!std::filesystem::exists(lina)) GTEST_SKIP() << "lina binary not built";
  const std::string repo = LINA_BUILD_SOURCE_DIR;
  auto head_sha = run_process({"git", "-C", repo, "rev-parse", "HEAD"});
  if (head_sha.exit_code != 0) GTEST_SKIP() << "source tree is not a git checkout";
  const std::string sha = head_sha.out.substr(0, 40);
  lina::testing::TempDir tmp;
  json b = base_run(), h = head_run();
  b["tool"]["git_sha"] = sha;
  h["tool"]["git_sha"] = sha;
  const auto bb = fake_lina(tmp.path, "b", b), hb = fake_lina(tmp.path, "h", h);
  const auto out = (tmp.path / "cmp.json").string();
  std::vector<std::string> args{lina.string(), "compare", "--repo", repo, "--base", "HEAD", "--head", "HEAD", "--base-binary", bb,
                                "--head-binary", hb, "--op", "chunk_kda", "--rounds", "2", "--output", out};
  auto ok = run_process(args);
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("regressions:"), std::string::npos) << ok.out;
  EXPECT_EQ(load_summary_file(out).kind, "compare");
  args.push_back("--fail-on-regression");
  auto reg = run_process(args);
  EXPECT_EQ(reg.exit_code, 5) << reg.err;
  auto bad_ref = run_process({lina.string(), "compare", "--repo", repo, "--base", "no-such-ref", "--base-binary", bb, "--op", "chunk_kda"});
  EXPECT_EQ(bad_ref.exit_code, 3);  // as in verify: a --base that cannot be resolved
  EXPECT_NE(bad_ref.err.find("--base: unknown git ref 'no-such-ref'"), std::string::npos) << bad_ref.err;
}

}  // namespace
}  // namespace lina::harness
