#include "harness/tools/diff_map.h"

#include <algorithm>
#include <sstream>

#include <nlohmann/json.hpp>

#include "harness/engine/registry.h"
#include "harness/util/json_file.h"
#include "harness/util/subprocess.h"
#include "harness/util/text_file.h"
#include "lina/error.h"

namespace lina::harness {
namespace fs = std::filesystem;

namespace {

// Repo-relative form of `p`, or "" when it lies outside the repo.
std::string rel_to_repo(const std::string& p, const fs::path& base, const fs::path& repo) {
  fs::path abs = fs::path(p).is_absolute() ? fs::path(p) : base / p;
  abs = abs.lexically_normal();
  const fs::path rel = abs.lexically_relative(repo.lexically_normal());
  const std::string s = rel.generic_string();
  if (s.empty() || s == "." || s.rfind("..", 0) == 0) return {};
  return s;
}

bool is_source(const std::string& p) {
  for (const char* ext : {".cpp", ".cc", ".cxx", ".cu", ".c"}) {
    const std::string e = ext;
    if (p.size() > e.size() && p.compare(p.size() - e.size(), e.size(), e) == 0) return true;
  }
  return false;
}

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

}  // namespace

const std::vector<std::string>& all_ops() {
  static const std::vector<std::string> ops = op_names();
  return ops;
}

std::vector<std::string> ops_of_source(const std::string& p) {
  std::vector<std::string> out;
  for (const auto& op : registry())
    if (starts_with(p, op.source_dir + "/")) out.push_back(op.name);
  return out;
}

DepGraph parse_ninja_deps(const std::string& text, const fs::path& build_dir, const fs::path& repo_root) {
  DepGraph g;
  std::istringstream in(text);
  std::string line, source;
  bool first = false;
  std::set<std::string>* cur = nullptr;
  std::set<std::string> pending;
  auto flush = [&] {
    if (!source.empty()) g[source].insert(pending.begin(), pending.end());
    source.clear();
    pending.clear();
  };
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line[0] != ' ' && line[0] != '\t') {
      flush();
      first = line.find("#deps") != std::string::npos;
      cur = first ? &pending : nullptr;
      continue;
    }
    if (!cur) continue;
    const auto b = line.find_first_not_of(" \t");
    const std::string path = line.substr(b);
    const std::string rel = rel_to_repo(path, build_dir, repo_root);
    if (first) {  // ninja lists the target's source first
      first = false;
      if (is_source(path)) {
        source = rel;
        continue;
      }
    }
    if (!rel.empty()) pending.insert(rel);
  }
  flush();
  g.erase("");
  return g;
}

void add_make_deps(DepGraph& g, const std::string& text, const fs::path& cwd, const fs::path& repo_root) {
  // Join continuations, then split words honouring "\ " escapes.
  std::string joined;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 1 < text.size() && text[i + 1] == '\n') { joined += ' '; ++i; }
    else if (text[i] == '\\' && i + 2 < text.size() && text[i + 1] == '\r' && text[i + 2] == '\n') { joined += ' '; i += 2; }
    else joined += text[i];
  }
  std::istringstream rules(joined);
  std::string rule;
  while (std::getline(rules, rule)) {
    const auto colon = rule.find(": ");
    if (colon == std::string::npos) continue;
    std::vector<std::string> words;
    std::string w;
    for (size_t i = colon + 1; i < rule.size(); ++i) {
      if (rule[i] == '\\' && i + 1 < rule.size() && rule[i + 1] == ' ') { w += ' '; ++i; }
      else if (rule[i] == ' ' || rule[i] == '\t') { if (!w.empty()) words.push_back(w); w.clear(); }
      else w += rule[i];
    }
    if (!w.empty()) words.push_back(w);
    if (words.empty() || !is_source(words[0])) continue;
    const std::string src = rel_to_repo(words[0], cwd, repo_root);
    if (src.empty()) continue;
    auto& deps = g[src];
    for (size_t i = 1; i < words.size(); ++i) {
      const std::string r = rel_to_repo(words[i], cwd, repo_root);
      if (!r.empty()) deps.insert(r);
    }
  }
}

std::vector<std::string> split_command(const std::string& cmd) {
  std::vector<std::string> out;
  std::string w;
  bool have = false;
  char quote = 0;
  for (size_t i = 0; i < cmd.size(); ++i) {
    const char c = cmd[i];
    if (quote) {
      if (c == quote) quote = 0;
      else if (c == '\\' && quote == '"' && i + 1 < cmd.size()) w += cmd[++i];
      else w += c;
    } else if (c == '\'' || c == '"') { quote = c; have = true; }
    else if (c == '\\' && i + 1 < cmd.size()) { w += cmd[++i]; have = true; }
    else if (c == ' ' || c == '\t' || c == '\n') { if (have) out.push_back(w); w.clear(); have = false; }
    else { w += c; have = true; }
  }
  if (have) out.push_back(w);
  return out;
}

