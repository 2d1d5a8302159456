#include "harness/util/json_file.h"

#include "harness/util/text_file.h"
#include "lina/error.h"

namespace lina::harness {

namespace {
struct TooDeep {};
}  // namespace

nlohmann::json parse_json_text(const std::string& text, const std::string& source, const std::string& argument) {
  using nlohmann::json;
  const auto fail = [&](const std::string& what) -> json {
    throw Error(ErrorCode::invalid_argument, argument, source + ": " + what);
  };
  if (text.size() > kMaxInputBytes)
    return fail("seen " + std::to_string(text.size()) + " bytes of JSON, expected at most " + std::to_string(kMaxInputBytes));
  // The parser reports the depth of each value as it opens; stopping there keeps the document (and
  // every later walk of it) shallow.
  const json::parser_callback_t depth_limit = [](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) && depth >= kMaxJsonDepth)
      throw TooDeep{};
    return true;
  };
  try {
    return json::parse(text, depth_limit);
  } catch (const TooDeep&) {
    return fail("seen JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels, expected at most " +
                std::to_string(kMaxJsonDepth));
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number such as 1e999
    return fail(std::string("not valid JSON: ") + e.what());
  }
}

nlohmann::json read_json_file(const std::filesystem::path& path, const std::string& argument) {
  const std::string arg = argument.empty() ? path.string() : argument;
  return parse_json_text(read_text_file(path, argument), path.string(), arg);
}

}  // namespace lina::harness
