#include <gtest/gtest.h>

#include "harness/tools/loop_log.h"
#include "harness/util/sha256.h"
#include "harness/util/text_file.h"
#include "lina/error.h"
#include "tools_support.h"

namespace lina::harness {
namespace {
using nlohmann::json;
using lina::testing::data;

LoopContract contract() {
  LoopContract c;
  c.op = "chunk_kda";
  c.modes = {"fwd"};
  c.shapes = {"B1_T8192_H96_D128"};
  c.backends = {"cuda"};
  c.base_ref = "main";
  c.base_sha = std::string(40, 'c');
  c.validation_command = "lina verify --op chunk_kda";
  c.benchmark_command = "lina run --op chunk_kda";
  c.frozen_hashes = {{"tests/gate/chunk_kda_gate.cpp", "h1"}, {"harness/verify/tolerances.cpp", "h2"}};
  return c;
}

// verify_ok.json with the target cell's head median (base median is 2.0 ms) and gate/check/verdict set.
json verify_doc(double head_ms, const std::string& gate = "green", bool pass = true, const std::string& verdict = "faster") {
  json d = json::parse(read_text_file(data("verify_ok.json")));
  d["results"][0]["median_ms"] = head_ms;
  d["results"][0]["check"]["pass"] = pass;
  d["gate"]["status"] = gate;
  d["comparisons"][0]["verdict"] = verdict;
  d["comparisons"][0]["ci_low"] = verdict == "faster" ? 1.1 : 0.95;
  return d;
}

LoopEntry entry(const LoopContract& c, std::vector<LoopEntry>& prior, const json& doc, const std::string& dir,
                std::optional<std::string> decision = std::nullopt) {
  LogRequest r;
  r.direction = dir;
  r.verify_json = "v.json";
  r.decision = decision;
  auto e = make_entry(c, prior, r, doc);
  prior.push_back(e);
  return e;
}

TEST(ToolsLoop, RowsTrackBestSoFarAndDecisions) {
  const auto c = contract();
  std::vector<LoopEntry> log;
  auto e1 = entry(c, log, verify_doc(1.6), "fuse\nintra-chunk | output");
  EXPECT_EQ(e1.iteration, 1);
  EXPECT_EQ(e1.direction, "fuse intra-chunk | output");  // one line
  EXPECT_DOUBLE_EQ(*e1.metric_ms, 1.6);                   // only the target cell counts
  EXPECT_DOUBLE_EQ(*e1.base_metric_ms, 2.0);
  EXPECT_NEAR(*e1.vs_best_pct, -20.0, 1e-9);               // vs the baseline
  EXPECT_TRUE(e1.improving);
  EXPECT_TRUE(e1.repeatable_win);
  EXPECT_EQ(e1.decision, "keep");
  const std::string row = opt_log_row(e1);
  EXPECT_EQ(row.rfind("| 1 | fuse intra-chunk \\| output | green | 1.6000 | -20.00% | keep |", 0), 0u) << row;

  auto e2 = entry(c, log, verify_doc(1.59), "tweak");  // -0.6 % vs best 1.6: under min_gain 1 %
  EXPECT_NEAR(*e2.vs_best_pct, (1.59 / 1.6 - 1) * 100, 1e-9);
  EXPECT_FALSE(e2.improving);
  EXPECT_EQ(e2.decision, "revert");
  auto e3 = entry(c, log, verify_doc(1.2, "red"), "faster but wrong");
  EXPECT_FALSE(e3.improving);  // a red gate never improves
  auto e4 = entry(c, log, verify_doc(1.2, "green", false), "faster, check fails");
  EXPECT_FALSE(e4.improving);
  EXPECT_FALSE(e4.all_checks_pass);
  auto e5 = entry(c, log, verify_doc(1.3), "real win", std::string("keep"));
  EXPECT_TRUE(e5.improving);
  EXPECT_NEAR(*e5.vs_best_pct, (1.3 / 1.6 - 1) * 100, 1e-9);  // reverted rows are not the best
}

TEST(ToolsLoop, BestSoFarOnlyFromRowsOverTheSameCells) {
  // A row logged before every target cell was required covers fewer cells; its geomean (here a
  // small-shape cell alone, 0.1 ms) is not comparable and must not become the best to beat.
  const auto c = contract();
  std::vector<LoopEntry> log;
  LoopEntry old;
  old.iteration = 1;
  old.direction = "partial";
  old.decision = "keep";
  old.gate = "green";
  old.cells = {"fwd B8_T1024_H8_D64 0.1000 pass"};
  old.metric_ms = 0.1;
  old.base_metric_ms = 0.12;
  log.push_back(old);
  auto e = entry(c, log, verify_doc(1.6), "full-cell row");
  EXPECT_EQ(e.iteration, 2);
  EXPECT_NEAR(*e.vs_best_pct, -20.0, 1e-9);  // against its own baseline (2.0 ms), not 0.1 / 0.12
  EXPECT_TRUE(e.improving);
  EXPECT_EQ(e.decision, "keep");
  auto e2 = entry(c, log, verify_doc(1.7), "slower than the full-cell best");
  EXPECT_NEAR(*e2.vs_best_pct, (1.7 / 1.6 - 1) * 100, 1e-9);
  EXPECT_EQ(e2.decision, "revert");
}

TEST(ToolsLoop, AVerifyMissingATargetCellIsRefusedByName) {
  auto c = contract();
  c.shapes.push_back("B4_T2048_H16_D128");  // a second target cell the verify file does not time
  std::vector<LoopEntry> log;
  try {
    entry(c, log, verify_doc(1.6), "partial verify");
    ADD_FAILURE() << "accepted a verify without every target cell";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
    EXPECT_NE(std::string(e.what()).find("fwd B4_T2048_H16_D128"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("B1_T8192_H96_D128"), std::string::npos) << e.what();  // only the missing one
  }
  EXPECT_TRUE(log.empty());
}

TEST(ToolsLoop, ThreeNonImprovingInARowIsFlagged) {
  const auto c = contract();
  std::vector<LoopEntry> log;
  entry(c, log, verify_doc(1.6), "a");
  entry(c, log, verify_doc(1.7), "b");
  entry(c, log, verify_doc(1.65), "c");
  EXPECT_FALSE(loop_status(c, log, c.frozen_hashes).stalled);  // only two in a row
  entry(c, log, verify_doc(1.61), "d");
  auto s = loop_status(c, log, c.frozen_hashes);
  EXPECT_TRUE(s.stalled);
  EXPECT_NE(render_loop_status(c, s).find("STALLED: three non-improving iterations in a row (#2, #3, #4)"), std::string::npos);
  entry(c, log, verify_doc(1.2), "e");
  EXPECT_FALSE(loop_status(c, log, c.frozen_hashes).stalled);
}

TEST(ToolsLoop, PromotionAndNoGoBars) {
  const auto c = contract();
  std::vector<LoopEntry> log;
  auto met = [](const std::vector<BarItem>& bar, const std::string& name) {
    for (const auto& b : bar) if (b.name == name) return b.met;
    ADD_FAILURE() << name;
    return false;
  };
  auto s0 = loop_status(c, log, c.frozen_hashes);
  EXPECT_FALSE(met(s0.no_go, "a reasoned attempt"));
  EXPECT_FALSE(met(s0.promotion, "gate green"));

  lina::testing::TempDir tmp;
  const auto prof = tmp.path / "kda.ncu-rep";
  write_text_file(prof, "x");
  LogRequest r;
  r.direction = "fuse";
  r.verify_json = "v.json";
  r.profile = prof.string();
  r.bound = "HBM 4.3 TB/s at 81%";
  log.push_back(make_entry(c, log, r, verify_doc(1.5)));
  auto s = loop_status(c, log, c.frozen_hashes);
  for (const auto& b : s.promotion) EXPECT_TRUE(b.met) << b.name << " " << b.detail;
  for (const auto& b : s.no_go) EXPECT_TRUE(b.met) << b.name << " " << b.detail;

  auto changed = c.frozen_hashes;
  changed["harness/verify/tolerances.cpp"] = "edited";
  auto s2 = loop_status(c, log, changed);
  EXPECT_FALSE(met(s2.promotion, "frozen files unchanged"));
  ASSERT_EQ(s2.frozen_changes.size(), 1u);
  EXPECT_EQ(s2.frozen_changes[0], "harness/verify/tolerances.cpp (changed)");

  log.back().bound = "memory bound";  // a bound without its number does not count
  EXPECT_FALSE(met(loop_status(c, log, c.frozen_hashes).no_go, "a named bound with its number"));
}

TEST(ToolsLoop, InitLogRoundTripOnDisk) {
  lina::testing::TempDir tmp;
  const auto dir = loop_dir(tmp.path, "chunk_kda");
  const auto c = contract();
  loop_init(dir, c, false);
  EXPECT_THROW(loop_init(dir, c, false), Error);  // a contract is not overwritten silently
  const auto back = load_contract(dir);
  EXPECT_EQ(back.base_sha, c.base_sha);
  EXPECT_EQ(back.frozen_hashes, c.frozen_hashes);
  const auto vpath = tmp.path / "verify.json";
  write_text_file(vpath, verify_doc(1.5).dump());
  LogRequest r;
  r.direction = "first";
  r.verify_json = vpath;
  loop_log(dir, r);
  r.direction = "second";
  r.decision = "floor";
  loop_log(dir, r);
  const auto entries = load_entries(dir);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[1].iteration, 2);
  EXPECT_EQ(entries[1].decision, "floor");
  // Each row cites the verify file by its path in the repository and its hash; nothing is copied.
  EXPECT_EQ(entries[0].source, "verify.json");
  EXPECT_EQ(entries[0].source_sha256, sha256_file(vpath));
  EXPECT_EQ(entries[1].source_sha256, sha256_file(vpath));
  EXPECT_FALSE(std::filesystem::exists(dir / "evidence"));
  const std::string md = read_text_file(dir / "OPT_LOG.md");
  EXPECT_NE(md.find("| 1 | first | green | 1.5000 | -25.00% | keep |"), std::string::npos) << md;
  EXPECT_NE(md.find("| 2 | second | green | 1.5000 | +0.00% (not improving) | floor |"), std::string::npos) << md;
  EXPECT_NE(md.find("`verify.json` sha256 " + entries[0].source_sha256.substr(0, 12)), std::string::npos) << md;
  r.decision = "maybe";
  EXPECT_THROW(loop_log(dir, r), Error);
  r.decision.reset();
  r.verify_json = data("compare_ok.json");  // not a verify file
  EXPECT_THROW(loop_log(dir, r), Error);
  EXPECT_EQ(load_entries(dir).size(), 2u);  // refused rows leave the log as it was
}

TEST(ToolsLoop, NamedLoopsLiveBesideTheDefaultOneAndCiteTheirOwnEvidence) {
  lina::testing::TempDir tmp;
  EXPECT_EQ(loop_dir(tmp.path, "chunk_kda"), tmp.path / "profile" / "chunk_kda-opt");
  const auto dir = loop_dir(tmp.path, "chunk_kda", "bwd");
  EXPECT_EQ(dir, tmp.path / "profile" / "chunk_kda-bwd");
  auto c = contract();
  c.modes = {"fwdbwd"};
  loop_init(dir, c, false);
  loop_init(loop_dir(tmp.path, "chunk_kda"), contract(), false);  // the default loop is a separate contract
  EXPECT_EQ(load_contract(dir).modes, std::vector<std::string>{"fwdbwd"});
  EXPECT_EQ(load_contract(loop_dir(tmp.path, "chunk_kda")).modes, std::vector<std::string>{"fwd"});
  const auto vpath = tmp.path / "v.json";
  json doc = verify_doc(1.5);
  write_text_file(vpath, doc.dump());
  LogRequest r;
  r.direction = "bwd attempt";
  r.verify_json = vpath;
  EXPECT_THROW(loop_log(dir, r), Error);  // a fwd verify does not time the fwdbwd loop's cells
  doc["results"][0]["mode"] = doc["comparisons"][0]["mode"] = "fwdbwd";
  for (auto& b : doc["baseline"]["results"]) b["mode"] = "fwdbwd";
  write_text_file(vpath, doc.dump());
  r.verify_json = vpath;
  loop_log(dir, r);
  const auto entries = load_entries(dir);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].source, "v.json");
  EXPECT_TRUE(load_entries(loop_dir(tmp.path, "chunk_kda")).empty());
  // A name that could leave profile/ (or is not a plain word) is refused, naming --loop.
  for (const std::string& bad : std::vector<std::string>{"", "../x", "a/b", "Bwd", "b-w", std::string(33, 'a')}) {
    try {
      (void)loop_dir(tmp.path, "chunk_kda", bad);
      ADD_FAILURE() << "accepted loop name `" << bad << "`";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--loop"), std::string::npos) << e.what();
    }
  }
}

