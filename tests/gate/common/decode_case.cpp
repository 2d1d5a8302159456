#include "decode_case.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <stdexcept>

#include "gate_device.h"
#include "lina/fused_recurrent.h"
#include "tests/support/random.h"

namespace lina::gate {
namespace {

using testing::Rng;

// Pool slots no sequence names hold this: a kernel that reads one shows it in o (FLA's HUGE_VALUE).
constexpr double kUnreferenced = 1e30;

bool pooled(StateForm f) { return f == StateForm::pool || f == StateForm::pool_2d || f == StateForm::per_token; }

// Sequence n's tokens are rows [b[n], b[n+1]) of the flattened token axis.
std::vector<std::int64_t> bounds(const GateCase& c) {
  if (c.varlen()) return c.cu;
  std::vector<std::int64_t> b;
  for (std::int64_t n = 0; n <= c.B; ++n) b.push_back(n * c.T);
  return b;
}

struct DecodeInputs {
  Inputs in;                           // q, k, v, g, beta, A_log, dt_bias, cu (the chunk op's)
  HostTensor state;                    // dense forms: h0 [N,HV,D,D]; pool forms: the pool [S,HV,D,D]
  std::optional<HostTensor> indices;   // [N] or [N,L]
  std::optional<HostTensor> accepted;  // [N], with [N,L] indices
  std::vector<std::int64_t> written;   // pool slots the call writes
  std::vector<std::int64_t> padded;    // sequences whose slot is -1
};

DecodeInputs make_decode_inputs(const DecodeCase& d, std::uint64_t seed = 42) {
  const GateCase& c = d.c;
  DecodeInputs di;
  di.in = make_inputs(c, seed);
  Rng r(seed + 1);
  const auto b = bounds(c);
  const auto N = static_cast<std::int64_t>(b.size()) - 1;
  const Shape slot_shape{c.hv(), c.D, c.D};
  if (!pooled(d.form)) {
    di.state = testing::normal(r, DType::f32, Shape{N, c.hv(), c.D, c.D});
    return di;
  }
  std::int64_t longest = 1;
  for (std::int64_t n = 0; n < N; ++n) longest = std::max(longest, b[n + 1] - b[n]);
  const std::int64_t L = d.form == StateForm::pool_2d ? longest : 1;
  const std::int64_t S = N * L + 3;  // three slots no sequence names
  std::vector<std::int64_t> perm(static_cast<std::size_t>(S));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), r.gen);
  const DType idt = d.int64_indices ? DType::i64 : DType::i32;
  HostTensor idx = d.form == StateForm::pool_2d ? HostTensor(idt, Shape{N, L}) : HostTensor(idt, Shape{N});
  std::vector<bool> referenced(static_cast<std::size_t>(S), false);
  for (std::int64_t n = 0; n < N; ++n) {
    const bool pad = d.padding && L == 1 && n % 3 == 1;
    if (pad) di.padded.push_back(n);
    for (std::int64_t l = 0; l < L; ++l) {
      const std::int64_t slot = pad ? -1 : perm[static_cast<std::size_t>(n * L + l)];
      idx.set(n * L + l, static_cast<double>(slot));
      if (slot >= 0) referenced[static_cast<std::size_t>(slot)] = true;
      // The state after token l goes to slot l ([N,L]); with [N] indices the last token's to the one slot.
      if (slot >= 0 && d.form != StateForm::per_token && l < b[n + 1] - b[n]) di.written.push_back(slot);
    }
  }
  if (d.form == StateForm::pool_2d) {
    HostTensor acc(idt, Shape{N});
    for (std::int64_t n = 0; n < N; ++n) acc.set(n, static_cast<double>(1 + static_cast<std::int64_t>(r.uniform() * static_cast<double>(L)) % L));
    di.accepted = std::move(acc);
  }
  di.indices = std::move(idx);
  di.state = HostTensor(DType::f32, Shape{S, c.hv(), c.D, c.D});
  const std::int64_t per_slot = slot_shape.numel();
  for (std::int64_t s = 0; s < S; ++s)
    for (std::int64_t i = 0; i < per_slot; ++i)
      di.state.set(s * per_slot + i, referenced[static_cast<std::size_t>(s)] ? r.normal() : kUnreferenced);
  return di;
}

// One call's outputs: o, the state tensor passed as initial_state (the pool, or h0; written in place
// by the in-place forms) and final_state where the form has its own.
struct CallOutputs {
  HostTensor o, state;
  std::optional<HostTensor> final_state;
};

