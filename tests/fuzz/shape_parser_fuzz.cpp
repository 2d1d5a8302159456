// The shape parsers: --shapes names, --custom-shapes JSON and --varlen specs. Any text either
// describes workloads or is refused with lina::Error.
#include <cstddef>
#include <cstdint>
#include <string>

#include "harness/engine/workload.h"
#include "lina/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace lina::harness;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto refused_by_name = [](auto&& parse) {
    try {
      parse();
    } catch (const lina::Error&) {
    }
  };
  refused_by_name([&] { parse_shape_name(text, 7); });
  refused_by_name([&] { parse_varlen(text, 7); });
  // '@' names a file to read: the fuzzer tests the JSON, not the file system.
  if (text.empty() || text[0] != '@') refused_by_name([&] { parse_custom_shapes(text, 7); });
  return 0;
}