TEST(ToolsLoop, StatusShowsCitedEvidenceMissingOrChanged) {
  lina::testing::TempDir tmp;
  const auto dir = loop_dir(tmp.path, "chunk_kda");
  const auto c = contract();
  loop_init(dir, c, false);
  const auto vpath = tmp.path / "benchmarks" / "results" / "v.json";
  write_text_file(vpath, verify_doc(1.5).dump());
  const auto ppath = tmp.path / "p.ncu-rep";
  write_text_file(ppath, "report");
  LogRequest r;
  r.direction = "first";
  r.verify_json = vpath;
  r.profile = ppath.string();
  loop_log(dir, r);
  auto entries = load_entries(dir);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].source, "benchmarks/results/v.json");
  EXPECT_EQ(entries[0].profile, "p.ncu-rep");
  EXPECT_EQ(entries[0].profile_sha256, sha256_file(ppath));
  auto state = [&](const LoopStatus& s, const std::string& role) {
    for (const auto& k : s.evidence)
      if (k.role == role) return k.state;
    ADD_FAILURE() << "no " << role << " evidence";
    return EvidenceCheck::State::ok;
  };
  auto s = loop_status(c, entries, c.frozen_hashes, tmp.path);
  EXPECT_EQ(state(s, "verify"), EvidenceCheck::State::ok);
  EXPECT_EQ(state(s, "profile"), EvidenceCheck::State::ok);
  write_text_file(vpath, verify_doc(1.4).dump());
  std::filesystem::remove(ppath);
  s = loop_status(c, entries, c.frozen_hashes, tmp.path);
  EXPECT_EQ(state(s, "verify"), EvidenceCheck::State::changed);
  EXPECT_EQ(state(s, "profile"), EvidenceCheck::State::missing);
  const std::string text = render_loop_status(c, s);
  EXPECT_NE(text.find("benchmarks/results/v.json  HASH DIFFERS: logged " + entries[0].source_sha256.substr(0, 12)), std::string::npos) << text;
  EXPECT_NE(text.find("p.ncu-rep  MISSING"), std::string::npos) << text;
  EXPECT_TRUE(loop_status(c, entries, c.frozen_hashes).evidence.empty());  // no repository: nothing checked
}

