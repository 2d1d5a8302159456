// chunk_gla forward on the CPU backend of an installed lina, checked against lina's fp64 reference.
// Exit 0: the outputs agree; 1: they do not; 2: lina refused the call (lina::Error).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>

#include <lina/lina.h>

namespace {

lina::HostTensor uniform(std::mt19937_64& gen, lina::Shape shape, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  lina::HostTensor t(lina::DType::f32, shape);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, dist(gen));
  return t;
}

// RMS(ref - out) / RMS(ref), the error ratio of FLA's assert_close; NaN when out has a NaN.
double error_ratio(const lina::HostTensor& ref, const lina::HostTensor& out) {
  double diff2 = 0, ref2 = 0;
  for (std::int64_t i = 0; i < ref.numel(); ++i) {
    const double d = ref.get(i) - out.get(i);
    diff2 += d * d;
    ref2 += ref.get(i) * ref.get(i);
  }
  return std::sqrt(diff2) / (std::sqrt(ref2) + 1e-8);
}

}  // namespace

int main() {
  // Two sequences, T = 70 (more than one 64-token chunk), f32 inputs: the chunked CPU path and the
  // naive recurrence differ by f32 rounding only.
  const std::int64_t B = 2, T = 70, H = 2, K = 16, V = 8;
  std::mt19937_64 gen(36);
  const lina::HostTensor q = uniform(gen, {B, T, H, K}, 0, 1), k = uniform(gen, {B, T, H, K}, 0, 1),
                         v = uniform(gen, {B, T, H, V}, 0, 1), g = uniform(gen, {B, T, H, K}, -0.2, 0),
                         h0 = uniform(gen, {B, H, K, V}, 0, 1);
  lina::ChunkGlaArgs args{q.view(), k.view(), v.view(), g.view()};
  args.initial_state = h0.view();

  // Outputs start as NaN so that an element left unwritten fails the comparison.
  lina::HostTensor o = lina::HostTensor::filled(lina::DType::f32, {B, T, H, V}, NAN);
  lina::HostTensor ht = lina::HostTensor::filled(lina::DType::f32, {B, H, K, V}, NAN);
  lina::HostTensor o_ref(lina::DType::f64, {B, T, H, V}), ht_ref(lina::DType::f64, {B, H, K, V});
  lina::ExecOptions cpu;
  cpu.backend = lina::Backend::cpu;
  try {
    const lina::RunInfo info = lina::chunk_gla_forward(args, {o.view(), ht.view()}, lina::ForwardMode::training, cpu);
    lina::reference::chunk_gla_forward(args, {o_ref.view(), ht_ref.view()});
    std::printf("lina_consumer: lina %s, chunk_gla_forward ran on backend '%s'\n", lina::kVersion, info.backend.c_str());
  } catch (const lina::Error& e) {
    std::fprintf(stderr, "lina_consumer: lina refused the call: %s\n", e.what());
    return 2;
  }

  const double tolerance = 1e-5;
  const double err_o = error_ratio(o_ref, o), err_ht = error_ratio(ht_ref, ht);
  std::printf("lina_consumer: error ratio o %.3g, final_state %.3g (tolerance %.0e)\n", err_o, err_ht, tolerance);
  // A NaN ratio fails both comparisons.
  if (!(err_o < tolerance) || !(err_ht < tolerance)) {
    std::fprintf(stderr, "lina_consumer: FAIL: chunk_gla_forward differs from lina::reference::chunk_gla_forward\n");
    return 1;
  }
  std::printf("lina_consumer: ok\n");
  return 0;
}