CallOutputs allocate(const DecodeCase& d, const DecodeInputs& di, bool reference) {
  CallOutputs run;
  run.o = testing::poisoned(reference ? DType::f64 : di.in.v.dtype(), di.in.v.shape());
  run.state = di.state;
  const DType fs = reference ? DType::f64 : DType::f32;
  const Shape slot = Shape{di.in.v.shape()[2], d.c.D, d.c.D};
  if (d.form == StateForm::dense) run.final_state = testing::poisoned(fs, di.state.shape());
  if (d.form == StateForm::per_token)
    run.final_state = testing::poisoned(fs, Shape{di.in.v.shape()[0] * di.in.v.shape()[1], slot[0], slot[1], slot[2]});
  return run;
}

// Views of one call's tensors, on the host or the device: the chunk op's (`in.h0` is the state
// passed as initial_state) plus where the state lives.
struct Placed {
  Views in;
  TensorView o;
  std::optional<TensorView> indices, accepted, final_state;
};

template <class Args>
Args with_state(Args a, const Placed& p, const DecodeCase& d) {
  a.decode.state_indices = p.indices;
  a.decode.num_accepted_tokens = p.accepted;
  a.decode.inplace_final_state = d.form == StateForm::pool || d.form == StateForm::pool_2d;
  return a;
}

void invoke(const DecodeCase& d, const Placed& p, bool reference, const ExecOptions& opts) {
  const AttentionOutputs out{p.o, d.form == StateForm::dense_inplace ? std::optional<TensorView>(p.in.h0) : p.final_state};
  const std::string& op = d.c.op;
  if (op == "fused_recurrent_gla") {
    FusedRecurrentGlaArgs a;
    fill_common(a, p.in, d.c);
    a = with_state(a, p, d);
    a.reverse = d.reverse;
    reference ? reference::fused_recurrent_gla_forward(a, out) : (void)fused_recurrent_gla_forward(a, out, opts);
  } else if (op == "fused_recurrent_kda") {
    FusedRecurrentKdaArgs a;
    fill_delta(a, p.in, d.c);
    a = with_state(a, p, d);
    if (d.c.safe) {
      a.safe_gate = true;
      a.lower_bound = -5.0;
    }
    reference ? reference::fused_recurrent_kda_forward(a, out) : (void)fused_recurrent_kda_forward(a, out, opts);
  } else if (op == "fused_recurrent_gdn") {
    FusedRecurrentGdnArgs a;
    fill_delta(a, p.in, d.c);
    a = with_state(a, p, d);
    reference ? reference::fused_recurrent_gdn_forward(a, out) : (void)fused_recurrent_gdn_forward(a, out, opts);
  } else {
    throw std::invalid_argument("decode gate case with unknown op " + op);
  }
}

// Runs the call on `backend` (the reference on the host); outputs come back into `run`.
void execute(const DecodeCase& d, const DecodeInputs& di, CallOutputs& run, bool reference, Backend backend) {
  const bool delta = d.c.op != "fused_recurrent_gla";
  ExecOptions opts;
  opts.backend = backend;
  std::vector<std::unique_ptr<DeviceTensor>> keep;
  const bool cuda = !reference && backend == Backend::cuda;
  const auto place = [&](const HostTensor& h) {
    if (!cuda) return h.view();
    keep.push_back(std::make_unique<DeviceTensor>(h));
    return keep.back()->view();
  };
  const auto place_opt = [&](const std::optional<HostTensor>& h) { return h ? std::optional<TensorView>(place(*h)) : std::nullopt; };
  Placed p;
  p.in.q = place(di.in.q);
  p.in.k = place(di.in.k);
  p.in.v = place(di.in.v);
  p.in.g = place(di.in.g);
  if (delta) p.in.beta = place(di.in.beta);
  p.in.A_log = place_opt(di.in.A_log);
  p.in.dt_bias = place_opt(di.in.dt_bias);
  if (d.c.varlen()) p.in.cu = place(di.in.cu);
  p.indices = place_opt(di.indices);
  p.accepted = place_opt(di.accepted);
  p.o = place(run.o);
  DeviceTensor* o_dev = cuda ? keep.back().get() : nullptr;
  p.in.h0 = place(run.state);
  DeviceTensor* state_dev = cuda ? keep.back().get() : nullptr;
  p.final_state = place_opt(run.final_state);
  DeviceTensor* final_dev = cuda && run.final_state ? keep.back().get() : nullptr;
  invoke(d, p, reference, opts);
  if (!cuda) return;
  device_synchronize();
  o_dev->copy_to(run.o);
  state_dev->copy_to(run.state);
  if (final_dev) final_dev->copy_to(*run.final_state);
}