DepGraph collect_dep_graph(const fs::path& build_dir, const fs::path& repo_root) {
  DepGraph g;
  if (fs::exists(build_dir / "build.ninja")) {
    auto r = run_process({"ninja", "-C", build_dir.string(), "-t", "deps"});
    if (r.exit_code == 0) g = parse_ninja_deps(r.out, build_dir, repo_root);
  }
  const bool covers_ops = std::any_of(g.begin(), g.end(), [](const auto& kv) { return !ops_of_source(kv.first).empty(); });
  if (covers_ops) return g;
  // Not built yet (empty deps log): ask the compiler for the includes of each op-library source.
  const fs::path cc = build_dir / "compile_commands.json";
  if (!fs::exists(cc)) {
    throw Error(ErrorCode::invalid_argument, "--build-dir",
                "--from-diff: " + build_dir.string() + " has neither a ninja deps log nor compile_commands.json; configure it first");
  }
  const nlohmann::json entries = read_json_file(cc);
  if (!entries.is_array()) throw Error(ErrorCode::invalid_argument, cc.string(), cc.string() + ": expected a JSON array of compile commands");
  for (const auto& e : entries) {
    const std::string file = e.value("file", "");
    const fs::path dir = e.value("directory", build_dir.string());
    if (!starts_with(rel_to_repo(file, dir, repo_root), "ops/")) continue;
    std::vector<std::string> args = e.contains("arguments") ? e["arguments"].get<std::vector<std::string>>()
                                                            : split_command(e.value("command", ""));
    std::vector<std::string> dep_args;
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "-o" || args[i] == "-MF" || args[i] == "-MT") { ++i; continue; }
      if (args[i] == "-c" || args[i] == "-MD" || args[i] == "-MMD") continue;
      dep_args.push_back(args[i]);
    }
    dep_args.insert(dep_args.begin() + 1, {"-MM", "-MF", "/dev/stdout"});
    ProcessOptions in_dir;
    in_dir.cwd = dir;
    auto r = run_process(dep_args, in_dir);
    if (r.exit_code != 0) {
      throw Error(ErrorCode::runtime, file, "--from-diff: dependency scan of " + file + " failed: " + r.err_or_spawn_error().substr(0, 500));
    }
    add_make_deps(g, r.out, dir, repo_root);
  }
  return g;
}

DiffMapping map_changes_to_ops(const std::vector<std::string>& changed, const DepGraph& graph) {
  DiffMapping m;
  auto add = [&](const std::string& op, const std::string& why) {
    auto& v = m.ops[op];
    if (std::find(v.begin(), v.end(), why) == v.end()) v.push_back(why);
  };
  for (const auto& f : changed) {
    bool mapped = false;
    for (const auto& op : ops_of_source(f)) { add(op, f + " is " + op + " code"); mapped = true; }
    for (const auto& [src, deps] : graph) {
      const auto owners = ops_of_source(src);
      if (owners.empty() || !deps.count(f)) continue;
      for (const auto& op : owners) add(op, src + " includes " + f);
      mapped = true;
    }
    // A shared op-library source is linked into every op.
    if (!mapped && graph.count(f) && starts_with(f, "ops/")) {
      for (const auto& op : all_ops()) add(op, f + " is shared op-library code");
      mapped = true;
    }
    // Build configuration can change any op's code generation.
    if (!mapped && (f == "CMakeLists.txt" || starts_with(f, "cmake/") || f == "ops/CMakeLists.txt")) {
      for (const auto& op : all_ops()) add(op, f + " is build configuration");
      mapped = true;
    }
    if (!mapped) m.unmapped.push_back(f);
  }
  return m;
}

std::vector<std::string> changed_files(const fs::path& repo, const std::string& base_sha, const std::string& head_sha) {
  auto r = run_process({"git", "-C", repo.string(), "diff", "--name-only", base_sha, head_sha, "--"});
  if (r.exit_code != 0) throw Error(ErrorCode::runtime, "--from-diff", "git diff --name-only failed: " + r.err_or_spawn_error());
  std::vector<std::string> out;
  std::istringstream in(r.out);
  std::string l;
  while (std::getline(in, l))
    if (!l.empty()) out.push_back(l);
  return out;
}

}  // namespace lina::harness
