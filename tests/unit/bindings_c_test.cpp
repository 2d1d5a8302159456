// The C ABI (bindings/lina_c.h) that the Python wrapper and the FLA side-by-side benchmark call:
// every phase takes exactly the tensors it needs, and errors come back as codes with messages.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "bindings/lina_c.h"

namespace {

struct Buf {
  std::vector<float> data;
  lina_c_tensor t{};
  Buf(const char* name, std::vector<int64_t> shape, float fill) {
    int64_t n = 1;
    for (auto d : shape) n *= d;
    data.assign(static_cast<std::size_t>(n), fill);
    t.name = name;
    t.data = data.data();
    t.dtype = LINA_F32;
    t.device = LINA_CPU;
    t.rank = static_cast<int32_t>(shape.size());
    for (std::size_t i = 0; i < shape.size(); ++i) t.shape[i] = shape[i];
  }
};

int call(const char* phase, std::vector<Buf*> bufs, std::string& err) {
  std::vector<lina_c_tensor> ts;
  for (auto* b : bufs) ts.push_back(b->t);
  char e[512] = {0};
  const int rc = lina_c_call("chunk_gla", phase, ts.data(), static_cast<int>(ts.size()), R"({"backend": "cpu"})", nullptr, e,
                             sizeof e, nullptr, 0);
  err = e;
  return rc;
}

TEST(BindingsC, ForwardPhasesNeedNoGradientTensors) {
  const std::vector<int64_t> s{1, 5, 1, 8};
  Buf q("q", s, 0.1f), k("k", s, 0.2f), v("v", s, 0.3f), g("g", s, -0.1f), o("o", s, NAN), ref("o", s, NAN);
  std::string err;
  ASSERT_EQ(call("forward", {&q, &k, &v, &g, &o}, err), 0) << err;
  ASSERT_EQ(call("reference_forward", {&q, &k, &v, &g, &ref}, err), 0) << err;  // no dq/dk/dv/dg given
  for (std::size_t i = 0; i < o.data.size(); ++i) EXPECT_NEAR(o.data[i], ref.data[i], 1e-4f) << i;
  EXPECT_GT(std::fabs(o.data.back()), 0.f);
}

TEST(BindingsC, BackwardWithoutItsGradientsIsRefusedByName) {
  const std::vector<int64_t> s{1, 5, 1, 8};
  Buf q("q", s, 0.1f), k("k", s, 0.2f), v("v", s, 0.3f), g("g", s, -0.1f), d_o("do", s, 1.f);
  std::string err;
  EXPECT_EQ(call("backward", {&q, &k, &v, &g, &d_o}, err), 2);
  EXPECT_NE(err.find("dq"), std::string::npos) << err;
  EXPECT_EQ(call("sideways", {&q, &k, &v, &g, &d_o}, err), 2);
  EXPECT_NE(err.find("phase"), std::string::npos) << err;
}

}  // namespace
