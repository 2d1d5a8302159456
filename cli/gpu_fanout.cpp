#include "cli/gpu_fanout.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

#include "cli/command_line.h"
#include "cli/shard.h"
#include "cli/shard_merge.h"
#include "harness/results/report.h"
#include "harness/util/subprocess.h"
#include "harness/util/text_file.h"
#include "lina/error.h"
#include "lina/lina.h"

namespace lina::cli {

namespace fs = std::filesystem;

namespace {

// The device each child sees: the entries of our CUDA_VISIBLE_DEVICES (CUDA stops at the first
// invalid one, so only the first `count` count), else the ordinals 0..count-1.
std::vector<std::string> visible_devices(int count) {
  std::vector<std::string> devices;
  const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
  if (env && *env) {
    const std::string list(env);
    for (std::size_t a = 0, b; a <= list.size() && static_cast<int>(devices.size()) < count; a = b + 1) {
      b = list.find(',', a);
      if (b == std::string::npos) b = list.size();
      devices.push_back(list.substr(a, b - a));
    }
  }
  for (int i = static_cast<int>(devices.size()); i < count; ++i) devices.push_back(std::to_string(i));
  return devices;
}

// Our own arguments without --gpus and --json (each child gets its --shard and its own --json).
std::vector<std::string> child_arguments() {
  const std::vector<std::string> argv = command_argv();
  std::vector<std::string> kept;
  for (std::size_t i = 1; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--gpus" || a == "--json") {
      ++i;  // and its value
      continue;
    }
    if (a.rfind("--gpus=", 0) == 0 || a.rfind("--json=", 0) == 0) continue;
    kept.push_back(a);
  }
  return kept;
}

std::string last_lines(const fs::path& log) {
  std::string text;
  try {
    text = harness::read_text_file(log);
  } catch (const Error&) {
    return "(no log)";
  }
  return harness::last_chars(text, 2000);
}

struct Child {
  Shard shard;
  std::string device;  // CUDA_VISIBLE_DEVICES of the child; empty on the CPU backend
  fs::path json, log;
  harness::ProcessResult result;
  std::string where() const { return "shard " + shard.label() + (device.empty() ? "" : " (CUDA_VISIBLE_DEVICES=" + device + ")"); }
};

}  // namespace

int run_on_gpus(const harness::RunConfig& cfg, const harness::Plan& plan, int gpus) {
  const bool cuda = plan.backend == Backend::cuda;
  if (cuda) {
    const int visible = cuda_device_count();
    if (gpus > visible)
      throw_invalid("--gpus", std::to_string(gpus), "at most " + std::to_string(visible) + " (the CUDA devices this process sees)");
  } else if (cfg.backend != "cpu") {
    throw_invalid("--gpus", std::to_string(gpus) + " with no CUDA device visible",
                  "a machine with that many GPUs, or --backend cpu to run the shards as processes on the CPU");
  }
  const std::vector<std::string> devices = cuda ? visible_devices(gpus) : std::vector<std::string>(gpus);
  const harness::TempDir tmp("lina-gpus");
  const fs::path exe = harness::current_executable();
  const std::vector<std::string> args = child_arguments();

  std::vector<Child> children(gpus);
  std::vector<std::thread> waiters;
  for (int i = 0; i < gpus; ++i) {
    Child& c = children[i];
    c.shard = Shard{i, gpus};
    c.device = devices[i];
    c.json = tmp.path() / ("shard-" + std::to_string(i) + ".json");
    c.log = tmp.path() / ("shard-" + std::to_string(i) + ".log");
    std::vector<std::string> argv{exe.string()};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--shard", c.shard.label(), "--json", c.json.string()});
    harness::ProcessOptions po;
    po.log_file = c.log;
    if (cuda) po.env["CUDA_VISIBLE_DEVICES"] = c.device;
    std::vector<std::size_t> cells;
    select_shard(plan, c.shard, cells);
    std::fprintf(stderr, "lina run: %s: %zu of %zu cells\n", c.where().c_str(), cells.size(), plan.cells.size());
    waiters.emplace_back([&c, argv, po] { c.result = harness::run_process(argv, po); });
  }
  for (auto& w : waiters) w.join();

  // A child that did not finish its cells leaves no merged file: it would look like the whole run.
  std::vector<ShardFile> files;
  bool failed = false;
  int code = 0;
  for (const Child& c : children) {
    const harness::ProcessResult& r = c.result;
    std::string why;
    if (!r.spawned) why = r.spawn_error;
    else if (r.timed_out) why = "timed out (LINA_CHILD_TIMEOUT_S changes the limit)";
    else if (r.exit_code > 128) why = "killed by signal " + std::to_string(r.exit_code - 128);
    else if (r.exit_code > 2 || !fs::exists(c.json)) why = "exited with " + std::to_string(r.exit_code) + " and wrote no results";
    if (!why.empty()) {
      std::fprintf(stderr, "lina run: %s failed: %s; its output:\n%s\n", c.where().c_str(), why.c_str(), last_lines(c.log).c_str());
      failed = true;
      continue;
    }
    files.push_back({c.json.string(), harness::read_results_file(c.json.string())});
    // As one process would: a refused cell (2) before a failed check or CUDA error (1).
    code = (code == 2 || r.exit_code == 2) ? 2 : std::max(code, r.exit_code);
  }
  if (failed) {
    std::fprintf(stderr, "lina run: not all shards finished: no merged results%s\n",
                 cfg.json_path.empty() ? "" : (" (" + cfg.json_path + " not written)").c_str());
    return 1;
  }
  const nlohmann::json merged = merge_shards(files, cfg.command);
  std::vector<harness::ResultRow> rows;
  for (const auto& r : merged.at("results")) rows.push_back(harness::row_from_json(r));
  if (!rows.empty()) std::fputs(harness::format_table(rows).c_str(), stdout);
  for (const auto& f : merged.at("failures"))
    std::fprintf(stderr, "lina run: %s %s %s failed: %s\n", f.value("op", "").c_str(), f.value("mode", "").c_str(),
                 f.value("shape", "").c_str(), f.value("error", "").c_str());
  if (!cfg.json_path.empty()) {
    harness::write_json_file(cfg.json_path, merged);
    std::fprintf(stderr, "lina run: wrote %s (%d shards merged)\n", cfg.json_path.c_str(), gpus);
  }
  return code;
}

}  // namespace lina::cli
