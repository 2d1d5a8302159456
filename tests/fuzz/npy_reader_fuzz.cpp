// The .npy reader (`lina check` inputs): any bytes either parse or are refused with lina::Error.
#include <cstddef>
#include <cstdint>
#include <string>

#include "harness/util/npy.h"
#include "lina/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  for (const bool u2_is_bf16 : {false, true}) {
    try {
      lina::harness::parse_npy(bytes, "fuzz.npy", {u2_is_bf16});
    } catch (const lina::Error&) {
    }
  }
  return 0;
}