TEST(ToolsLoop, EvidenceThatLeftTheTreeIsCitedByItsCommit) {
  // A curated record leaves the tree; its row keeps the path, hash and the commit that holds it.
  lina::testing::TempDir tmp;
  const auto dir = loop_dir(tmp.path, "chunk_kda");
  const auto c = contract();
  loop_init(dir, c, false);
  const std::string gone = "benchmarks/results/old_verify.json";
  const std::string sha(64, 'a'), commit = "66917aa6a2dc8595413b928417494d7f863237fd";
  json row = {{"iteration", 1}, {"direction", "old"}, {"decision", "keep"}, {"gate", "green"}, {"source", gone},
              {"source_sha256", sha}, {"source_commit", commit}, {"profile", "profile/x.ncu-rep"},
              {"cells", {"fwd B1_T8192_H96_D128 1.5000 pass"}}, {"metric_ms", 1.5}};
  write_text_file(dir / "log.json", json::array({row}).dump());
  const auto entries = load_entries(dir);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].source_commit, commit);
  EXPECT_EQ(entries[0].to_json().value("source_commit", ""), commit);  // kept when the log is rewritten
  EXPECT_FALSE(entries[0].to_json().contains("profile_commit"));
  const auto s = loop_status(c, entries, c.frozen_hashes, tmp.path);
  ASSERT_EQ(s.evidence.size(), 2u);
  EXPECT_EQ(s.evidence[0].state, EvidenceCheck::State::in_history);
  EXPECT_EQ(s.evidence[1].state, EvidenceCheck::State::missing);  // no commit named: still missing
  const std::string text = render_loop_status(c, s);
  EXPECT_NE(text.find("in git history: git show 66917aa6a2dc:" + gone), std::string::npos) << text;
}

