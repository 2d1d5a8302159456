// `lina run --gpus N`: this command once per shard, each child on its own GPU (CUDA_VISIBLE_DEVICES),
// then one merged result in the one-process cell order (docs/multi-gpu.md).
#pragma once
#include "harness/engine/runner.h"

namespace lina::cli {

// Validates `gpus` against the visible devices (on the CPU backend: only with an explicit
// --backend cpu, as N processes), runs the children, prints the merged table and writes
// cfg.json_path. Returns the run's exit code: that of a one-process run (0, 1 or 2), or 1 when a child
// crashed, was killed or wrote no results (named on stderr; then no result file is written).
int run_on_gpus(const harness::RunConfig& cfg, const harness::Plan& plan, int gpus);

}  // namespace lina::cli
