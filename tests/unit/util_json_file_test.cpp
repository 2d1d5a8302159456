// The harness's one JSON reader: nesting, size and number limits refused by name.
#include <gtest/gtest.h>

#include <string>

#include "harness/util/json_file.h"
#include "lina/error.h"

namespace lina::harness {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_json_text(text, "file 'x.json'", "--from");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    EXPECT_EQ(e.argument(), "--from");
    return e.what();
  }
  ADD_FAILURE() << text.substr(0, 40) << " was accepted";
  return {};
}

TEST(UtilJsonFile, NestingPastTheLimitIsRefusedByName) {
  // 100k levels used to reach the recursive walks of the readers and exhaust the stack.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(error_of(deep).find("file 'x.json': seen JSON nested deeper than 64 levels"), std::string::npos);
  const std::string objects = [] {
    std::string s;
    for (int i = 0; i < 1000; ++i) s += "{\"a\":";
    return s + "1" + std::string(1000, '}');
  }();
  EXPECT_NE(error_of(objects).find("nested deeper"), std::string::npos);
  // At the limit it parses.
  const std::string at_limit = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(parse_json_text(at_limit, "x", "--from").is_array());
}

TEST(UtilJsonFile, NumbersOutOfRangeAndSyntaxErrorsAreNamed) {
  // 1e999 is a json::out_of_range, not a parse_error: it used to escape as exit 1.
  EXPECT_NE(error_of(R"({"samples": 1e999})").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("{garbage").find("file 'x.json': not valid JSON"), std::string::npos);
  EXPECT_NE(error_of("").find("not valid JSON"), std::string::npos);
  EXPECT_EQ(parse_json_text(R"({"a": [1, 2.5, "x"]})", "x", "--from")["a"][1], 2.5);
}

}  // namespace
}  // namespace lina::harness
