// `lina check`: one op on .npy inputs against the fp64 reference (harness/verify/check.h).
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "harness/verify/check.h"

namespace lina::cli {

void register_check(CLI::App& app, Outcome& outcome) {
  auto o = std::make_shared<harness::CheckOptions>();
  auto out_dir = std::make_shared<std::string>();
  auto* sub = app.add_subcommand("check", "Run one op on .npy inputs and compare with the reference");
  sub->add_option("--op", o->op, "chunk_gla, chunk_kda or chunk_gdn")->required();
  sub->add_option("--inputs", o->inputs, "Directory of <arg>.npy files (+ optional kwargs.json)")->required();
  sub->add_option("--backend", o->backend, "cpu or cuda (default: cuda when a GPU is visible)");
  sub->add_option("--out", *out_dir, "Write lina's outputs here as .npy");
  sub->callback([&outcome, o, out_dir] {
    if (!out_dir->empty()) o->out = *out_dir;
    outcome.code = harness::run_check(*o, std::cout) == 0 ? kOk : kGateFailed;
  });
}

}  // namespace lina::cli