// The states a case is judged on, as "ht": final_state, the in-place dense state, or the pool slots written.
HostTensor judged_state(const DecodeCase& d, const DecodeInputs& di, const CallOutputs& run) {
  if (d.form == StateForm::dense || d.form == StateForm::per_token) return *run.final_state;
  if (d.form == StateForm::dense_inplace) return run.state;
  const Shape& s = run.state.shape();
  const std::size_t slot_bytes = run.state.nbytes() / static_cast<std::size_t>(s[0]);
  HostTensor out(DType::f32, Shape{static_cast<std::int64_t>(di.written.size()), s[1], s[2], s[3]});
  for (std::size_t i = 0; i < di.written.size(); ++i)
    std::memcpy(static_cast<char*>(out.data()) + i * slot_bytes,
                static_cast<const char*>(run.state.data()) + static_cast<std::size_t>(di.written[i]) * slot_bytes, slot_bytes);
  return out;
}

// Pool slots the call does not write keep their bytes; padded sequences' o rows are zero.
void expect_untouched(const DecodeCase& d, const DecodeInputs& di, const CallOutputs& run, const char* who) {
  if (pooled(d.form)) {
    const std::set<std::int64_t> written(di.written.begin(), di.written.end());
    const std::int64_t S = run.state.shape()[0];
    const std::size_t slot_bytes = run.state.nbytes() / static_cast<std::size_t>(S);
    for (std::int64_t s = 0; s < S; ++s) {
      if (written.count(s)) continue;
      const std::size_t at = static_cast<std::size_t>(s) * slot_bytes;
      EXPECT_EQ(std::memcmp(static_cast<const char*>(run.state.data()) + at, static_cast<const char*>(di.state.data()) + at, slot_bytes), 0)
          << who << ": pool slot " << s << " is not written by this call but changed";
    }
  }
  const auto b = bounds(d.c);
  const std::int64_t row = run.o.numel() / (b.back() > 0 ? b.back() : 1);
  for (std::int64_t n : di.padded)
    for (std::int64_t i = b[static_cast<std::size_t>(n)] * row; i < b[static_cast<std::size_t>(n) + 1] * row; ++i)
      if (run.o.get(i) != 0.0) {
        ADD_FAILURE() << who << ": o of padded sequence " << n << " is " << run.o.get(i) << " at element " << i << ", expected 0";
        break;
      }
}

