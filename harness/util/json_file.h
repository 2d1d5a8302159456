// The one JSON reader of the harness: every file or text it parses (result files, the loop's log and
// contract, kwargs.json, gate reports, build stamps, --custom-shapes) goes through here, so that a
// nesting deeper than kMaxJsonDepth, a file larger than kMaxInputBytes, a number out of range or a
// syntax error is refused by name instead of exhausting the stack later.
#pragma once
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace lina::harness {

// Deeper than any document lina writes or reads (results nest 4 levels; gtest reports 5).
inline constexpr int kMaxJsonDepth = 64;

// Parses `text`; lina::Error(invalid_argument, argument) "<source>: ..." when it is not valid JSON,
// nests deeper than kMaxJsonDepth or holds a number that does not fit a double.
nlohmann::json parse_json_text(const std::string& text, const std::string& source, const std::string& argument);
// read_text_file (regular files only, size limit) then parse_json_text; source and argument default to the path.
nlohmann::json read_json_file(const std::filesystem::path& path, const std::string& argument = "");

}  // namespace lina::harness
