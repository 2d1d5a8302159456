#include <gtest/gtest.h>

#include "harness/verify/gate.h"
#include "lina/error.h"

namespace lina::harness {
namespace {

TEST(GateKeyword, SingleWordIsCaseSensitiveSubstring) {
  const auto k = KeywordExpr::parse("T1024");
  EXPECT_TRUE(k.matches("ChunkGla/Fwd.B2_T1024_H4_D128"));
  EXPECT_FALSE(k.matches("ChunkGla/Fwd.B2_T2048_H4_D128"));
  EXPECT_FALSE(KeywordExpr::parse("t1024").matches("ChunkGla/Fwd.B2_T1024_H4_D128"));
}

TEST(GateKeyword, AndOrNotWithPrecedence) {
  const std::string fwd = "ChunkKda/Fwd.B1_T2048_H4_D128_varlen", bwd = "ChunkKda/Bwd.B2_T1024_H4_D128";
  EXPECT_TRUE(KeywordExpr::parse("Fwd and varlen").matches(fwd));
  EXPECT_FALSE(KeywordExpr::parse("Fwd and varlen").matches(bwd));
  EXPECT_TRUE(KeywordExpr::parse("Fwd or T1024").matches(bwd));
  EXPECT_FALSE(KeywordExpr::parse("not Bwd").matches(bwd));
  EXPECT_TRUE(KeywordExpr::parse("not Bwd").matches(fwd));
  // not > and > or: "a or b and c" is a or (b and c).
  EXPECT_TRUE(KeywordExpr::parse("T2048 or Bwd and varlen").matches(fwd));
  EXPECT_FALSE(KeywordExpr::parse("(T2048 or Bwd) and not varlen").matches(fwd));
  EXPECT_TRUE(KeywordExpr::parse("(T2048 or Bwd) and not varlen").matches(bwd));
  EXPECT_TRUE(KeywordExpr::parse("not not Fwd").matches(fwd));
}

TEST(GateKeyword, SyntaxErrorsNameTheFlag) {
  for (const char* bad : {"", "and", "Fwd and", "(Fwd", "Fwd)", "Fwd or or Bwd", "not"}) {
    try {
      KeywordExpr::parse(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.argument(), "--gate-k") << bad;
      EXPECT_NE(std::string(e.what()).find("--gate-k"), std::string::npos);
    }
  }
}

TEST(GateList, ParsesSuitesTestsAndDropsParamComments) {
  const std::string text =
      "Running main() from gtest_main.cc\n"
      "ChunkGla/Fwd.\n"
      "  B2_T1024_H4_D128\n"
      "  B1_T63_H1_D64  # GetParam() = 42\n"
      "ChunkGlaCuda/Bwd.  # TypeParam = int\n"
      "  B2_T1024_H4_D128_varlen\n";
  const auto names = parse_gtest_list(text);
  ASSERT_EQ(names.size(), 3u);
  EXPECT_EQ(names[0], "ChunkGla/Fwd.B2_T1024_H4_D128");
  EXPECT_EQ(names[1], "ChunkGla/Fwd.B1_T63_H1_D64");
  EXPECT_EQ(names[2], "ChunkGlaCuda/Bwd.B2_T1024_H4_D128_varlen");
}

}  // namespace
}  // namespace lina::harness
