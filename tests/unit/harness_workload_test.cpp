#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "harness/engine/workload.h"
#include "lina/error.h"

namespace lina::harness {
namespace {

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    return e.what();
  }
  return "(no error)";
}

TEST(HarnessWorkload, ParsesDenseNames) {
  const Workload w = parse_shape_name("B2_T1024_H4_D64", 0);
  EXPECT_EQ(w.name, "B2_T1024_H4_D64");
  EXPECT_EQ(w.keys.B, 2);
  EXPECT_EQ(w.keys.T, 1024);
  EXPECT_EQ(w.keys.H, 4);
  EXPECT_EQ(w.keys.HV, 4);
  EXPECT_EQ(w.keys.K, 64);
  EXPECT_EQ(w.keys.V, 64);
  EXPECT_FALSE(w.is_varlen());
  EXPECT_TRUE(w.cu_seqlens.empty());
  const Workload g = parse_shape_name("B1_T256_H2_D128_HV8", 0);
  EXPECT_EQ(g.keys.HV, 8);
  EXPECT_EQ(g.name, "B1_T256_H2_D128_HV8");
  // HV equal to H is the plain name.
  EXPECT_EQ(parse_shape_name("B1_T8_H2_D64_HV2", 0).name, "B1_T8_H2_D64");
}

TEST(HarnessWorkload, ShapeNameErrorsNameTheFlagAndThePart) {
  EXPECT_NE(error_of([] { parse_shape_name("B1_T2_H3", 0); }).find("--shapes"), std::string::npos);
  EXPECT_NE(error_of([] { parse_shape_name("B0_T2_H3_D64", 0); }).find("B in 'B0_T2_H3_D64'"), std::string::npos);
  EXPECT_NE(error_of([] { parse_shape_name("B1_Tx_H3_D64", 0); }).find("T in"), std::string::npos);
  EXPECT_NE(error_of([] { parse_shape_name("varlen_zipf_T100_H2_D64", 0); }).find("zipf"), std::string::npos);
  EXPECT_NE(error_of([] { parse_shape_name("bogus", 0, "--custom-shapes"); }).find("--custom-shapes"), std::string::npos);
  // Sizes whose element count overflows (or cannot be allocated) are refused by name, not crashed on.
  EXPECT_NE(error_of([] { parse_shape_name("B1_T4611686018427387904_H1_D64", 0); }).find("2^33"), std::string::npos);
  EXPECT_NE(error_of([] { parse_shape_name("B4294967296_T4294967296_H1_D64", 0); }).find("--shapes"), std::string::npos);
  EXPECT_NE(error_of([] { parse_custom_shapes(R"([{"B": 65536, "T": 65536, "H": 4, "D": 128}])", 0); }).find("2^33"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_custom_shapes("[" + std::string(50000, '[') + std::string(50001, ']'), 0); }).find("nested deeper than 64 levels"),
            std::string::npos);
}

TEST(HarnessWorkload, ShapeSets) {
  const auto def = shape_set("default");
  ASSERT_TRUE(def.has_value());
  const std::vector<std::string> fla{"B1_T8192_H96_D128", "B2_T16384_H16_D128", "B4_T2048_H16_D128",
                                     "B4_T4096_H64_D128", "B8_T2048_H32_D256", "B8_T1024_H8_D64"};
  EXPECT_EQ(*def, fla);
  EXPECT_FALSE(shape_set("nope").has_value());
  for (const auto& s : shape_set_names()) EXPECT_TRUE(shape_set(s).has_value()) << s;
  const auto ws = resolve_shapes({"cpu", "B1_T64_H1_D64"}, 3);
  ASSERT_EQ(ws.size(), shape_set("cpu")->size() + 1);
  EXPECT_EQ(ws.back().name, "B1_T64_H1_D64");
  const auto vl = resolve_shapes({"varlen-cpu"}, 3);
  for (const auto& w : vl) EXPECT_TRUE(w.is_varlen()) << w.name;
}

