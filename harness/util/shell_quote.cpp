#include "harness/util/shell_quote.h"

namespace lina::harness {

static bool is_safe(char c) {
  // Deliberately short list: anything else (including '=' in the first word, '~', '*', '#')
  // gets quoted, so the bare form never depends on shell context.
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.' || c == '/' || c == ',' || c == ':' || c == '+' || c == '@' || c == '%';
}

std::string shell_quote(std::string_view word) {
  bool safe = !word.empty();
  for (char c : word) safe = safe && is_safe(c);
  if (safe) return std::string(word);
  std::string out = "'";
  for (char c : word) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  out += '\'';
  return out;
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string out;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (i) out += ' ';
    out += shell_quote(argv[i]);
  }
  return out;
}

}  // namespace lina::harness
