// Shared gate machinery: FLA's test inputs for each op (docs/math.md section 6), running the op on a backend
// and the fp64 reference, and comparing outputs, final state and every gradient at FLA's tolerances.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "lina/lina.h"

namespace lina::gate {

struct GateCase {
  std::string op;    // "chunk_gla", "chunk_kda", "chunk_gdn"
  std::string name;  // shape tokens + flags, e.g. "B2_T256_H2_HV4_D64_gva"
  std::int64_t B = 1, T = 64, H = 1, HV = 0, D = 64;  // HV = 0: HV = H; K = V = D
  std::vector<std::int64_t> cu;                        // cu_seqlens; empty = dense
  DType dtype = DType::f16;
  double scale = 0;        // 0: default K^-0.5
  double norm = 1;         // gate = logsigmoid(...) / norm
  double mask_p = 0;       // gate zeroed where rand <= mask_p (GDN/KDA)
  double neg1000_p = 0;    // KDA varlen: each gate element set to -1000 with this probability
  bool l2 = false;         // use_qk_l2norm_in_kernel
  bool gate_in = false;    // use_gate_in_kernel (A_log, dt_bias)
  bool bias = true;        // dt_bias given with the in-kernel gate
  bool beta_sigmoid = false;  // use_beta_sigmoid_in_kernel (raw beta logits)
  bool safe = false;       // KDA safe_gate with lower_bound -5
  std::int64_t hv() const { return HV ? HV : H; }
  bool varlen() const { return !cu.empty(); }
};

struct Inputs {
  HostTensor q, k, v, g, beta, h0, cu, d_o, dht;
  std::optional<HostTensor> A_log, dt_bias;
};

// Seeded inputs following FLA's tests for the case's op and flags.
Inputs make_inputs(const GateCase& c, std::uint64_t seed = 42);

// Views of one set of tensors (host or device) in the op's argument structs (h0: initial_state).
struct Views {
  TensorView q, k, v, g, beta, h0, cu, d_o, dht;
  std::optional<TensorView> A_log, dt_bias;
};

template <class Args>
void fill_common(Args& a, const Views& v, const GateCase& c) {
  a.q = v.q;
  a.k = v.k;
  a.v = v.v;
  a.g = v.g;
  if (c.scale > 0) a.scale = c.scale;
  a.initial_state = v.h0;
  if (c.varlen()) a.cu_seqlens = v.cu;
}

template <class Args>
void fill_delta(Args& a, const Views& v, const GateCase& c) {
  fill_common(a, v, c);
  a.beta = v.beta;
  a.use_qk_l2norm_in_kernel = c.l2;
  a.use_beta_sigmoid_in_kernel = c.beta_sigmoid;
  a.use_gate_in_kernel = c.gate_in;
  a.A_log = v.A_log;
  a.dt_bias = v.dt_bias;
}

// Named result tensors: o, ht, and with backward dq, dk, dv, dg, dbeta, dh0, dA_log, ddt_bias.
using Results = std::map<std::string, HostTensor>;

Results run_reference(const GateCase& c, const Inputs& in, bool backward);
// The op through its public API on `backend` (cpu or cuda; cuda copies to and from the device).
// Outputs and gradients start as NaN so that a partial write fails the comparison.
Results run_backend(const GateCase& c, const Inputs& in, bool backward, Backend backend);

// EXPECTs every tensor of `ref` close to `out` at harness::tolerance(op, name, dense|varlen) and
// prints each err_ratio (also recorded as a test property).
void expect_close_all(const GateCase& c, const Results& ref, const Results& out);

// Registers <Prefix>/Fwd.<name>, <Prefix>/Bwd.<name> (CPU backend) and <Prefix>Cuda/Fwd.<name>,
// <Prefix>Cuda/Bwd.<name> (CUDA backend, skipped without a GPU; only head dims the CUDA backend
// instantiates). Call before RUN_ALL_TESTS.
void register_gate(const std::string& prefix, const std::vector<GateCase>& cases);

}  // namespace lina::gate
