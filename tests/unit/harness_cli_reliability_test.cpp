// The `lina` binary against hostile input: each class of the reliability review gives its documented
// exit code with a message naming the argument, before any build or measurement, and leaves earlier
// outputs intact (docs/architecture.md section 4).
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/tools/loop_log.h"
#include "harness/util/subprocess.h"
#include "harness/util/text_file.h"
#include "lina/error.h"
#include "tools_support.h"

namespace lina::harness {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using lina::testing::data;

// Each call bounded: a FIFO read or a late refusal shows up as a failure, not a hung suite.
ProcessResult lina(std::vector<std::string> args) {
  args.insert(args.begin(), LINA_TEST_LINA_EXE);
  ProcessOptions o;
  o.timeout = std::chrono::seconds(120);
  return run_process(args, o);
}

void expect_exit(const std::vector<std::string>& args, int code, const std::string& needle) {
  const ProcessResult r = lina(args);
  std::string line;
  for (const auto& a : args) line += a + " ";
  EXPECT_FALSE(r.timed_out) << line;
  EXPECT_EQ(r.exit_code, code) << line << "\n" << r.out << r.err;
  EXPECT_NE((r.out + r.err).find(needle), std::string::npos) << line << "\n" << r.out << r.err;
}

json run_doc() { return json::parse(read_text_file(data("run_ok.json"))); }

TEST(HarnessCliReliability, ThreadCountsOutOfRangeAreRefusedByName) {
  expect_exit({"run", "--op", "chunk_gla", "--backend", "cpu", "--threads", "-1"}, 2, "--threads");
  expect_exit({"run", "--op", "chunk_gla", "--backend", "cpu", "--threads", "100000000"}, 2, "expected an integer in [0, 1024]");
}

TEST(HarnessCliReliability, AnEmptyBaseIsRefusedEverywhere) {
  // `--base ""` used to mean "no baseline" silently.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"verify", "--op", "chunk_gla", "--no-gate", "--base", ""},
        {"compare", "--op", "chunk_gla", "--base", ""},
        {"run", "--op", "chunk_gla", "--base", ""},
        {"profile", "--op", "chunk_gla", "--base", ""},
        {"cmd", "verify", "--op", "chunk_gla", "--base", ""},
        {"loop", "init", "--op", "chunk_gla", "--base", ""}})
    expect_exit(args, 2, "--base");
}

TEST(HarnessCliReliability, AnUnknownBaseIsExitThreeEverywhere) {
  const std::string repo = LINA_TEST_SOURCE_DIR;
  expect_exit({"verify", "--op", "chunk_gla", "--no-gate", "--base", "no-such-ref-for-lina", "--repo", repo}, 3, "unknown git ref");
  expect_exit({"compare", "--op", "chunk_gla", "--base", "no-such-ref-for-lina", "--repo", repo}, 3, "unknown git ref");
  expect_exit({"cmd", "verify", "--op", "chunk_gla", "--base", "no-such-ref-for-lina", "--repo", repo}, 3, "unknown git ref");
}

TEST(HarnessCliReliability, BadArgumentsAreRefusedBeforeTheGateAndTheBaseline) {
  lina::testing::TempDir tmp;
  // The gate would run first (and print "gate: running") if these were found late.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--json", tmp.path.string()}, {"--json", (tmp.path / "missing" / "v.json").string()},
        {"--modes", "bogus"}, {"--json", "/dev/full"}, {"--gate-k", std::string(40000, '(') + "Fwd" + std::string(40000, ')')}}) {
    std::vector<std::string> a = {"verify", "--op", "chunk_gla", "--gate-bin", LINA_TEST_FAKE_GATE};
    a.insert(a.end(), args.begin(), args.end());
    const ProcessResult r = lina(a);
    EXPECT_EQ(r.exit_code, 2) << args[0] << " " << args[1].substr(0, 40) << "\n" << r.out << r.err;
    EXPECT_NE(r.err.find(args[0]), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("gate: running"), std::string::npos) << r.out;
  }
  // compare refuses an unknown op before it resolves or builds either side.
  const ProcessResult c = lina({"compare", "--op", "bogus", "--base", "HEAD", "--repo", LINA_TEST_SOURCE_DIR});
  EXPECT_EQ(c.exit_code, 2) << c.err;
  EXPECT_NE(c.err.find("--op `bogus`"), std::string::npos) << c.err;
  EXPECT_EQ(c.err.find("-> "), std::string::npos) << c.err;  // no side was built or taken from the cache
}

