// The --gate-k keyword expression: any text parses or is refused with lina::Error naming --gate-k;
// a parsed expression matches without crashing.
#include <cstddef>
#include <cstdint>
#include <string>

#include "harness/verify/gate.h"
#include "lina/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const auto k = lina::harness::KeywordExpr::parse(text);
    k.matches("ChunkGla/Fwd.B2_T1024_H4_D128");
    k.matches(text);
  } catch (const lina::Error&) {
  }
  return 0;
}
