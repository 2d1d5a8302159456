// Correctness check of the CUDA fused_recurrent_{gla,kda,gdn} forward (decode) through the public API
// (ctest, label gpu) against the fp64 host reference lina::reference::fused_recurrent_*_forward on the
// same rounded inputs, FLA's metric RMS(ref - out) / RMS(ref) at the chunk ops' o / ht tolerances
// (harness/verify/tolerances.cpp). o is poisoned with NaN, so a row the kernel skips fails; pool slots
// that no sequence writes must come back bit for bit. Also: the launch captured in a CUDA graph replays
// to the eager call's bits, and unsupported head dims are refused by name.
//   lina_cuda_recurrent_check [--match TEXT]   only the cases whose name contains TEXT (sanitizer runs)
// Exit code: 0 all checks passed, 1 a check failed, 2 a bad argument, 3 a CUDA error, 77 no CUDA device.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "harness/verify/accuracy.h"
#include "harness/verify/tolerances.h"
#include "lina/error.h"
#include "lina/fused_recurrent.h"
#include "tests/cuda/device_check_support.cuh"
#include "tests/support/random.h"

using namespace lina;

#define CK(x) lina_test::ck((x), #x)

namespace {

using lina_test::DevBuf;

enum class Op { gla, kda, gdn };
enum class Gate { given, softplus, lower_bound };
// dense_*: initial_state [N,...] (none / given / updated in place with inplace_final_state); pool: [S,...]
// with state_indices, written back in place; per_token: read from the pool, final_state [R,...] after every token.
enum class StateKind { dense_none, dense_h0, dense_inplace, pool, per_token };

// The state is written into initial_state (inplace_final_state), not into final_state.
bool in_place(StateKind s) { return s == StateKind::pool || s == StateKind::dense_inplace; }

struct Case {
  const char* name;
  Op op;
  int B, T, H, HV, K, V;
  std::vector<int> cu = {};  // varlen offsets (then B = 1, T = cu.back())
  DType dt = DType::bf16;    // q, k, v (and o)
  DType gbt = DType::bf16;   // g and beta (q's dtype or f32)
  Gate gate = Gate::given;
  bool with_A_log = true;    // lower_bound: A_log is optional
  bool l2norm = true, beta_sigmoid = false, neg_eigval = false, reverse = false;
  StateKind state = StateKind::dense_h0;
  int S = 0;                       // pool slots
  int L = 0;                       // indices per sequence: 0 = [N]
  std::vector<long> indices = {};  // [N] or [N,L]; negative = padding, >= S = out of range (padding on the device)
  std::vector<int> accepted = {};  // num_accepted_tokens [N], with L > 0
  DType idx_dt = DType::i32;       // state_indices and cu_seqlens
};

const char* op_name(Op op) { return op == Op::gla ? "chunk_gla" : op == Op::kda ? "chunk_kda" : "chunk_gdn"; }

DevBuf* upload(const HostTensor& h) {
  auto* b = new DevBuf(h.nbytes());
  if (h.nbytes()) CK(cudaMemcpy(b->p, h.data(), h.nbytes(), cudaMemcpyHostToDevice));
  return b;
}

TensorView dev_view(const DevBuf& b, DType dt, Shape s) { return TensorView::contiguous(b.p, dt, s, Device::cuda, 0); }

HostTensor index_tensor(const std::vector<long>& v, DType dt, Shape s) {
  HostTensor t(dt, s);
  for (std::size_t i = 0; i < v.size(); ++i) t.set(static_cast<std::int64_t>(i), static_cast<double>(v[i]));
  return t;
}

// The tensors of one call on one side (host for the reference, device for the kernel).
struct Inputs {
  TensorView q, k, v, g, beta;
  std::optional<TensorView> A_log, dt_bias, h0, cu, indices, accepted;
};

template <class Args>
void fill_common(Args& a, const Case& c, const Inputs& in) {
  a.q = in.q;
  a.k = in.k;
  a.v = in.v;
  a.g = in.g;
  a.scale = 1.0 / std::sqrt(static_cast<double>(c.K));
  a.initial_state = in.h0;
  a.cu_seqlens = in.cu;
  a.decode.state_indices = in.indices;
  a.decode.num_accepted_tokens = in.accepted;
  a.decode.inplace_final_state = in_place(c.state);
}

template <class Args>
void fill_delta(Args& a, const Case& c, const Inputs& in) {
  fill_common(a, c, in);
  a.beta = in.beta;
  a.use_qk_l2norm_in_kernel = c.l2norm;
  a.use_beta_sigmoid_in_kernel = c.beta_sigmoid;
  a.allow_neg_eigval = c.neg_eigval;
  a.use_gate_in_kernel = c.gate != Gate::given;
  a.A_log = in.A_log;
  a.dt_bias = in.dt_bias;
}

// One call: the reference (host tensors) or the CUDA backend (device tensors, on `stream`).
RunInfo call(const Case& c, const Inputs& in, const AttentionOutputs& out, bool reference, void* stream = nullptr) {
  ExecOptions opts;
  opts.backend = Backend::cuda;
  opts.stream = stream;
  if (c.op == Op::gla) {
    FusedRecurrentGlaArgs a;
    fill_common(a, c, in);
    a.reverse = c.reverse;
    if (reference) return reference::fused_recurrent_gla_forward(a, out), RunInfo{"reference", {}};
    return fused_recurrent_gla_forward(a, out, opts);
  }
  if (c.op == Op::kda) {
    FusedRecurrentKdaArgs a;
    fill_delta(a, c, in);
    if (c.gate == Gate::lower_bound) a.lower_bound = -5.0;
    if (reference) return reference::fused_recurrent_kda_forward(a, out), RunInfo{"reference", {}};
    return fused_recurrent_kda_forward(a, out, opts);
  }
  FusedRecurrentGdnArgs a;
  fill_delta(a, c, in);
  if (reference) return reference::fused_recurrent_gdn_forward(a, out), RunInfo{"reference", {}};
  return fused_recurrent_gdn_forward(a, out, opts);
}

// Host inputs and their device copies for one case.
struct Problem {
  int N = 0, R = 0;
  bool varlen = false, has_beta = false, has_alog = false, has_dt = false, has_h0 = false, pooled = false, has_acc = false;
  Shape o_shape, state_shape, out_state_shape;
  HostTensor q, k, v, g, beta, A_log, dt_bias, h0, cu, indices, ref_indices, accepted;
  std::unique_ptr<DevBuf> dq, dk, dv, dg, dbeta, dalog, ddt, dcu, didx, dacc;