TEST(HarnessWorkload, CustomShapes) {
  const auto ws = parse_custom_shapes(R"([{"B":2,"T":128,"H":4,"D":64}, "B1_T64_H2_D128", {"B":1,"T":32,"H":2,"HV":4,"D":64}])", 0);
  ASSERT_EQ(ws.size(), 3u);
  EXPECT_EQ(ws[0].name, "B2_T128_H4_D64");
  EXPECT_EQ(ws[1].keys.K, 128);
  EXPECT_EQ(ws[2].keys.HV, 4);
  const auto kv = parse_custom_shapes(R"([{"B":1,"T":32,"H":2,"K":64,"V":128}])", 0);
  EXPECT_EQ(kv[0].keys.K, 64);
  EXPECT_EQ(kv[0].keys.V, 128);
  EXPECT_EQ(kv[0].name, "B1_T32_H2_K64_V128");
}

TEST(HarnessWorkload, CustomShapeErrorsNameTheProblem) {
  EXPECT_NE(error_of([] { parse_custom_shapes("[{", 0); }).find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of([] { parse_custom_shapes("{}", 0); }).find("non-empty JSON list"), std::string::npos);
  EXPECT_NE(error_of([] { parse_custom_shapes(R"([{"B":1,"T":8,"H":1}])", 0); }).find("without key 'D'"), std::string::npos);
  EXPECT_NE(error_of([] { parse_custom_shapes(R"([{"B":1,"T":8,"H":1,"D":-4}])", 0); }).find("key 'D' = -4"), std::string::npos);
  EXPECT_NE(error_of([] { parse_custom_shapes(R"([{"B":1,"T":8,"H":1,"D":4,"X":1}])", 0); }).find("key 'X'"), std::string::npos);
  EXPECT_NE(error_of([] { parse_custom_shapes("[3]", 0); }).find("item 0"), std::string::npos);
  EXPECT_NE(error_of([] { parse_custom_shapes("[{", 0); }).find("--custom-shapes"), std::string::npos);
}

void expect_valid_cu(const std::vector<std::int64_t>& cu, std::int64_t total) {
  ASSERT_GE(cu.size(), 2u);
  EXPECT_EQ(cu.front(), 0);
  EXPECT_EQ(cu.back(), total);
  for (std::size_t i = 1; i < cu.size(); ++i) EXPECT_LE(cu[i - 1], cu[i]);
}

TEST(HarnessWorkload, VarlenGeneratorsPackExactBudgets) {
  for (const auto& dist : varlen_distributions())
    for (std::int64_t total : {1, 17, 256, 1000, 32768, 100001})
      for (std::uint64_t seed : {0u, 1u, 99u}) {
        SCOPED_TRACE(dist + " T=" + std::to_string(total) + " seed=" + std::to_string(seed));
        expect_valid_cu(make_cu_seqlens(dist, total, seed), total);
      }
  EXPECT_EQ(make_cu_seqlens("single", 5000, 1), (std::vector<std::int64_t>{0, 5000}));
  EXPECT_EQ(make_cu_seqlens("uniform", 4096, 1, 8).size(), 9u);
}

TEST(HarnessWorkload, LongtailHasManyShortAndAFewLong) {
  const auto cu = make_cu_seqlens("longtail", 32768, 5);
  std::int64_t shorts = 0, longs = 0;
  for (std::size_t i = 1; i < cu.size(); ++i) (cu[i] - cu[i - 1] <= 512 ? shorts : longs) += 1;
  EXPECT_GE(longs, 1);
  EXPECT_GT(shorts, 4 * longs);
}

TEST(HarnessWorkload, VarlenIsSeeded) {
  EXPECT_EQ(make_cu_seqlens("longtail", 32768, 5), make_cu_seqlens("longtail", 32768, 5));
  EXPECT_NE(make_cu_seqlens("longtail", 32768, 5), make_cu_seqlens("longtail", 32768, 6));
  EXPECT_NE(make_cu_seqlens("uniform", 32768, 5), make_cu_seqlens("uniform", 32768, 6));
}

