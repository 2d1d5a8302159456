// `lina check` through the real binary: .npy inputs, error messages naming the file, exit codes.
#include <gtest/gtest.h>

#include <fstream>

#include "harness/util/npy.h"
#include "harness/util/subprocess.h"
#include "tests/support/random.h"

namespace lina::harness {
namespace {

namespace fs = std::filesystem;

void write_gla_inputs(const fs::path& d, std::int64_t B = 1, std::int64_t T = 40, std::int64_t H = 2, std::int64_t D = 16) {
  testing::Rng r(7);
  fs::create_directories(d);
  write_npy(d / "q.npy", testing::uniform(r, DType::f32, Shape{B, T, H, D}));
  write_npy(d / "k.npy", testing::uniform(r, DType::f32, Shape{B, T, H, D}));
  write_npy(d / "v.npy", testing::uniform(r, DType::f32, Shape{B, T, H, D}));
  write_npy(d / "g.npy", testing::make(DType::f32, Shape{B, T, H, D}, [&] { return testing::logsigmoid(r.uniform()); }));
  write_npy(d / "initial_state.npy", testing::uniform(r, DType::f32, Shape{B, H, D, D}));
}

ProcessResult check(std::vector<std::string> args) {
  args.insert(args.begin(), {LINA_TEST_LINA_EXE, "check"});
  return run_process(args);
}

TEST(VerifyCheckCli, MissingInputNamesTheFileAndExitsTwo) {
  TempDir t("check");
  write_gla_inputs(t.path());
  fs::remove(t.path() / "g.npy");
  const auto r = check({"--op", "chunk_gla", "--inputs", t.path().string(), "--backend", "cpu"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("g.npy"), std::string::npos) << r.err;
}

TEST(VerifyCheckCli, MalformedInputNamesTheFileAndExitsTwo) {
  TempDir t("check");
  write_gla_inputs(t.path());
  std::ofstream(t.path() / "v.npy") << "garbage";
  const auto r = check({"--op", "chunk_gla", "--inputs", t.path().string(), "--backend", "cpu"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("v.npy"), std::string::npos) << r.err;
}

TEST(VerifyCheckCli, MisShapedInputIsRefusedNamingTheArgument) {
  TempDir t("check");
  write_gla_inputs(t.path());
  testing::Rng r(1);
  write_npy(t.path() / "k.npy", testing::uniform(r, DType::f32, Shape{1, 40, 2, 8}));
  const auto p = check({"--op", "chunk_gla", "--inputs", t.path().string(), "--backend", "cpu"});
  EXPECT_EQ(p.exit_code, 2) << p.out << p.err;
  EXPECT_NE(p.err.find("`k`"), std::string::npos) << p.err;
  EXPECT_NE(p.err.find("k.npy"), std::string::npos) << p.err;
}

TEST(VerifyCheckCli, BadKwargsAreRefused) {
  TempDir t("check");
  write_gla_inputs(t.path());
  std::ofstream(t.path() / "kwargs.json") << R"({"scael": 0.5})";
  const auto p = check({"--op", "chunk_gla", "--inputs", t.path().string(), "--backend", "cpu"});
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_NE(p.err.find("scael"), std::string::npos) << p.err;
}

TEST(VerifyCheckCli, KwargsOfTheWrongTypeAreRefusedByKey) {
  for (const char* body : {R"({"scale": "0.5"})", R"({"output_final_state": 1})", R"({"bf16": "yes"})", R"({"bf16": ["q", "qq"]})"}) {
    TempDir t("check");
    write_gla_inputs(t.path());
    std::ofstream(t.path() / "kwargs.json") << body;
    const auto p = check({"--op", "chunk_gla", "--inputs", t.path().string(), "--backend", "cpu"});
    EXPECT_EQ(p.exit_code, 2) << body << p.out << p.err;
    EXPECT_NE(p.err.find("kwargs.json"), std::string::npos) << body << p.err;
    EXPECT_NE(p.err.find("expected"), std::string::npos) << body << p.err;
  }
}

TEST(VerifyCheckCli, OutThatIsAFileIsRefusedBeforeRunning) {
  TempDir t("check");
  write_gla_inputs(t.path());
  std::ofstream(t.path() / "taken") << "x";
  const auto p = check({"--op", "chunk_gla", "--inputs", t.path().string(), "--backend", "cpu", "--out", (t.path() / "taken").string()});
  EXPECT_EQ(p.exit_code, 2) << p.out << p.err;
  EXPECT_NE(p.err.find("--out"), std::string::npos) << p.err;
  EXPECT_EQ(p.out.find("err_ratio"), std::string::npos) << "ran before refusing: " << p.out;
}

TEST(VerifyCheckCli, DhtWithoutDoIsRefused) {
  TempDir t("check");
  write_gla_inputs(t.path());
  write_npy(t.path() / "dht.npy", HostTensor(DType::f32, Shape{1, 2, 16, 16}));
  const auto p = check({"--op", "chunk_gla", "--inputs", t.path().string(), "--backend", "cpu"});
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_NE(p.err.find("dht"), std::string::npos) << p.err;
}

TEST(VerifyCheckCli, ForwardAndBackwardAgainstTheReferenceWritesOutputs) {
  TempDir t("check");
  write_gla_inputs(t.path());
  testing::Rng r(3);
  write_npy(t.path() / "do.npy", testing::normal(r, DType::f32, Shape{1, 40, 2, 16}));
  write_npy(t.path() / "dht.npy", testing::normal(r, DType::f32, Shape{1, 2, 16, 16}));
  std::ofstream(t.path() / "kwargs.json") << R"({"scale": 0.25})";
  const auto p = check({"--op", "chunk_gla", "--inputs", t.path().string(), "--backend", "cpu", "--out", (t.path() / "out").string()});
  EXPECT_EQ(p.exit_code, 0) << p.out << p.err;
  for (const char* n : {"o", "ht", "dq", "dk", "dv", "dg", "dh0"}) {
    EXPECT_NE(p.out.find(std::string(n) + " "), std::string::npos) << n << "\n" << p.out;
    const HostTensor x = read_npy(t.path() / "out" / (std::string(n) + ".npy"));
    EXPECT_GT(x.numel(), 0);
  }
  EXPECT_EQ(read_npy(t.path() / "out" / "o.npy").shape(), (Shape{1, 40, 2, 16}));
}

}  // namespace
}  // namespace lina::harness
