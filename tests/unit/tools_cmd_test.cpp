#include <gtest/gtest.h>

#include "harness/tools/cmd_builder.h"
#include "harness/util/baseline_error.h"
#include "harness/util/subprocess.h"
#include "harness/util/shell_quote.h"
#include "lina/build_info.h"
#include "lina/error.h"
#include "tools_support.h"

namespace lina::harness {
namespace {

const std::vector<std::string> kHostile = {
    "$(rm -rf /)", "`touch /tmp/lina_pwned`", "two words", "it's", "\"double\"", "a'b'c", "''", "'",
    "line1\nline2", "; echo injected", "a;b&&c||d|e", "$HOME", "${PATH}", "*", "~", "#comment", "back\\slash",
    "tab\there", "-dash", "", "end'", "=x", "!bang", "ünï"};

// Feeds `cmdline` to /bin/sh as the arguments of printf and returns the words it received.
std::vector<std::string> words_via_sh(const std::string& cmdline) {
  auto r = run_process({"/bin/sh", "-c", "printf '%s\\0' " + cmdline});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> words;
  std::string cur;
  for (char c : r.out) {
    if (c == '\0') { words.push_back(cur); cur.clear(); }
    else cur += c;
  }
  EXPECT_TRUE(cur.empty());
  return words;
}

TEST(ToolsCmd, QuoteIsIdentityForSafeWordsAndQuotesTheRest) {
  EXPECT_EQ(shell_quote("chunk_kda"), "chunk_kda");
  EXPECT_EQ(shell_quote("B1_T8192_H96_D128,B2_T16384_H16_D128"), "B1_T8192_H96_D128,B2_T16384_H16_D128");
  EXPECT_EQ(shell_quote(""), "''");
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
  EXPECT_EQ(shell_quote("$(rm -rf /)"), "'$(rm -rf /)'");
}

TEST(ToolsCmd, HostileStringsRoundTripThroughSh) {
  EXPECT_EQ(words_via_sh(shell_join(kHostile)), kHostile);
  for (const auto& w : kHostile) EXPECT_EQ(words_via_sh(shell_quote(w)), std::vector<std::string>{w}) << w;
  EXPECT_FALSE(std::filesystem::exists("/tmp/lina_pwned"));
}

TEST(ToolsCmd, BuiltCommandRoundTripsWithHostileValues) {
  CmdRequest r;
  r.action = "verify";
  r.ops = {"chunk_kda"};
  r.modes = {"fwd", "bwd"};
  r.shapes = {"B1_T8192_H96_D128", "B2_T16384_H16_D128_HV32"};
  r.gate_k = "T8192 and $(reboot)";
  r.json = "out dir/it's `x`;\nrm.json";
  r.rounds = 3;
  const auto argv = build_command_argv(r, "/opt/my lina/lina", LINA_BUILD_SOURCE_DIR);
  const std::vector<std::string> expect = {"/opt/my lina/lina", "verify", "--op", "chunk_kda", "--modes", "fwd", "bwd",
                                           "--shapes", "B1_T8192_H96_D128,B2_T16384_H16_D128_HV32", "--gate-k",
                                           "T8192 and $(reboot)", "--rounds", "3", "--json", "out dir/it's `x`;\nrm.json"};
  EXPECT_EQ(argv, expect);
  EXPECT_EQ(words_via_sh(shell_join(argv)), expect);
}

TEST(ToolsCmd, BaseRefIsResolvedToSha) {
  const std::string repo = LINA_BUILD_SOURCE_DIR;
  auto head = run_process({"git", "-C", repo, "rev-parse", "HEAD"});
  if (head.exit_code != 0) GTEST_SKIP() << "source tree is not a git checkout";
  CmdRequest r;
  r.action = "profile";
  r.ops = {"chunk_gla"};
  r.base = "HEAD";
  const auto argv = build_command_argv(r, "lina", repo);
  ASSERT_GE(argv.size(), 6u);
  EXPECT_EQ(argv[3], "chunk_gla");
  EXPECT_EQ(argv[4], "--base");
  EXPECT_EQ(argv[5] + "\n", head.out);
  r.action = "run";  // `lina run` refuses --base, so no command with it is printed
  r.ops = {"chunk_gla", "chunk_gdn"};
  try {
    build_command_argv(r, "lina", repo);
    ADD_FAILURE() << "lina cmd run --base was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "--base");
    EXPECT_NE(std::string(e.what()).find("lina cmd verify --base"), std::string::npos) << e.what();
  }
  r.ops = {"all"};
  r.base.reset();
  EXPECT_EQ(build_command_argv(r, "lina", repo)[3], "all");
  r.action = "verify";
  EXPECT_THROW(build_command_argv(r, "lina", repo), Error);  // verify takes one real op
  r.ops = {"chunk_gla"};
  r.base = "no-such-ref-xyz";  // a ref that names no commit: a baseline that cannot be resolved (exit 3)
  EXPECT_THROW(build_command_argv(r, "lina", repo), BaselineError);
  r.base = "--output=/etc/passwd";  // would be an option to git
  EXPECT_THROW(build_command_argv(r, "lina", repo), Error);
}

std::string refusal(const std::vector<std::string>& ops, const std::vector<std::string>& modes,
                    const std::vector<std::string>& shapes) {
  try {
    check_cell_selection(ops, modes, shapes);
  } catch (const Error& e) {
    return e.argument() + ": " + e.what();
  }
  return "accepted";
}

TEST(ToolsCmd, ValidatesOpsModesShapes) {
  EXPECT_EQ(refusal({"chunk_kda"}, {"fwd", "infer", "bwd", "fwdbwd"}, {"B8_T1024_H8_D64", "varlen_longtail_T32768_H16_D128"}), "accepted");
  EXPECT_NE(refusal({"chunk_xyz"}, {}, {}).find("--op: --op `chunk_xyz`: unknown op"), std::string::npos);
  EXPECT_NE(refusal({"chunk_gla"}, {"forward"}, {}).find("--modes"), std::string::npos);
  EXPECT_NE(refusal({"chunk_gla"}, {}, {"B1_T8192_H96"}).find("--shapes `B1_T8192_H96`: not a shape name"), std::string::npos);
  EXPECT_NE(refusal({"chunk_gla"}, {}, {"B1_T8192_H96_D96"}).find("head dim D96"), std::string::npos);
  EXPECT_NE(refusal({"chunk_gla"}, {}, {"B1_T8192_H16_D128_HV32"}).find("not an argument of chunk_gla"), std::string::npos);
  EXPECT_NE(refusal({"chunk_kda"}, {}, {"B1_T8192_H16_D128_HV24"}).find("multiple of H16"), std::string::npos);
  EXPECT_NE(refusal({"chunk_kda"}, {}, {"B1_T8192_H16_D128; rm -rf /"}).find("not a shape name"), std::string::npos);
  auto s = parse_shape_name("B2_T16384_H16_D128_HV64");
  ASSERT_TRUE(s);
  EXPECT_EQ(s->B * 1000000 + s->T, 2 * 1000000 + 16384);
  EXPECT_EQ(s->HV, 64);
}

TEST(ToolsCmd, CliPrintsOneCommandAndRefusesBadInput) {
  const auto lina = lina::testing::lina_binary();
  if (!std::filesystem::exists(lina)) GTEST_SKIP() << "lina binary not built";
  auto ok = run_process({lina.string(), "cmd", "profile", "--op", "chunk_gla", "--modes", "fwd", "--shapes",
                         "B1_T8192_H96_D128", "--set", "source", "--out", "profile/my run", "--lina", "lina"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ok.out, "lina profile --op chunk_gla --modes fwd --shapes B1_T8192_H96_D128 --set source --out 'profile/my run'\n");
  auto bad = run_process({lina.string(), "cmd", "verify", "--op", "chunk_gla,chunk_kda"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("exactly one op"), std::string::npos) << bad.err;
  EXPECT_TRUE(bad.out.empty());
}

}  // namespace
}  // namespace lina::harness