TEST(HarnessWorkload, VarlenFlag) {
  const auto w = parse_varlen("longtail:T=32768", 1).at(0);
  EXPECT_EQ(w.name, "varlen_longtail_T32768_H16_D128");
  EXPECT_EQ(w.keys.B, 1);
  EXPECT_EQ(w.keys.T, 32768);
  EXPECT_EQ(*w.keys.varlen, "longtail");
  EXPECT_EQ(w.keys.num_seqs, static_cast<std::int64_t>(w.cu_seqlens.size()) - 1);
  const auto u = parse_varlen("uniform:T=1024,H=2,D=64,HV=4,N=4", 1).at(0);
  EXPECT_EQ(u.name, "varlen_uniform_T1024_H2_D64_HV4");
  EXPECT_EQ(u.keys.num_seqs, 4);
  // The name parses back to the same workload (same seed -> same cu_seqlens).
  EXPECT_EQ(parse_shape_name(w.name, 1).cu_seqlens, w.cu_seqlens);
  EXPECT_NE(error_of([] { parse_varlen("zipf:T=10", 0); }).find("--varlen"), std::string::npos);
  EXPECT_NE(error_of([] { parse_varlen("uniform", 0); }).find("without T"), std::string::npos);
  EXPECT_NE(error_of([] { parse_varlen("uniform:T=10,Q=3", 0); }).find("Q=3"), std::string::npos);
}

TEST(HarnessWorkload, TensorsAreSeededAndBitIdentical) {
  const Shape s{2, 16, 3, 8};
  const HostTensor a = generate_tensor("q", DType::bf16, s, Transform::randn, 42);
  const HostTensor b = generate_tensor("q", DType::bf16, s, Transform::randn, 42);
  const HostTensor c = generate_tensor("q", DType::bf16, s, Transform::randn, 43);
  const HostTensor d = generate_tensor("k", DType::bf16, s, Transform::randn, 42);
  ASSERT_EQ(a.nbytes(), b.nbytes());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0);
  EXPECT_NE(std::memcmp(a.data(), c.data(), a.nbytes()), 0);
  EXPECT_NE(std::memcmp(a.data(), d.data(), a.nbytes()), 0);
  // Roughly standard normal.
  double sum = 0, sq = 0;
  const auto v = generate_tensor("x", DType::f32, Shape{20000}, Transform::randn, 1).to_f64();
  for (double x : v) sum += x, sq += x * x;
  EXPECT_NEAR(sum / 20000, 0, 0.05);
  EXPECT_NEAR(sq / 20000, 1, 0.05);
}

TEST(HarnessWorkload, ThreadedFillMatchesElementwiseDraws) {
  // 2^21 elements: large enough to be filled by several threads.
  const std::int64_t n = std::int64_t{1} << 21;
  const HostTensor t = generate_tensor("v", DType::f32, Shape{n}, Transform::randn, 9);
  const CounterRng rng(9, stream_of("v"));
  for (std::int64_t i : {std::int64_t{0}, std::int64_t{12345}, n / 2 + 7, n - 1})
    EXPECT_EQ(t.get(i), static_cast<double>(static_cast<float>(rng.normal_at(static_cast<std::uint64_t>(i))))) << i;
}

TEST(HarnessWorkload, TransformsFollowFla) {
  const Shape s{4096};
  for (double x : generate_tensor("g", DType::f32, s, Transform::logsigmoid_clamp5, 1).to_f64()) {
    EXPECT_LE(x, 0);
    EXPECT_GE(x, -5);
  }
  for (double x : generate_tensor("beta", DType::f32, s, Transform::sigmoid, 1).to_f64()) {
    EXPECT_GT(x, 0);
    EXPECT_LT(x, 1);
  }
  const auto g = generate_tensor("g", DType::f32, s, Transform::logsigmoid, 1).to_f64();
  EXPECT_LT(*std::min_element(g.begin(), g.end()), -2);
  for (double x : g) EXPECT_LE(x, 0);
  // bf16 storage: every value is exactly representable in bf16.
  for (double x : generate_tensor("q", DType::bf16, s, Transform::randn, 1).to_f64())
    EXPECT_EQ(static_cast<float>(x), bf16_bits_to_float(float_to_bf16_bits(static_cast<float>(x))));
}

}  // namespace
}  // namespace lina::harness