  Problem(const Case& c, std::uint64_t seed) {
    testing::Rng rng(seed);
    varlen = !c.cu.empty();
    N = varlen ? static_cast<int>(c.cu.size()) - 1 : c.B;
    R = c.B * c.T;
    has_beta = c.op != Op::gla;
    q = testing::normal(rng, c.dt, {c.B, c.T, c.H, c.K});
    k = testing::normal(rng, c.dt, {c.B, c.T, c.H, c.K});
    v = testing::normal(rng, c.dt, {c.B, c.T, c.HV, c.V});
    const Shape gshape = c.op == Op::gdn ? Shape{c.B, c.T, c.HV} : Shape{c.B, c.T, c.HV, c.K};
    g = testing::make(c.gbt, gshape, [&] {
      const double x = rng.normal();
      return c.gate == Gate::given ? testing::logsigmoid(x) : x;
    });
    if (has_beta) {
      beta = testing::make(c.gbt, {c.B, c.T, c.HV}, [&] {
        const double x = rng.normal();
        return c.beta_sigmoid ? x : testing::sigmoid(x);
      });
      has_alog = c.gate == Gate::softplus || (c.gate == Gate::lower_bound && c.with_A_log);
      has_dt = c.gate != Gate::given;
      if (has_alog)
        A_log = testing::make(DType::f32, {c.HV}, [&] {
          return c.gate == Gate::softplus ? std::log(1.0 + 15.0 * rng.uniform()) : 0.3 * rng.normal();
        });
      if (has_dt)
        dt_bias = testing::normal(rng, DType::f32, c.op == Op::kda ? Shape{c.HV * c.K} : Shape{c.HV});
    }
    pooled = c.state == StateKind::pool || c.state == StateKind::per_token;
    has_h0 = c.state != StateKind::dense_none;
    state_shape = pooled ? Shape{c.S, c.HV, c.K, c.V} : Shape{N, c.HV, c.K, c.V};
    out_state_shape = c.state == StateKind::per_token ? Shape{R, c.HV, c.K, c.V} : state_shape;
    if (has_h0) h0 = testing::normal(rng, DType::f32, state_shape);
    o_shape = Shape{c.B, c.T, c.HV, c.V};
    if (varlen) {
      cu = HostTensor(c.idx_dt, {static_cast<std::int64_t>(c.cu.size())});
      for (std::size_t i = 0; i < c.cu.size(); ++i) cu.set(static_cast<std::int64_t>(i), c.cu[i]);
    }
    if (pooled) {
      const Shape is = c.L ? Shape{N, c.L} : Shape{N};
      indices = index_tensor(c.indices, c.idx_dt, is);
      std::vector<long> host_idx = c.indices;  // the reference refuses a slot >= S: it is padding on the device
      for (long& x : host_idx)
        if (x >= c.S) x = -1;
      ref_indices = index_tensor(host_idx, c.idx_dt, is);
      has_acc = !c.accepted.empty();
      if (has_acc) {
        accepted = HostTensor(DType::i32, {N});
        for (int n = 0; n < N; ++n) accepted.set(n, c.accepted[static_cast<std::size_t>(n)]);
      }
    }
    dq.reset(upload(q));
    dk.reset(upload(k));
    dv.reset(upload(v));
    dg.reset(upload(g));
    if (has_beta) dbeta.reset(upload(beta));
    if (has_alog) dalog.reset(upload(A_log));
    if (has_dt) ddt.reset(upload(dt_bias));
    if (varlen) dcu.reset(upload(cu));
    if (pooled) didx.reset(upload(indices));
    if (has_acc) dacc.reset(upload(accepted));
  }