bool same_bytes(const HostTensor& a, const HostTensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

class DecodeGateTest : public ::testing::Test {
 public:
  DecodeGateTest(DecodeCase d, Backend backend) : d_(std::move(d)), backend_(backend) {}
  void TestBody() override {
    if (backend_ == Backend::cuda && cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (cuda_device_count() == 0)";
    const DecodeInputs di = make_decode_inputs(d_);
    CallOutputs ref = allocate(d_, di, true);
    execute(d_, di, ref, true, backend_);
    CallOutputs out = allocate(d_, di, false);
    try {
      execute(d_, di, out, false, backend_);
    } catch (const Error& e) {
      // As in the chunk gates: a combination the backend refuses is a skip (the gate stays partial).
      if (e.code() != ErrorCode::unsupported) throw;
      GTEST_SKIP() << "backend refuses this case: " << e.what();
    }
    const Results ref_judged{{"o", ref.o}, {"ht", judged_state(d_, di, ref)}};
    const Results out_judged{{"o", out.o}, {"ht", judged_state(d_, di, out)}};
    expect_close_all(d_.c, ref_judged, out_judged);
    expect_untouched(d_, di, ref, "reference");
    expect_untouched(d_, di, out, "backend");
  }

 private:
  DecodeCase d_;
  Backend backend_;
};

// A bad state argument: refused by name (lina::Error invalid_argument naming `argument`) before any write.
struct Refusal {
  std::string name, argument;
  StateForm form;
  bool host_indices_only;  // the check reads the indices on the host (no device copy-back)
  void (*spoil)(DecodeInputs&);
};

const std::vector<Refusal>& refusals() {
  static const std::vector<Refusal> r{
      {"WrongStateShape", "initial_state", StateForm::pool, false,
       [](DecodeInputs& di) {
         const Shape s = di.state.shape();
         di.state = HostTensor::filled(DType::f32, Shape{s[0], s[1] + 1, s[2], s[3]}, 0.5);
       }},
      {"WrongStateDtype", "initial_state", StateForm::pool, false, [](DecodeInputs& di) { di.state = di.state.cast(DType::bf16); }},
      {"IndexOutOfRange", "state_indices", StateForm::pool, true,
       [](DecodeInputs& di) { di.indices->set(0, static_cast<double>(di.state.shape()[0])); }},
      {"AcceptedWithout2DIndices", "num_accepted_tokens", StateForm::pool, false,
       [](DecodeInputs& di) { di.accepted = HostTensor::filled(DType::i32, di.indices->shape(), 1.0); }},
  };
  return r;
}

class DecodeRefusalTest : public ::testing::Test {
 public:
  DecodeRefusalTest(DecodeCase d, Refusal r, Backend backend) : d_(std::move(d)), r_(std::move(r)), backend_(backend) {}
  void TestBody() override {
    if (backend_ == Backend::cuda && cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device (cuda_device_count() == 0)";
    DecodeInputs di = make_decode_inputs(d_);
    r_.spoil(di);
    CallOutputs run = allocate(d_, di, false);
    const CallOutputs before = run;
    try {
      execute(d_, di, run, false, backend_);
      ADD_FAILURE() << d_.c.op << " took a spoiled " << r_.argument << " (" << r_.name << ") without an error";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::invalid_argument) << e.what();
      EXPECT_EQ(e.argument(), r_.argument) << e.what();
    }
    EXPECT_TRUE(same_bytes(run.o, before.o)) << "o was written before the refusal";
    EXPECT_TRUE(same_bytes(run.state, before.state)) << "the state pool was written before the refusal";
  }

 private:
  DecodeCase d_;
  Refusal r_;
  Backend backend_;
};

}  // namespace

DecodeCase decode_case(const std::string& op, std::string name, std::int64_t B, std::int64_t T, std::int64_t H,
                       std::int64_t D, const DecodeFlags& f, std::vector<std::int64_t> cu) {
  DecodeCase d;
  GateCase& c = d.c;
  c.op = op;
  c.name = std::move(name);
  c.B = B;
  c.T = cu.empty() ? T : cu.back();
  c.H = H;
  c.HV = f.HV;
  c.D = D;
  c.scale = f.scale;
  c.norm = f.norm;
  c.mask_p = f.mask_p;
  c.l2 = f.l2;
  c.gate_in = f.gate;
  c.bias = f.bias;
  c.safe = f.safe;
  c.beta_sigmoid = f.sigmoid;
  c.dtype = f.dt;
  c.cu = std::move(cu);
  d.form = f.form;
  d.padding = f.padding;
  d.int64_indices = f.i64;
  d.reverse = f.reverse;
  return d;
}

void register_decode_gate(const std::string& prefix, const std::vector<DecodeCase>& cases) {
  std::set<std::string> seen;
  for (const DecodeCase& cpu_case : cases) {
    if (!seen.insert(cpu_case.c.name).second) throw std::logic_error("duplicate gate case name " + cpu_case.c.name);
    for (const bool cuda : {false, true}) {
      // The CUDA kernels instantiate head dims 64, 128, 256 and take bf16 (as the chunk gates).
      if (cuda && !(cpu_case.c.D == 64 || cpu_case.c.D == 128 || cpu_case.c.D == 256)) continue;
      if (cuda && cpu_case.c.dtype == DType::f32) continue;
      DecodeCase d = cpu_case;
      if (cuda) d.c.dtype = DType::bf16;
      const std::string suite = prefix + (cuda ? "Cuda" : "") + "/Fwd";
      const Backend be = cuda ? Backend::cuda : Backend::cpu;
      ::testing::RegisterTest(suite.c_str(), d.c.name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                              [d, be]() -> ::testing::Test* { return new DecodeGateTest(d, be); });
    }
  }
  // Refusals on a small pooled case of the suite's op: B4_T1_H2_D64 (GVA HV4 where the op has it).
  DecodeCase base;
  base.c = cases.front().c;
  base.c.name = "B4_T1_H2_D64";
  base.c.B = 4;
  base.c.T = 1;
  base.c.H = 2;
  base.c.HV = 0;
  base.c.D = 64;
  base.c.cu.clear();
  base.c.dtype = DType::bf16;
  for (const Refusal& r : refusals()) {
    for (const bool cuda : {false, true}) {
      if (cuda && r.host_indices_only) continue;
      DecodeCase d = base;
      d.form = r.form;
      const std::string suite = prefix + (cuda ? "Cuda" : "") + "/Refuses";
      const std::string name = r.name + "_" + base.c.name;
      const Backend be = cuda ? Backend::cuda : Backend::cpu;
      ::testing::RegisterTest(suite.c_str(), name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                              [d, r, be]() -> ::testing::Test* { return new DecodeRefusalTest(d, r, be); });
    }
  }
}

}  // namespace lina::gate
