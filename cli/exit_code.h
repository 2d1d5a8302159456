// The one mapping from an exception that leaves a subcommand to the documented exit code
// (docs/architecture.md section 4), with the message printed for it.
#pragma once
#include <exception>
#include <string>

namespace lina::cli {

// `command`: the subcommand's name for the message ("lina verify: ..."); empty: "lina: ...".
// Prints the message to stderr and returns the exit code; never throws.
int report_exception(const std::exception_ptr& error, const std::string& command);

}  // namespace lina::cli