TEST(ToolsLoop, RowsWithCopiedEvidenceStillRead) {
  // A row logged when evidence was copied under the loop folder: no hash fields, a path to the copy.
  lina::testing::TempDir tmp;
  const auto dir = loop_dir(tmp.path, "chunk_kda");
  const auto c = contract();
  loop_init(dir, c, false);
  const std::string copy = "profile/chunk_kda-opt/evidence/001_verify_v.json";
  write_text_file(tmp.path / copy, verify_doc(1.5).dump());
  json row = {{"iteration", 1}, {"direction", "old"}, {"decision", "keep"}, {"gate", "green"}, {"source", copy},
              {"profile", ""}, {"cells", {"fwd B1_T8192_H96_D128 1.5000 pass"}}, {"metric_ms", 1.5}};
  write_text_file(dir / "log.json", json::array({row}).dump());
  const auto entries = load_entries(dir);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].source, copy);
  EXPECT_TRUE(entries[0].source_sha256.empty());
  const auto s = loop_status(c, entries, c.frozen_hashes, tmp.path);
  ASSERT_EQ(s.evidence.size(), 1u);
  EXPECT_EQ(s.evidence[0].state, EvidenceCheck::State::unhashed);
  EXPECT_NE(render_loop_status(c, s).find(copy + "  (no hash logged)"), std::string::npos);
  // The next row is appended after it, citing its file.
  const auto vpath = tmp.path / "v.json";
  write_text_file(vpath, verify_doc(1.4).dump());
  LogRequest r;
  r.direction = "new";
  r.verify_json = vpath;
  const auto e = loop_log(dir, r);
  EXPECT_EQ(e.iteration, 2);
  EXPECT_EQ(e.source, "v.json");
  EXPECT_EQ(load_entries(dir).size(), 2u);
}

TEST(ToolsLoop, ContractWithANonStringSchemaIsRefusedByKey) {
  for (const json& schema : {json(3), json(nullptr), json::array({"lina.loop/1"})}) {
    json j = contract().to_json();
    j["schema"] = schema;
    try {
      LoopContract::from_json(j, "contract.json");
      ADD_FAILURE() << "accepted schema " << schema.dump();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
      EXPECT_NE(std::string(e.what()).find("`schema`"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace lina::harness
