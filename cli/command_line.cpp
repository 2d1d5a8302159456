#include "cli/command_line.h"

#include <cstdio>

#include "harness/util/shell_quote.h"

namespace lina::cli {

std::vector<std::string> command_argv() {
  std::FILE* f = std::fopen("/proc/self/cmdline", "rb");
  if (!f) return {};
  std::string raw;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) raw.append(buf, n);
  std::fclose(f);
  std::vector<std::string> args;
  std::size_t start = 0;
  for (std::size_t i = 0; i < raw.size(); ++i)
    if (raw[i] == '\0') {
      args.push_back(raw.substr(start, i - start));
      start = i + 1;
    }
  return args;
}

std::string command_line() { return harness::shell_join(command_argv()); }

}  // namespace lina::cli
