// `lina compare --from-diff`: changed files -> ops, through the build's real dependency graph
// (ninja's deps log, or the compiler's -MM output from compile_commands.json).
#pragma once
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace lina::harness {

// Compiled source (repo-relative) -> every file it includes (repo-relative; files outside the repo
// are dropped).
using DepGraph = std::map<std::string, std::set<std::string>>;

// `ninja -t deps` output: "<target>: #deps N, ..." followed by indented paths, the source first.
DepGraph parse_ninja_deps(const std::string& text, const std::filesystem::path& build_dir,
                          const std::filesystem::path& repo_root);
// Make-style rules as printed by `cc -MM` ("obj.o: src.cpp a.h \\\n b.h"), the source first;
// relative paths are resolved against `cwd`.
void add_make_deps(DepGraph& g, const std::string& text, const std::filesystem::path& cwd,
                   const std::filesystem::path& repo_root);
// Shell-style split of a compile_commands "command" string.
std::vector<std::string> split_command(const std::string& cmd);

// The graph of `build_dir`: ninja's deps log when it covers the op sources, else each op-library
// entry of compile_commands.json re-run with -MM (nothing is compiled). lina::Error when neither works.
DepGraph collect_dep_graph(const std::filesystem::path& build_dir, const std::filesystem::path& repo_root);

// Ops a source file belongs to by its folder: ops/gla/** -> chunk_gla, ops/delta/** -> chunk_kda,
// chunk_gdn; empty for shared code (ops/common, ops/core) and everything else.
std::vector<std::string> ops_of_source(const std::string& rel_path);
const std::vector<std::string>& all_ops();

struct DiffMapping {
  std::map<std::string, std::vector<std::string>> ops;  // op -> reasons
  std::vector<std::string> unmapped;                     // changed files no op depends on
};
DiffMapping map_changes_to_ops(const std::vector<std::string>& changed, const DepGraph& graph);

// `git diff --name-only base head` in `repo`.
std::vector<std::string> changed_files(const std::filesystem::path& repo, const std::string& base_sha,
                                       const std::string& head_sha);

}  // namespace lina::harness
