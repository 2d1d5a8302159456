// The typed error of exit code 3: a baseline (or a compare side) could not be resolved, built, run or
// proven to be its SHA. Every command throws it for those causes, and the CLI's one exception-to-exit
// mapping (cli/exit_code.cpp) turns it into 3 wherever it comes from.
#pragma once
#include <stdexcept>

namespace lina::harness {

class BaselineError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace lina::harness