TEST(HarnessCliReliability, AWriteThatFailsKeepsTheEarlierOutput) {
  lina::testing::TempDir tmp;
  const fs::path out = tmp.path / "summary.md";
  write_text_file(out, "earlier\n");
  // A folder where the file should be: refused by name, the earlier output untouched.
  expect_exit({"summarize", data("run_ok.json").string(), "--format", "markdown", "--output", tmp.path.string()}, 2, "--output");
  expect_exit({"summarize", data("run_ok.json").string(), "--output", "/dev/null/x"}, 2, "--output");
  EXPECT_EQ(read_text_file(out), "earlier\n");
  expect_exit({"summarize", data("run_ok.json").string(), "--format", "markdown", "--output", out.string()}, 0, "wrote");
  EXPECT_NE(read_text_file(out).find("chunk_gla"), std::string::npos);
}

TEST(HarnessCliReliability, HostileResultFilesAreRefusedByName) {
  lina::testing::TempDir tmp;
  const auto put = [&](const std::string& name, const std::string& text) {
    write_text_file(tmp.path / name, text);
    return (tmp.path / name).string();
  };
  // Nesting that used to exhaust the stack, a number past a double, counts past an integer.
  expect_exit({"summarize", put("deep.json", std::string(100000, '[') + std::string(100000, ']'))}, 2, "nested deeper than");
  std::string huge = run_doc().dump();
  huge.replace(huge.find("\"samples\":5"), 11, "\"samples\":1e999");
  expect_exit({"summarize", put("inf.json", huge)}, 2, "not valid JSON");
  json d = run_doc();
  d["results"][0]["samples"] = 1e300;
  expect_exit({"summarize", put("samples.json", d.dump())}, 2, "results[0].samples");
  // Negative medians and verdicts the medians contradict.
  json cmp = json::parse(read_text_file(data("compare_ok.json")));
  cmp["comparisons"][0]["base_median_ms"] = -2.0;
  expect_exit({"summarize", put("negative.json", cmp.dump())}, 2, "comparisons[0].base_median_ms");
  cmp = json::parse(read_text_file(data("compare_ok.json")));
  cmp["comparisons"][0]["verdict"] = "slower";  // head 1.6 ms against base 2.0 ms
  expect_exit({"summarize", put("contradiction.json", cmp.dump())}, 2, "comparisons[0].verdict");
  // A FIFO as a result file would block forever.
  const fs::path fifo = tmp.path / "pipe.json";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  expect_exit({"summarize", fifo.string()}, 2, "a FIFO, expected a regular file");
}

TEST(HarnessCliReliability, EscapeSequencesFromAFileNeverReachTheTerminal) {
  lina::testing::TempDir tmp;
  json d = run_doc();
  d["config"]["command"] = "lina run \x1b]0;owned\x07\x1b[2J";
  d["results"][0]["shape"] = "B1\x1b[1A";
  write_text_file(tmp.path / "esc.json", d.dump());
  const ProcessResult r = lina({"summarize", (tmp.path / "esc.json").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos);
  EXPECT_EQ(r.out.find('\x07'), std::string::npos);
  EXPECT_NE(r.out.find("lina run ?]0;owned??[2J"), std::string::npos) << r.out;
}

TEST(HarnessCliReliability, ALoopCitesOnlyRegularFilesInsideItsRepository) {
  lina::testing::TempDir tmp;
  const fs::path dir = loop_dir(tmp.path, "chunk_kda");
  LoopContract c;
  c.op = "chunk_kda";
  c.base_sha = std::string(40, 'c');
  loop_init(dir, c, false);
  json v = json::parse(read_text_file(data("verify_ok.json")));
  write_text_file(tmp.path / "v.json", v.dump());
  LogRequest r;
  r.direction = "try";
  r.verify_json = tmp.path / "v.json";
  for (const std::string& p : {std::string("../../.."), std::string("/etc/hostname"), (tmp.path / "nope.ncu-rep").string()}) {
    r.profile = p;
    try {
      loop_log(dir, r);
      ADD_FAILURE() << p << " was cited";
    } catch (const Error& e) {
      EXPECT_EQ(e.argument(), "--profile") << e.what();
    }
  }
  EXPECT_TRUE(load_entries(dir).empty());  // nothing was logged
  // An iteration number at the top of int: the next one would overflow.
  write_text_file(dir / "log.json", json::array({json{{"iteration", 2147483647}, {"direction", "x"}, {"decision", "keep"}, {"gate", "green"}}}).dump());
  try {
    load_entries(dir);
    ADD_FAILURE() << "iteration 2^31-1 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("iteration"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace lina::harness