  Inputs host_inputs(HostTensor& pool_copy) const {
    Inputs in{q.view(), k.view(), v.view(), g.view(), beta.view(), {}, {}, {}, {}, {}, {}};
    if (has_alog) in.A_log = A_log.view();
    if (has_dt) in.dt_bias = dt_bias.view();
    if (has_h0) in.h0 = pool_copy.view();
    if (varlen) in.cu = cu.view();
    if (pooled) in.indices = ref_indices.view();
    if (has_acc) in.accepted = accepted.view();
    return in;
  }

  Inputs device_inputs(const Case& c, const DevBuf* state) const {
    Inputs in{dev_view(*dq, c.dt, q.shape()), dev_view(*dk, c.dt, k.shape()), dev_view(*dv, c.dt, v.shape()),
              dev_view(*dg, c.gbt, g.shape()), {}, {}, {}, {}, {}, {}, {}};
    if (dbeta) in.beta = dev_view(*dbeta, c.gbt, beta.shape());
    if (dalog) in.A_log = dev_view(*dalog, DType::f32, A_log.shape());
    if (ddt) in.dt_bias = dev_view(*ddt, DType::f32, dt_bias.shape());
    if (state) in.h0 = dev_view(*state, DType::f32, state_shape);
    if (dcu) in.cu = dev_view(*dcu, c.idx_dt, cu.shape());
    if (didx) in.indices = dev_view(*didx, c.idx_dt, indices.shape());
    if (dacc) in.accepted = dev_view(*dacc, DType::i32, accepted.shape());
    return in;
  }

