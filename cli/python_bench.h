// The PyTorch benches behind `lina train-bench` and `lina gen-bench`: python3 runs a script of bench/ with this
// build's extension (LINA_TORCH_LIB, unless the caller set it) and the checkout's python/ on PYTHONPATH.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "cli/commands.h"

namespace lina::cli {

// lina's op names for the models (gla, kda, gdn, gated_deltanet) -> FLA's model types.
const std::map<std::string, std::string>& fla_model_types();

// --name (models, checked against fla_model_types) and --backends (fla, lina), comma lists, into the vectors.
void add_model_and_backend_options(CLI::App* sub, std::vector<std::string>& names, std::vector<std::string>& backends);

// Comma list of the values (the scripts' --models / --sizes / ... form).
std::string comma_list(const std::vector<std::string>& values);

// Replaces this process with `python3 <source>/bench/<script> args...`. Without python3 and torch, or when the
// exec fails, it says so and sets outcome.code = kUsage (exit 2); `command` names the subcommand in messages.
void exec_python_bench(const std::string& command, const std::string& script, const std::vector<std::string>& args,
                       Outcome& outcome);

}  // namespace lina::cli
