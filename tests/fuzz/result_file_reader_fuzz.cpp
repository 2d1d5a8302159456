// The readers of result files and the loop's log: the JSON reader, then each schema reader on what
// it parsed. Only lina::Error may come out, whatever the document holds.
#include <cstddef>
#include <cstdint>
#include <string>

#include "harness/results/schema.h"
#include "harness/tools/loop_log.h"
#include "harness/util/json_file.h"
#include "lina/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace lina::harness;
  nlohmann::json doc;
  try {
    doc = parse_json_text(std::string(reinterpret_cast<const char*>(data), size), "fuzz.json", "fuzz");
  } catch (const lina::Error&) {
    return 0;
  }
  const auto refused_by_name = [&](auto&& read) {
    try {
      read();
    } catch (const lina::Error&) {
    }
  };
  refused_by_name([&] { parse_summary_file(doc, "fuzz.json"); });
  refused_by_name([&] { validate_document(doc, "fuzz.json"); });
  refused_by_name([&] { parse_run_file(doc, "fuzz.json"); });
  refused_by_name([&] { LoopContract::from_json(doc, "fuzz.json"); });
  return 0;
}