  // Token count of sequence n.
  int length(const Case& c, int n) const { return varlen ? c.cu[n + 1] - c.cu[n] : c.T; }
};

// Pool slots some sequence writes (pool mode): no other slot may change.
std::set<long> written_slots(const Case& c, const Problem& pb) {
  std::set<long> w;
  for (int n = 0; n < pb.N; ++n) {
    const int len = pb.length(c, n);
    const std::size_t row = static_cast<std::size_t>(n) * (c.L ? c.L : 1);
    const long read = c.indices[row + (c.accepted.empty() ? 0 : c.accepted[static_cast<std::size_t>(n)] - 1)];
    if (read < 0 || read >= c.S) continue;  // padding: no write
    if (c.L == 0) {
      if (len > 0) w.insert(read);
    } else {
      for (int t = 0; t < len && t < c.L; ++t) w.insert(c.indices[row + t]);
    }
  }
  return w;
}

int run_case(const Case& c, std::uint64_t seed) {
  const Problem pb(c, seed);
  // ---- fp64 reference
  HostTensor pool_ref = pb.h0;  // the reference's initial state (updated in place in the in-place modes)
  HostTensor o_ref(DType::f64, pb.o_shape);
  std::optional<TensorView> ref_state_out;
  HostTensor ref_final;
  if (!in_place(c.state)) {
    ref_final = HostTensor(DType::f64, pb.out_state_shape);  // zero: per-token rows of padding stay zero
    ref_state_out = ref_final.view();
  }
  try {
    call(c, pb.host_inputs(pool_ref), AttentionOutputs{o_ref.view(), ref_state_out}, true);
  } catch (const Error& e) {
    std::printf("%-52s REFERENCE ERROR %s\n", c.name, e.what());
    return 1;
  }

  // ---- CUDA
  std::unique_ptr<DevBuf> dstate;  // initial state / pool (written in the in-place modes)
  if (pb.has_h0) dstate.reset(upload(pb.h0));
  DevBuf dout(static_cast<std::size_t>(pb.o_shape.numel()) * dtype_size(c.dt));
  CK(cudaMemset(dout.p, 0xff, dout.n));  // NaN poison
  std::unique_ptr<DevBuf> dfinal;
  std::optional<TensorView> dev_state_out;
  if (!in_place(c.state)) {
    dfinal = std::make_unique<DevBuf>(static_cast<std::size_t>(pb.out_state_shape.numel()) * 4);
    CK(cudaMemset(dfinal->p, c.state == StateKind::per_token ? 0 : 0xff, dfinal->n));
    dev_state_out = dev_view(*dfinal, DType::f32, pb.out_state_shape);
  }
  RunInfo info;
  try {
    info = call(c, pb.device_inputs(c, dstate.get()), AttentionOutputs{dev_view(dout, c.dt, pb.o_shape), dev_state_out},
                false);
    CK(cudaDeviceSynchronize());
  } catch (const Error& e) {
    std::printf("%-52s ERROR %s\n", c.name, e.what());
    return 1;
  }
  HostTensor o_h(c.dt, pb.o_shape);
  CK(cudaMemcpy(o_h.data(), dout.p, o_h.nbytes(), cudaMemcpyDeviceToHost));
  const harness::ToleranceSet set = pb.varlen ? harness::ToleranceSet::varlen : harness::ToleranceSet::dense;
  const auto co = harness::assert_close(o_ref.to_f64(), o_h.to_f64(), harness::tolerance(op_name(c.op), "o", set));
  bool pass = co.pass;
  std::string state_line = "no state out";
  {
    const DevBuf* src = in_place(c.state) ? dstate.get() : dfinal.get();
    HostTensor s_h(DType::f32, in_place(c.state) ? pb.state_shape : pb.out_state_shape);
    CK(cudaMemcpy(s_h.data(), src->p, s_h.nbytes(), cudaMemcpyDeviceToHost));
    const HostTensor& want = in_place(c.state) ? pool_ref : ref_final;
    const auto cs = harness::assert_close(want.to_f64(), s_h.to_f64(), harness::tolerance(op_name(c.op), "ht", set));
    pass = pass && cs.pass;
    char buf[160];
    std::snprintf(buf, sizeof buf, "state: err %.2e max %.2e nan %d", cs.err_ratio, cs.max_abs, cs.has_nan);
    state_line = buf;
    if (c.state == StateKind::pool) {  // untouched slots: bit for bit
      const std::set<long> w = written_slots(c, pb);
      const std::size_t slot_bytes = static_cast<std::size_t>(c.HV) * c.K * c.V * 4;
      for (long s = 0; s < c.S; ++s) {
        if (w.count(s)) continue;
        const auto* a = static_cast<const unsigned char*>(s_h.data()) + s * slot_bytes;
        const auto* b = static_cast<const unsigned char*>(pb.h0.data()) + s * slot_bytes;
        if (std::memcmp(a, b, slot_bytes) != 0) {
          std::printf("  slot %ld changed although no sequence writes it\n", s);
          pass = false;
        }
      }
    }
  }
  std::printf("%-52s o: err %.2e max %.2e nan %d | %s  %s  [%s]\n", c.name, co.err_ratio, co.max_abs, co.has_nan,
              state_line.c_str(), pass ? "PASS" : "FAIL", info.kernels.empty() ? "" : info.kernels[0].c_str());
  return pass ? 0 : 1;
}

// The call captured in a CUDA graph replays to the eager call's bits (the pool restored before each run):
// nothing in it synchronises with the host, allocates or uploads.
int run_graph_check(const Case& c, std::uint64_t seed) {
  const Problem pb(c, seed);
  cudaStream_t st;
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  std::unique_ptr<DevBuf> dstate(upload(pb.h0));
  DevBuf dout(static_cast<std::size_t>(pb.o_shape.numel()) * dtype_size(c.dt));
  const AttentionOutputs out{dev_view(dout, c.dt, pb.o_shape), std::nullopt};
  const Inputs in = pb.device_inputs(c, dstate.get());
  auto snapshot = [&] {
    std::vector<unsigned char> h(dout.n + pb.h0.nbytes());
    CK(cudaMemcpy(h.data(), dout.p, dout.n, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h.data() + dout.n, dstate->p, pb.h0.nbytes(), cudaMemcpyDeviceToHost));
    return h;
  };
  auto reset = [&] {
    CK(cudaMemcpy(dstate->p, pb.h0.data(), pb.h0.nbytes(), cudaMemcpyHostToDevice));
    CK(cudaMemset(dout.p, 0xff, dout.n));
  };
  reset();
  try {
    call(c, in, out, false, st);
  } catch (const Error& e) {
    std::printf("%-52s ERROR %s\n", c.name, e.what());
    return 1;
  }
  CK(cudaStreamSynchronize(st));
  const auto eager = snapshot();
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  try {
    call(c, in, out, false, st);
  } catch (const Error& e) {
    cudaStreamEndCapture(st, &graph);
    std::printf("%-52s ERROR during capture: %s\n", c.name, e.what());
    return 1;
  }
  CK(cudaStreamEndCapture(st, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  bool pass = true;
  for (int replay = 0; replay < 2; ++replay) {
    reset();
    CK(cudaGraphLaunch(exec, st));
    CK(cudaStreamSynchronize(st));
    if (snapshot() != eager) pass = false;
  }
  CK(cudaGraphExecDestroy(exec));
  CK(cudaGraphDestroy(graph));
  CK(cudaStreamDestroy(st));
  std::printf("%-52s graph replays %s the eager call  %s\n", c.name, pass ? "match" : "DIFFER from", pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}

// K or V outside {64, 128, 256}: refused as unsupported, naming q (K) or v (V).
int run_refusal_check(const Case& c, const char* want_arg, std::uint64_t seed) {
  const Problem pb(c, seed);
  std::unique_ptr<DevBuf> dstate(upload(pb.h0));
  DevBuf dout(static_cast<std::size_t>(pb.o_shape.numel()) * dtype_size(c.dt));
  std::string seen = "no error";
  bool pass = false;
  try {
    call(c, pb.device_inputs(c, dstate.get()), AttentionOutputs{dev_view(dout, c.dt, pb.o_shape), std::nullopt}, false);
  } catch (const Error& e) {
    seen = e.what();
    pass = e.code() == ErrorCode::unsupported && e.argument() == want_arg;
  }
  std::printf("%-52s refused naming `%s`: %s  %s\n", c.name, want_arg, seen.c_str(), pass ? "PASS" : "FAIL");
  return pass ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const char* match = nullptr;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--match") && i + 1 < argc) {
      match = argv[++i];
    } else {
      std::printf("lina_cuda_recurrent_check: unknown argument `%s`, expected --match TEXT\n", argv[i]);
      return 2;
    }
  }
  lina_test::require_device_or_skip();
  using SK = StateKind;
  const DType f32 = DType::f32, f16 = DType::f16, bf16 = DType::bf16, i64 = DType::i64;
  // Fields after the shape: cu, dt, gbt, gate, with_A_log, l2norm, beta_sigmoid, neg_eigval, reverse, state, S, L, indices, accepted, idx_dt
  const std::vector<Case> cases = {
      // GLA: head dims, reverse, varlen with an empty sequence, f32 inputs, in-place dense state
      {"gla T1 B3 H2 K64 V64", Op::gla, 3, 1, 2, 2, 64, 64},
      {"gla T4 B2 H4 K128 V128 reverse", Op::gla, 2, 4, 4, 4, 128, 128, {}, bf16, bf16, Gate::given, true, false, false, false, true},
      {"gla T4 varlen empty seq K256 V128 f32", Op::gla, 1, 7, 2, 2, 256, 128, {0, 3, 3, 7}, f32, f32, Gate::given, true, false},
      {"gla T4 varlen K64 V256 reverse in-place", Op::gla, 1, 6, 1, 1, 64, 256, {0, 2, 6}, bf16, bf16, Gate::given, true, false, false, false, true, SK::dense_inplace},
      {"gla T1 B40 H4 K128 V128 no h0 (BV32)", Op::gla, 40, 1, 4, 4, 128, 128, {}, bf16, bf16, Gate::given, true, false, false, false, false, SK::dense_none},
      // KDA: gate forms, GVA, pools with padding (-1 and a slot >= S), per-token states, f16, f32
      {"kda T1 B4 H2 HV4 K128 V128 softplus pool1d pad", Op::kda, 4, 1, 2, 4, 128, 128, {}, bf16, bf16, Gate::softplus, true, true, true, false, false, SK::pool, 7, 0, {5, -1, 0, 9}},
      {"kda T4 B3 H1 HV2 K64 V256 lower-bound per-token", Op::kda, 3, 4, 1, 2, 64, 256, {}, bf16, f32, Gate::lower_bound, true, true, true, false, false, SK::per_token, 4, 0, {2, 0, -1}},
      {"kda T4 B2 H2 HV2 K256 V64 in-place", Op::kda, 2, 4, 2, 2, 256, 64, {}, bf16, bf16, Gate::given, true, true, false, false, false, SK::dense_inplace},
      {"kda T4 varlen empty seq K128 V64 lb no A_log f16", Op::kda, 1, 5, 2, 4, 128, 64, {0, 0, 1, 5}, f16, f16, Gate::lower_bound, false, true, true},
      {"kda T1 B20 H4 HV4 K256 V128 f32 (BV16)", Op::kda, 20, 1, 4, 4, 256, 128, {}, f32, f32, Gate::softplus, true, true, true},
      {"kda T4 B2 H2 HV2 K128 V128 2d idx accepted i64", Op::kda, 2, 4, 2, 2, 128, 128, {}, bf16, bf16, Gate::softplus, true, true, true, false, false, SK::pool, 12, 4, {8, 9, 10, 11, 4, 5, -1, 6}, {3, 1}, i64},
      // GDN: scalar gate, neg eigenvalues, [N,L] indices with num_accepted_tokens, padding in the write slots
      {"gdn T4 B3 H2 HV4 K128 V128 2d idx accepted pad", Op::gdn, 3, 4, 2, 4, 128, 128, {}, bf16, bf16, Gate::softplus, true, true, true, true, false, SK::pool, 14, 4, {0, 1, 2, 3, 4, 5, -1, 7, -1, 9, 10, 11}, {2, 4, 1}},
      {"gdn T4 B2 H1 HV2 K64 V64 2d idx accepted per-token", Op::gdn, 2, 4, 1, 2, 64, 64, {}, bf16, f32, Gate::given, true, true, false, false, false, SK::per_token, 9, 4, {0, 1, 2, 3, 4, 5, 6, 7}, {4, 2}},
      {"gdn T1 B1 H2 HV2 K64 V64 f16 no h0", Op::gdn, 1, 1, 2, 2, 64, 64, {}, f16, f16, Gate::given, true, false, false, false, false, SK::dense_none},
      {"gdn T4 varlen empty seq K256 V256 softplus f32 g i64 cu", Op::gdn, 1, 6, 2, 4, 256, 256, {0, 4, 4, 6}, bf16, f32, Gate::softplus, true, true, true, false, false, SK::dense_h0, 0, 0, {}, {}, i64},
      {"gdn T1 B40 H2 HV4 K64 V64 no l2norm (BV16)", Op::gdn, 40, 1, 2, 4, 64, 64, {}, bf16, bf16, Gate::given, true, false, false},
      {"gdn T1 B80 H8 HV8 K64 V64 pool1d i64 (BV32)", Op::gdn, 80, 1, 8, 8, 64, 64, {}, bf16, bf16, Gate::given, true, true, false, false, false, SK::pool, 100, 0, {}, {}, i64},
      {"gdn T1 B16 H4 HV16 K128 V256 V!=K", Op::gdn, 16, 1, 4, 16, 128, 256},
      {"gdn T4 B2 H2 HV2 K256 V128 pool1d slot = S", Op::gdn, 2, 4, 2, 2, 256, 128, {}, bf16, bf16, Gate::softplus, true, true, true, false, false, SK::pool, 3, 0, {1, 3}},
  };
  int fails = 0;
  std::uint64_t seed = 7;
  for (Case c : cases) {
    const std::uint64_t cs = seed++;  // a case's seed does not depend on the filter
    if (c.state == SK::pool && c.indices.empty()) {  // every sequence its own slot, in reverse order
      for (int n = 0; n < c.B; ++n) c.indices.push_back(c.S - 1 - n);
    }
    if (!match || std::strstr(c.name, match)) fails += run_case(c, cs);
  }
  const Case graph_case = {"graph capture gdn T1 B8 pool1d", Op::gdn, 8, 1, 2, 4, 128, 128, {}, bf16, bf16, Gate::softplus, true, true, true, false, false, SK::pool, 10, 0, {9, 0, 3, -1, 4, 12, 6, 2}};
  if (!match || std::strstr(graph_case.name, match)) fails += run_graph_check(graph_case, 99);
  const Case bad_k = {"refuse K96", Op::gla, 1, 1, 1, 1, 96, 64};
  const Case bad_v = {"refuse V32", Op::gdn, 1, 1, 1, 1, 64, 32};
  if (!match || std::strstr(bad_k.name, match)) fails += run_refusal_check(bad_k, "q", 100);
  if (!match || std::strstr(bad_v.name, match)) fails += run_refusal_check(bad_v, "v", 101);
  std::printf("%s (%d failing checks)\n", fails ? "FAILED" : "ALL CHECKS PASSED", fails);
  return fails ? 1 : 0;
}
