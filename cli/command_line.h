// This process's own command line, read from /proc/self/cmdline (main.cpp stays untouched).
#pragma once
#include <string>
#include <vector>

namespace lina::cli {

std::vector<std::string> command_argv();
// The same, shell-quoted into one line (config.command of result files).
std::string command_line();

}  // namespace lina::cli
