// POSIX shell quoting: what `lina cmd` prints and what result files store as config.command.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace lina::harness {

// One word for /bin/sh: left bare when it holds only characters no shell treats specially,
// otherwise wrapped in single quotes with each embedded ' written as '\''.
std::string shell_quote(std::string_view word);

// argv joined into one command line, each word quoted as above.
std::string shell_join(const std::vector<std::string>& argv);

}  // namespace lina::harness
