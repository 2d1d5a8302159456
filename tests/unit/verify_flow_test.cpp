// `lina verify` end to end with stand-ins: fake `lina run` scripts for candidate and baseline, the
// fake gate suite, and a temporary "repo" holding profile/<op>-opt/contract.json.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "harness/verify/frozen.h"
#include "harness/util/subprocess.h"
#include "harness/results/summary.h"
#include "harness/verify/verify.h"

namespace lina::harness {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kBaseSha = "1111111111111111111111111111111111111111";

json run_doc(const std::string& sha, double ms, const std::string& gpu = "NVIDIA H200", json check_pass = true) {
  json rows = json::array();
  for (const char* shape : {"B1_T64_H2_D64", "B2_T128_H2_D64"}) {
    json t = json::array();
    for (int i = 0; i < 12; ++i) t.push_back(ms * (1.0 + 0.002 * ((i * 7) % 5)));
    rows.push_back({{"op", "chunk_gla"}, {"mode", "fwd"}, {"shape", shape}, {"times_ms", t}, {"gbps", 1234.5},
                    {"check", {{"pass", check_pass}, {"err_ratio", 1e-4}}}});
  }
  return {{"schema", "lina.bench/1"}, {"kind", "run"}, {"tool", {{"git_sha", sha}}},
          {"machine", {{"gpu", gpu}, {"compute_capability", "9.0"}}}, {"results", rows}};
}

// A `lina` stand-in: logs its arguments (without the --json path) and answers its n-th call with docs[n] (the last
// one after that), written to --json: rounds that differ, or one doc for every round.
fs::path fake_lina_rounds(const fs::path& dir, const std::string& name, const std::vector<json>& docs) {
  for (std::size_t i = 0; i < docs.size(); ++i) std::ofstream(dir / (name + std::to_string(i) + ".json")) << docs[i].dump();
  const fs::path script = dir / name, counter = dir / (name + ".n");
  std::ofstream f(script);
  f << "#!/bin/sh\nout=''\nargs=''\nwhile [ $# -gt 0 ]; do\n"
    << "  if [ \"$1\" = --json ]; then out=\"$2\"; shift; shift; continue; fi\n"
    << "  args=\"$args $1\"; shift\ndone\n"
    << "echo \"" << name << ":$args\" >> '" << (dir / "calls.log").string() << "'\n"
    << "n=$(cat '" << counter.string() << "' 2>/dev/null || echo 0)\n"
    << "echo $((n + 1)) > '" << counter.string() << "'\n"
    << "[ $n -ge " << docs.size() << " ] && n=" << docs.size() - 1 << "\n"
    << "cp '" << (dir / name).string() << "'$n.json \"$out\"\n";
  f.close();
  fs::permissions(script, fs::perms::owner_all);
  return script;
}
fs::path fake_lina(const fs::path& dir, const std::string& name, const json& doc) { return fake_lina_rounds(dir, name, {doc}); }

std::string read(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A minimal source tree with the files frozen_hashes() reads, plus the loop contract.
void make_repo(const fs::path& root, bool with_profile) {
  for (const char* f : {"tests/gate/chunk_gla_gate.cpp", "tests/gate/common/fixtures.cpp", "ops/gla/reference.cpp",
                        "harness/verify/tolerances.cpp", "harness/verify/accuracy.cpp"}) {
    fs::create_directories((root / f).parent_path());
    std::ofstream(root / f) << "// " << f << "\n";
  }
  const fs::path pd = root / "profile" / "chunk_gla-opt";
  fs::create_directories(pd);
  json hashes(frozen_hashes(root, "chunk_gla"));
  std::ofstream(pd / "contract.json") << json{{"op", "chunk_gla"}, {"frozen_hashes", hashes}}.dump(2);
  if (with_profile) std::ofstream(pd / "chunk_gla-opt.ncu-rep") << "x";
}

VerifyOptions base_opts(const fs::path& dir) {
  VerifyOptions o;
  o.op = "chunk_gla";
  o.rounds = 3;
  o.repo = dir / "repo";
  o.gate_exe = fs::path(LINA_TEST_FAKE_GATE);
  o.gate_env = {{"FAKE_GATE_SHA", "cccc"}};  // the build the fake candidates below report
  o.backend = "cpu";
  return o;
}

// An ungated verify against `main` whose baseline SHA is given (no git needed): the timing side of the flow alone.
VerifyOptions ungated_vs_main(const fs::path& dir) {
  VerifyOptions o = base_opts(dir);
  o.no_gate = true;
  o.base = "main";
  o.baseline_sha = kBaseSha;
  return o;
}

TEST(VerifyFlow, BaselineReportingAnotherShaIsRefused) {
  TempDir d("verify");
  VerifyOptions o = base_opts(d.path());
  o.no_gate = true;
  o.base = "HEAD~1";
  o.candidate_exe = fake_lina(d.path(), "cand", run_doc("cccc", 1.0));
  o.baseline_exe = fake_lina(d.path(), "base", run_doc("2222222222222222222222222222222222222222", 2.0));
  o.baseline_sha = kBaseSha;
  std::ostringstream out;
  const auto r = verify(o, out);
  EXPECT_EQ(r.exit_code, kVerifyBaselineFailed) << out.str();
  EXPECT_NE(out.str().find("2222222222222222222222222222222222222222"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find(kBaseSha), std::string::npos);
  EXPECT_TRUE(r.json["comparisons"].empty());
}

// --base-exe on a copy of the tree without git history: a full SHA is taken as typed and the
// baseline's results must still report it; a short ref there cannot be resolved (exit 3).
TEST(VerifyFlow, ReadyBaselineTakesAFullShaWithoutGitAndProvesIt) {
  TempDir d("verify");
  fs::create_directories(d.path() / "repo");  // no .git: nothing can be resolved there
  VerifyOptions o = base_opts(d.path());
  o.no_gate = true;
  o.rounds = 1;
  o.candidate_exe = fake_lina(d.path(), "cand", run_doc("cccc", 1.0));
  o.base = kBaseSha;
  o.baseline_exe = fake_lina(d.path(), "base", run_doc(kBaseSha, 2.0));
  std::ostringstream ok;
  const auto r = verify(o, ok);
  EXPECT_EQ(r.exit_code, kVerifyOk) << ok.str();
  EXPECT_EQ(r.json["baseline"]["sha"], kBaseSha);
  EXPECT_EQ(r.json["comparisons"].size(), 2u);

  o.baseline_exe = fake_lina(d.path(), "base2", run_doc("2222222222222222222222222222222222222222", 2.0));
  std::ostringstream other;
  EXPECT_EQ(verify(o, other).exit_code, kVerifyBaselineFailed) << other.str();

  o.base = "HEAD~1";
  std::ostringstream shortref;
  EXPECT_EQ(verify(o, shortref).exit_code, kVerifyBaselineFailed) << shortref.str();
  EXPECT_NE(shortref.str().find("HEAD~1"), std::string::npos) << shortref.str();
}

TEST(VerifyFlow, GreenGateClearWinWithEvidencePromotes) {
  TempDir d("verify");
  make_repo(d.path() / "repo", /*with_profile=*/true);
  VerifyOptions o = base_opts(d.path());
  o.base = "main";
  o.baseline_sha = kBaseSha;
  o.candidate_exe = fake_lina(d.path(), "cand", run_doc("cccc", 1.0));
  o.baseline_exe = fake_lina(d.path(), "base", run_doc(kBaseSha, 2.0));
  o.modes = {"fwd", "bwd"};
  o.shapes = {"B1_T64_H2_D64", "B2_T128_H2_D64"};
  o.seed = 7;
  o.json = d.path() / "verify.json";
  std::ostringstream out;
  const auto r = verify(o, out);
  ASSERT_EQ(r.exit_code, kVerifyOk) << out.str();
  if (std::getenv("LINA_TEST_SHOW")) std::cout << out.str();
  const json j = json::parse(read(*o.json));
  EXPECT_EQ(j["schema"], "lina.bench/1");
  EXPECT_EQ(j["kind"], "verify");
  EXPECT_EQ(j["gate"]["status"], "green");
  EXPECT_EQ(j["baseline"]["sha"], kBaseSha);
  ASSERT_EQ(j["comparisons"].size(), 2u);
  for (const auto& c : j["comparisons"]) {
    EXPECT_EQ(c["verdict"], "faster");
    EXPECT_NEAR(c["speedup"].get<double>(), 2.0, 0.01);
    EXPECT_GT(c["ci_low"].get<double>(), 1.0);
  }
  EXPECT_EQ(j["results"][0]["times_ms"].size(), 36u);  // 12 samples x 3 rounds pooled
  EXPECT_TRUE(j["verdict"]["promote"].get<bool>()) << out.str();
  EXPECT_EQ(j["verdict"]["label"], "promote");
  // Same arguments on both sides, three rounds each, alternating which side goes first.
  std::istringstream calls(read(d.path() / "calls.log"));
  std::vector<std::string> lines;
  for (std::string l; std::getline(calls, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[0].substr(0, 5), "cand:");
  EXPECT_EQ(lines[1].substr(0, 5), "base:");
  EXPECT_EQ(lines[2].substr(0, 5), "base:");
  EXPECT_EQ(lines[3].substr(0, 5), "cand:");
  EXPECT_EQ(lines[0].substr(5), lines[1].substr(5));
  EXPECT_EQ(lines[0].substr(5), " run --op chunk_gla --no-base --modes fwd bwd --shapes B1_T64_H2_D64,B2_T128_H2_D64 --backend cpu --seed 7");
  EXPECT_NE(out.str().find("geomean speedup over 2 cells"), std::string::npos);
}

// --gpus N: each side's `lina run` shards its cells (`--gpus N` on both command lines); a cell the two sides timed
// on different shards (GPUs) is named and blocks the promotion.
TEST(VerifyFlow, GpusShardBothSidesAndACellOnTwoGpusIsNotPromoted) {
  TempDir d("verify");
  make_repo(d.path() / "repo", /*with_profile=*/true);
  VerifyOptions o = base_opts(d.path());
  o.base = "main";
  o.baseline_sha = kBaseSha;
  o.gpus = 2;
  json cand = run_doc("cccc", 1.0), base = run_doc(kBaseSha, 2.0);
  for (auto* doc : {&cand, &base})
    for (std::size_t i = 0; i < 2; ++i) (*doc)["results"][i]["shard"] = static_cast<int>(i);
  o.candidate_exe = fake_lina(d.path(), "cand", cand);
  o.baseline_exe = fake_lina(d.path(), "base", base);
  o.json = d.path() / "same.json";
  std::ostringstream out;
  ASSERT_EQ(verify(o, out).exit_code, kVerifyOk) << out.str();
  json j = json::parse(read(*o.json));
  EXPECT_TRUE(j["verdict"]["promote"].get<bool>()) << out.str();
  EXPECT_EQ(j["config"]["gpus"], 2);
  std::istringstream calls(read(d.path() / "calls.log"));
  for (std::string l; std::getline(calls, l);) EXPECT_NE(l.find(" --backend cpu --seed 42 --gpus 2"), std::string::npos) << l;

  base["results"][1]["shard"] = 0;  // B2_T128 on shard 1 for the candidate, 0 for the baseline
  o.baseline_exe = fake_lina(d.path(), "base2", base);
  o.json = d.path() / "moved.json";
  std::ostringstream out2;
  verify(o, out2);
  j = json::parse(read(*o.json));
  EXPECT_FALSE(j["verdict"]["promote"].get<bool>()) << out2.str();
  EXPECT_EQ(j["comparisons"][1]["gpu_mismatch"], "timed on shard 0 for the base and 1 for the head (two GPUs: the two builds' cell plans differ)");
  EXPECT_FALSE(j["comparisons"][0].contains("gpu_mismatch"));
  EXPECT_NE(out2.str().find("[no] cell chunk_gla/fwd/B2_T128_H2_D64: timed on shard 0"), std::string::npos) << out2.str();
}

TEST(VerifyFlow, SafeGateOffReachesBothSidesOnlyWhenAsked) {
  TempDir d("verify");
  make_repo(d.path() / "repo", /*with_profile=*/true);
  for (bool safe : {true, false}) {
    SCOPED_TRACE(safe ? "default" : "--safe-gate off");
    VerifyOptions o = base_opts(d.path());
    o.base = "main";
    o.baseline_sha = kBaseSha;
    o.safe_gate = safe;
    const std::string tag = safe ? "on" : "off";
    o.candidate_exe = fake_lina(d.path(), "cand_" + tag, run_doc("cccc", 1.0));
    o.baseline_exe = fake_lina(d.path(), "base_" + tag, run_doc(kBaseSha, 1.0));
    o.json = d.path() / (tag + ".json");
    fs::remove(d.path() / "calls.log");
    std::ostringstream out;
    ASSERT_EQ(verify(o, out).exit_code, kVerifyOk) << out.str();
    EXPECT_EQ(json::parse(read(*o.json))["config"]["safe_gate"], safe);
    std::istringstream calls(read(d.path() / "calls.log"));
    int runs = 0;
    for (std::string l; std::getline(calls, l); ++runs)
      EXPECT_EQ(l.find("--safe-gate off") != std::string::npos, !safe) << l;  // older bases lack the option
    EXPECT_GT(runs, 0);
  }
}

TEST(VerifyFlow, EveryMissingConditionIsAReason) {
  TempDir d("verify");
  make_repo(d.path() / "repo", /*with_profile=*/false);
  // A frozen file changes after `loop init`.
  std::ofstream(d.path() / "repo" / "harness" / "verify" / "tolerances.cpp", std::ios::app) << "// loosened\n";
  VerifyOptions o = base_opts(d.path());
  o.gate_k = "Fwd";  // filtered gate: partial
  o.base = "main";
  o.baseline_sha = kBaseSha;
  o.candidate_exe = fake_lina(d.path(), "cand", run_doc("cccc", 1.0, "NVIDIA GeForce RTX 4090", nullptr));
  o.baseline_exe = fake_lina(d.path(), "base", run_doc(kBaseSha, 1.0, "NVIDIA H200"));
  std::ostringstream out;
  const auto r = verify(o, out);
  EXPECT_EQ(r.exit_code, kVerifyOk) << out.str();
  const json& v = r.json["verdict"];
  EXPECT_FALSE(v["promote"].get<bool>());
  std::string all;
  for (const auto& s : v["reasons"]) all += s.get<std::string>() + "\n";
  EXPECT_NE(all.find("[no] gate partial"), std::string::npos) << all;
  EXPECT_NE(all.find("not verified"), std::string::npos) << all;
  EXPECT_NE(all.find("different GPUs"), std::string::npos) << all;
  EXPECT_NE(all.find("supplementary"), std::string::npos) << all;
  EXPECT_NE(all.find("no repeatable win"), std::string::npos) << all;
  EXPECT_NE(all.find("needs profiler evidence"), std::string::npos) << all;
  EXPECT_NE(all.find("frozen file changed since `lina loop init`: harness/verify/tolerances.cpp"), std::string::npos) << all;
  for (const auto& c : r.json["comparisons"]) EXPECT_EQ(c["verdict"], "noise");
}

// An A/A false win seen on the H200, end to end: the baseline's first two rounds (processes) run 6 % slow, its
// third does not, the candidate is the same code. Pooled over rounds the 36 baseline samples sit mostly at 1.06; the
// interval resamples rounds, so no cell is faster and there is no repeatable win.
TEST(VerifyFlow, SlowRoundsOfIdenticalCodeAreNotAWin) {
  TempDir d("verify");
  VerifyOptions o = ungated_vs_main(d.path());
  o.candidate_exe = fake_lina(d.path(), "cand", run_doc("cccc", 1.0));
  o.baseline_exe = fake_lina_rounds(d.path(), "base", {run_doc(kBaseSha, 1.06), run_doc(kBaseSha, 1.06), run_doc(kBaseSha, 1.0)});
  std::ostringstream out;
  const auto r = verify(o, out);
  ASSERT_EQ(r.exit_code, kVerifyOk) << out.str();
  ASSERT_EQ(r.json["comparisons"].size(), 2u);
  for (const auto& c : r.json["comparisons"]) {
    EXPECT_GT(c["speedup"].get<double>(), 1.04) << c.dump();  // the pooled medians
    EXPECT_LE(c["ci_low"].get<double>(), 1.0) << c.dump();
    EXPECT_EQ(c["verdict"], "noise");
  }
  EXPECT_EQ(r.json["geomean"]["faster"], 0);
  EXPECT_NE(out.str().find("no repeatable win"), std::string::npos) << out.str();
}

TEST(VerifyFlow, SlowerCellsAreARegressionAndCanFailTheRun) {
  TempDir d("verify");
  VerifyOptions o = ungated_vs_main(d.path());
  o.fail_on_regression = true;
  o.candidate_exe = fake_lina(d.path(), "cand", run_doc("cccc", 1.5));
  o.baseline_exe = fake_lina(d.path(), "base", run_doc(kBaseSha, 1.0));
  std::ostringstream out;
  const auto r = verify(o, out);
  EXPECT_EQ(r.exit_code, kVerifyRegression) << out.str();
  EXPECT_EQ(r.json["comparisons"][0]["verdict"], "slower");
  EXPECT_EQ(r.json["verdict"]["label"], "UNVERIFIED");  // --no-gate dominates the label
  EXPECT_NE(out.str().find("UNVERIFIED"), std::string::npos);
}

// A verify file's change_pct is the latency change, as in compare files and the schema (negative = faster), so that
// `lina summarize` flags a 2x win IMPROVED (verify files once held (speedup - 1) x 100 there, and
// summarize flagged every win of a verify file REGRESSION).
TEST(VerifyFlow, ChangeIsTheLatencyChangeThatSummarizeReads) {
  TempDir d("verify");
  VerifyOptions o = ungated_vs_main(d.path());
  o.candidate_exe = fake_lina(d.path(), "cand", run_doc("cccc", 1.0));
  o.baseline_exe = fake_lina(d.path(), "base", run_doc(kBaseSha, 2.0));
  o.json = d.path() / "verify.json";
  std::ostringstream out;
  const auto r = verify(o, out);
  ASSERT_EQ(r.exit_code, kVerifyOk) << out.str();
  const json& c = r.json["comparisons"][0];
  EXPECT_EQ(c["verdict"], "faster");
  EXPECT_NEAR(c["change_pct"].get<double>(), -50.0, 0.5);
  const std::string text = render_summary_text({load_summary_file(*o.json)}, SummaryOptions{});
  EXPECT_NE(text.find("IMPROVED"), std::string::npos) << text;
  EXPECT_EQ(text.find("REGRESSION"), std::string::npos) << text;
}

TEST(VerifyFlow, RedGateStopsBeforeAnyTiming) {
  TempDir d("verify");
  VerifyOptions o = base_opts(d.path());
  o.gate_env["FAKE_GATE_FAIL"] = "varlen";
  o.candidate_exe = fake_lina(d.path(), "cand", run_doc("cccc", 1.0));
  std::ostringstream out;
  const auto r = verify(o, out);
  EXPECT_EQ(r.exit_code, kVerifyGateFailed);
  EXPECT_FALSE(fs::exists(d.path() / "calls.log")) << "timed after a red gate";
  EXPECT_EQ(r.json["gate"]["status"], "red");
  EXPECT_NE(out.str().find("Fake/Fwd.B1_T2048_H4_D128_varlen"), std::string::npos) << out.str();
}

// A gate judges the kernels it was linked with: a suite of another build, or one that does not say which
// build it is, is refused once the candidate's first results prove the candidate's build.
TEST(VerifyFlow, GateNotOfTheCandidatesBuildIsRefused) {
  const std::pair<const char*, const char*> cases[] = {
      {"dddd", "gate refused: lina_fake_gate was built from lina dddd, but the candidate's results report cccc"},
      {nullptr, "gate refused: lina_fake_gate does not report which lina build it was made from"}};
  for (const auto& [sha, message] : cases) {
    TempDir d("verify");
    VerifyOptions o = base_opts(d.path());
    if (sha) o.gate_env["FAKE_GATE_SHA"] = sha;
    else o.gate_env.erase("FAKE_GATE_SHA");
    o.candidate_exe = fake_lina(d.path(), "cand", run_doc("cccc", 1.0));
    std::ostringstream out;
    const auto r = verify(o, out);
    EXPECT_EQ(r.exit_code, kVerifyGateFailed) << out.str();
    EXPECT_NE(out.str().find(message), std::string::npos) << out.str();
    EXPECT_EQ(r.json["gate"]["build_sha"], sha ? json(sha) : json(nullptr));
    EXPECT_EQ(r.json["verdict"]["label"], "gate not of the candidate's build");
    EXPECT_TRUE(r.json["results"].empty());
    EXPECT_EQ(read(d.path() / "calls.log"), "cand: run --op chunk_gla --no-base --backend cpu --seed 42\n") << "one run proves the build, then stop";
  }
}

TEST(VerifyFlow, PlantedFaultIsCaughtByTheGate) {
  TempDir d("verify");
  VerifyOptions o = base_opts(d.path());
  o.gate_env["LINA_FAULT_INJECT"] = "perturb:0.01";
  o.candidate_exe = fake_lina(d.path(), "cand", run_doc("cccc", 1.0));
  std::ostringstream out;
  EXPECT_EQ(verify(o, out).exit_code, kVerifyGateFailed) << out.str();
}

TEST(VerifyFlow, EmptySelectionExitsFourAndIsNotARegression) {
  TempDir d("verify");
  VerifyOptions o = base_opts(d.path());
  o.gate_k = "T123456";
  o.candidate_exe = fake_lina(d.path(), "cand", run_doc("cccc", 1.0));
  std::ostringstream out;
  const auto r = verify(o, out);
  EXPECT_EQ(r.exit_code, kVerifyGateEmpty);
  EXPECT_EQ(r.json["gate"]["status"], "empty");
  EXPECT_NE(out.str().find("selects no test"), std::string::npos);
  EXPECT_FALSE(fs::exists(d.path() / "calls.log"));
}

TEST(VerifyFlow, CandidateOnlyWithoutBase) {
  TempDir d("verify");
  VerifyOptions o = base_opts(d.path());
  o.rounds = 2;
  o.candidate_exe = fake_lina(d.path(), "cand", run_doc("cccc", 1.0));
  std::ostringstream out;
  const auto r = verify(o, out);
  EXPECT_EQ(r.exit_code, kVerifyOk) << out.str();
  EXPECT_EQ(r.json["gate"]["build_sha"], "cccc");  // the gate is the candidate's build: accepted
  EXPECT_TRUE(r.json["baseline"].is_null());
  EXPECT_TRUE(r.json["comparisons"].empty());
  EXPECT_EQ(r.json["results"].size(), 2u);
  EXPECT_FALSE(r.json["verdict"]["promote"].get<bool>());
}

TEST(VerifyFlow, BadRunFileNamesTheKey) {
  TempDir d("verify");
  std::ofstream(d.path() / "x.json") << R"({"schema": "lina.bench/0", "results": []})";
  try {
    read_run_file(d.path() / "x.json");
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("schema"), std::string::npos);
  }
}

TEST(VerifyGpu, PromotionHardware) {
  EXPECT_TRUE(is_promotion_gpu("NVIDIA H200", "9.0"));
  EXPECT_TRUE(is_promotion_gpu("NVIDIA H100 80GB HBM3", "9.0"));
  EXPECT_FALSE(is_promotion_gpu("NVIDIA A100-SXM4-80GB", "8.0"));
  EXPECT_FALSE(is_promotion_gpu("NVIDIA GeForce RTX 5090", "12.0"));
  EXPECT_FALSE(is_promotion_gpu("", ""));
}

}  // namespace
}  // namespace lina::harness
