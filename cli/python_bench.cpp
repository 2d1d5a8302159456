#include "cli/python_bench.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "lina/build_info.h"

namespace lina::cli {

namespace {

// The folder of this executable's build tree (build/cli/lina -> build).
std::string build_dir() {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return {};
  self[n] = '\0';
  std::string dir(self);
  dir = dir.substr(0, dir.rfind('/'));
  return dir.substr(0, dir.rfind('/'));
}

}  // namespace

const std::map<std::string, std::string>& fla_model_types() {
  static const std::map<std::string, std::string> m = {
      {"gla", "gla"}, {"kda", "kda"}, {"gdn", "gated_deltanet"}, {"gated_deltanet", "gated_deltanet"}};
  return m;
}

void add_model_and_backend_options(CLI::App* sub, std::vector<std::string>& names, std::vector<std::string>& backends) {
  std::vector<std::string> known;
  for (const auto& [name, _] : fla_model_types()) known.push_back(name);
  sub->add_option("--name", names, "models: gla, kda, gdn (gated_deltanet); comma list")
      ->delimiter(',')
      ->check(CLI::IsMember(known));
  sub->add_option("--backends", backends, "fla and / or lina; comma list")
      ->delimiter(',')
      ->check(CLI::IsMember({"fla", "lina"}));
}

std::string comma_list(const std::vector<std::string>& values) {
  std::string s;
  for (const auto& x : values) s += (s.empty() ? "" : ",") + x;
  return s;
}

void exec_python_bench(const std::string& command, const std::string& script, const std::vector<std::string>& args,
                       Outcome& outcome) {
  if (std::system("python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    std::fprintf(stderr, "lina %s: python3 with torch is required (not found)\n", command.c_str());
    outcome.code = kUsage;
    return;
  }
  // This build's extension and the package sources, unless the caller points elsewhere.
  const std::string build = build_dir();
  if (!build.empty()) setenv("LINA_TORCH_LIB", (build + "/bindings/torch/_C.so").c_str(), 0);
  const std::string python_dir = std::string(LINA_BUILD_SOURCE_DIR) + "/python";
  const char* path = std::getenv("PYTHONPATH");
  setenv("PYTHONPATH", (python_dir + (path && *path ? ":" + std::string(path) : "")).c_str(), 1);
  std::vector<std::string> argv_s = {"python3", std::string(LINA_BUILD_SOURCE_DIR) + "/bench/" + script};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_s) argv.push_back(s.data());
  argv.push_back(nullptr);
  execvp("python3", argv.data());
  std::perror(("lina " + command + ": exec python3").c_str());
  outcome.code = kUsage;
}

}  // namespace lina::cli
