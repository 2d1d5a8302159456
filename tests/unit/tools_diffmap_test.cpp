#include <gtest/gtest.h>

#include "harness/tools/diff_map.h"
#include "harness/util/subprocess.h"
#include "harness/util/text_file.h"
#include "lina/build_info.h"
#include "lina/error.h"
#include "tools_support.h"

namespace lina::harness {
namespace {
using lina::testing::data;

DepGraph fixture_graph() {
  // The fixtures name /repo as the source tree and /repo/build as the build tree.
  DepGraph g = parse_ninja_deps(read_text_file(data("ninja_deps.txt")), "/repo/build", "/repo");
  add_make_deps(g, read_text_file(data("make_deps.txt")), "/repo/build", "/repo");
  return g;
}

std::vector<std::string> ops(const DiffMapping& m) {
  std::vector<std::string> out;
  for (const auto& [op, why] : m.ops) out.push_back(op);
  return out;
}

TEST(ToolsDiffMap, ParsesNinjaDepsAndMakeRules) {
  const DepGraph g = fixture_graph();
  ASSERT_TRUE(g.count("ops/gla/api.cpp"));
  const auto& gla = g.at("ops/gla/api.cpp");
  EXPECT_TRUE(gla.count("include/lina/chunk_gla.h"));
  EXPECT_TRUE(gla.count("ops/common/backends.h"));  // relative to the build dir
  EXPECT_FALSE(gla.count("ops/gla/api.cpp"));      // a source is not its own dependency
  EXPECT_EQ(gla.size(), 3u);                        // system headers dropped
  ASSERT_TRUE(g.count("ops/gla/cuda/fwd.cu"));
  EXPECT_TRUE(g.at("ops/gla/cuda/fwd.cu").count("ops/common/cuda/wgmma helpers.cuh"));  // escaped space
  EXPECT_TRUE(g.at("ops/gla/cuda/fwd.cu").count("ops/core/cuda/stream.h"));
  ASSERT_TRUE(g.count("ops/delta/cuda/fwd.cu"));
  EXPECT_FALSE(g.count("cli/lina"));
}

TEST(ToolsDiffMap, MapsChangesThroughIncludes) {
  const DepGraph g = fixture_graph();
  auto m = map_changes_to_ops({"ops/gla/cpu_chunked.cpp"}, g);  // op folder, even if not in the graph
  EXPECT_EQ(ops(m), std::vector<std::string>{"chunk_gla"});
  m = map_changes_to_ops({"ops/common/l2norm.cuh"}, g);  // only the delta sources include it
  EXPECT_EQ(ops(m), (std::vector<std::string>{"chunk_gdn", "chunk_kda"}));
  EXPECT_EQ(m.ops["chunk_kda"][0], "ops/delta/api.cpp includes ops/common/l2norm.cuh");
  m = map_changes_to_ops({"ops/common/cuda/wgmma helpers.cuh"}, g);
  EXPECT_EQ(ops(m), std::vector<std::string>{"chunk_gla"});
  m = map_changes_to_ops({"ops/common/problem.h"}, g);
  EXPECT_EQ(ops(m), (std::vector<std::string>{"chunk_gdn", "chunk_gla", "chunk_kda"}));
  m = map_changes_to_ops({"ops/common/dispatch.cpp"}, g);  // shared source, linked into every op
  EXPECT_EQ(ops(m).size(), all_ops().size());
  m = map_changes_to_ops({"include/lina/error.h"}, g);  // only the shared dispatch.cpp includes it
  EXPECT_TRUE(m.ops.empty());
  m = map_changes_to_ops({"harness/results/summary.cpp", "docs/loop.md", "include/lina/chunk_gla.h"}, g);
  EXPECT_EQ(ops(m), std::vector<std::string>{"chunk_gla"});  // harness including a header does not count
  EXPECT_EQ(m.unmapped, (std::vector<std::string>{"harness/results/summary.cpp", "docs/loop.md"}));
  m = map_changes_to_ops({"cmake/LinaCuda.cmake"}, g);
  EXPECT_EQ(ops(m).size(), all_ops().size());
}

TEST(ToolsDiffMap, SplitsCompileCommands) {
  EXPECT_EQ(split_command("/usr/bin/c++ -DX=\"a b\" -I'/p q' -o x.o -c src.cpp"),
            (std::vector<std::string>{"/usr/bin/c++", "-DX=a b", "-I/p q", "-o", "x.o", "-c", "src.cpp"}));
}

TEST(ToolsDiffMap, RealBuildGraph) {
  const auto build = current_executable().parent_path().parent_path();
  if (!std::filesystem::exists(build / "build.ninja")) GTEST_SKIP() << "not a ninja build";
  const DepGraph g = collect_dep_graph(build, LINA_BUILD_SOURCE_DIR);
  ASSERT_TRUE(g.count("ops/gla/api.cpp"));
  EXPECT_TRUE(g.at("ops/gla/api.cpp").count("include/lina/chunk_gla.h"));
  auto m = map_changes_to_ops({"include/lina/chunk_gla.h"}, g);
  EXPECT_TRUE(m.ops.count("chunk_gla"));
  m = map_changes_to_ops({"include/lina/chunk_delta.h"}, g);
  EXPECT_TRUE(m.ops.count("chunk_kda"));
  EXPECT_TRUE(m.ops.count("chunk_gdn"));
}

TEST(ToolsDiffMap, CompileCommandsFallbackRunsTheCompiler) {
  const auto build = current_executable().parent_path().parent_path();
  if (!std::filesystem::exists(build / "compile_commands.json")) GTEST_SKIP() << "no compile_commands.json";
  // A tree with compile_commands.json but no ninja deps log: the graph comes from -MM.
  lina::testing::TempDir tmp;
  std::filesystem::copy_file(build / "compile_commands.json", tmp.path / "compile_commands.json");
  const DepGraph g = collect_dep_graph(tmp.path, LINA_BUILD_SOURCE_DIR);
  ASSERT_TRUE(g.count("ops/delta/api.cpp"));
  EXPECT_TRUE(g.at("ops/delta/api.cpp").count("include/lina/chunk_delta.h"));
  EXPECT_FALSE(g.count("harness/results/summary.cpp"));  // only op-library entries are scanned
  EXPECT_THROW(collect_dep_graph(tmp.path / "nothing", LINA_BUILD_SOURCE_DIR), Error);
}

}  // namespace
}  // namespace lina::harness
