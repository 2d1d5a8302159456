#include "harness/util/terminal_text.h"

namespace lina::harness {

std::string terminal_safe(std::string text) {
  for (char& c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\n') || u == 0x7f) c = '?';
  }
  return text;
}

}  // namespace lina::harness
