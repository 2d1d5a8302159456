#include "harness/engine/runner.h"

#include <cmath>
#include <cstring>
#include <map>
#include <memory>

#include "harness/verify/accuracy.h"
#include "harness/engine/decode_state.h"
#include "harness/engine/device_buffer.h"
#include "harness/engine/machine.h"
#include "harness/verify/tolerances.h"
#include "lina/lina.h"

#ifdef LINA_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace lina::harness {

using nlohmann::json;

Backend resolve_backend(const std::string& name) {
  if (name.empty()) return cuda_device_count() > 0 ? Backend::cuda : Backend::cpu;
  if (name == "cpu") return Backend::cpu;
  if (name == "cuda") {
    if (!cuda_backend_compiled()) throw_unsupported("--backend", "cuda", "cpu (this build has no CUDA backend)");
    if (cuda_device_count() == 0) throw_unsupported("--backend", "cuda", "cpu (no CUDA device is visible)");
    return Backend::cuda;
  }
  throw_invalid("--backend", "'" + name + "'", "cuda or cpu");
}

Plan make_plan(const RunConfig& cfg) {
  Plan plan;
  if (cfg.ops.empty()) throw_invalid("--op", "nothing", "an op name, a comma list, or all");
  const auto ops = resolve_ops(cfg.ops);
  for (const auto& m : cfg.modes) parse_mode(m);  // an unknown name first, whatever the ops
  if (cfg.policy.min_samples < 1) throw_invalid("--min-samples", std::to_string(cfg.policy.min_samples), ">= 1");
  if (cfg.policy.max_samples < cfg.policy.min_samples)
    throw_invalid("--max-samples", std::to_string(cfg.policy.max_samples), ">= --min-samples");
  if (!(cfg.policy.max_noise > 0 && cfg.policy.max_noise < 1))
    throw_invalid("--max-noise", std::to_string(cfg.policy.max_noise), "a fraction in (0, 1), e.g. 0.005 for 0.5 %");
  if (!(cfg.policy.time_budget_s >= 0)) throw_invalid("--time-budget", std::to_string(cfg.policy.time_budget_s), ">= 0 seconds");
  // 0 means all cores; more threads than kMaxThreads only exhausts the system's thread limit.
  if (cfg.threads < 0 || cfg.threads > kMaxThreads)
    throw_invalid("--threads", std::to_string(cfg.threads), "an integer in [0, " + std::to_string(kMaxThreads) + "] (0: all cores)");
  plan.backend = resolve_backend(cfg.backend);
  if (cfg.graphs && plan.backend != Backend::cuda) throw_invalid("--graphs", "backend cpu", "--backend cuda");

  // Set names resolve against each op's own sets (the decode ops have theirs); shape names are shared.
  std::vector<Workload> extra;
  if (!cfg.custom_shapes.empty())
    for (auto& w : parse_custom_shapes(cfg.custom_shapes, cfg.seed)) extra.push_back(std::move(w));
  for (const auto& v : cfg.varlen)
    for (auto& w : parse_varlen(v, cfg.seed)) extra.push_back(std::move(w));

  const std::string backend = backend_name(plan.backend);
  for (const OpSpec* op : ops) {
    const std::vector<Mode> modes = resolve_modes(*op, cfg.modes);
    const ShapeSetLookup sets = [op](const std::string& n) { return op->shape_set(n); };
    std::vector<Workload> workloads;
    if (!cfg.shapes.empty()) {
      workloads = resolve_shapes(cfg.shapes, cfg.seed, sets);
    } else if (extra.empty()) {
      workloads = resolve_shapes({plan.backend == Backend::cuda ? "default" : "cpu"}, cfg.seed, sets);
    }
    workloads.insert(workloads.end(), extra.begin(), extra.end());
    for (const auto& w : workloads) {
      if (auto why = op->refuses(w.keys, plan.backend))
        throw_invalid("--shapes", "shape '" + w.name + "' for " + op->name + " on the " + backend + " backend (" + *why + ")",
                      "a shape that " + op->name + " supports on " + backend);
      for (Mode m : modes) plan.cells.push_back(Cell{op, m, w});
    }
  }
  return plan;
}

json config_json(const RunConfig& c, Backend backend) {
  return {{"seed", c.seed},
          {"backend", backend_name(backend)},
          {"l2_flush", c.l2_flush},
          {"graphs", c.graphs},
          {"check", c.check},
          {"final_state", c.final_state},
          {"safe_gate", c.safe_gate},
          {"min_samples", c.policy.min_samples},
          {"max_samples", c.policy.max_samples},
          {"max_noise", c.policy.max_noise},
          {"time_budget_s", c.policy.time_budget_s},
          {"warmup", c.policy.warmup},
          {"threads", c.threads},
          {"ops", c.ops},
          {"modes", c.modes},
          {"shapes", c.shapes},
          {"custom_shapes", c.custom_shapes.empty() ? json(nullptr) : json(c.custom_shapes)},
          {"varlen", c.varlen},
          {"command", c.command}};
}

namespace {

// One workload's inputs for one op, generated once and shared by every mode.
struct HostInputs {
  std::map<std::string, HostTensor> in;
  HostTensor d_o;
  HostTensor cu;  // int32 [N + 1] when varlen
  std::optional<StatePool> pool;  // state-pool ops: the pool as seeded, its indices
};

HostInputs make_inputs(const OpSpec& op, const Workload& w, std::uint64_t seed) {
  HostInputs h;
  for (const auto& spec : op.inputs)
    h.in.emplace(spec.name, generate_tensor(spec.name, spec.dtype, op.input_shape(spec, w.keys), spec.transform, seed));
  if (op.state_pool) h.pool = make_state_pool(w.keys, seed);
  h.d_o = generate_tensor("do", DType::bf16, op.output_shape(w.keys), Transform::randn, seed);
  if (w.is_varlen()) {
    h.cu = HostTensor(DType::i32, Shape{static_cast<std::int64_t>(w.cu_seqlens.size())});
    for (std::size_t i = 0; i < w.cu_seqlens.size(); ++i) h.cu.set(static_cast<std::int64_t>(i), static_cast<double>(w.cu_seqlens[i]));
  }
  return h;
}

// Output / gradient buffers of one cell on its device; `dtype` overrides the op's own dtypes (the
// references write f64 on the host and f32 on the GPU).
struct Buffers {
  std::map<std::string, HostTensor> host;
  std::map<std::string, DeviceTensor> dev;
  Bound bound;
};

std::unique_ptr<Buffers> make_buffers(const OpSpec& op, const Workload& w, HostInputs& h, std::map<std::string, DeviceTensor>* dev_in,
                                      bool device, std::optional<DType> dtype, bool grads, bool final_state, bool safe_gate) {
  auto b = std::make_unique<Buffers>();
  b->bound.kda_safe_gate = safe_gate;
  const auto add = [&](const std::string& name, DType dt, const Shape& s) -> TensorView {
    if (device) {
      auto [it, _] = b->dev.emplace(name, DeviceTensor::empty(dt, s));
      it->second.buffer.fill_bytes(0xFF);  // NaN in every float format: a partial write fails the check
      return it->second.view();
    }
    auto [it, _] = b->host.emplace(name, HostTensor::filled(dt, s, NAN));
    return it->second.view();
  };
  for (const auto& spec : op.inputs) b->bound.in[spec.name] = device ? dev_in->at(spec.name).view() : h.in.at(spec.name).view();
  if (w.is_varlen()) {
    b->bound.cu_seqlens = device ? dev_in->at("cu_seqlens").view() : h.cu.view();
    b->bound.cu_seqlens_cpu = h.cu.view();
  }
  b->bound.out.o = add("o", dtype.value_or(DType::bf16), op.output_shape(w.keys));
  if (op.state_pool) {
    // The pool is input and output: every cell (and the reference) gets its own copy, as seeded;
    // the fp64 reference keeps the pool's dtype (f32).
    const HostTensor& seeded = h.pool->pool;
    if (device) {
      auto [it, _] = b->dev.emplace("ht", DeviceTensor::like(seeded));
      it->second.buffer.copy_from(dev_in->at("state_pool").buffer, nullptr);
      b->bound.state_pool = it->second.view();
    } else {
      b->bound.state_pool = b->host.emplace("ht", seeded).first->second.view();
    }
    b->bound.state_indices = device ? dev_in->at("state_indices").view() : h.pool->state_indices.view();
    if (h.pool->num_accepted_tokens)
      b->bound.num_accepted_tokens = device ? dev_in->at("num_accepted_tokens").view() : h.pool->num_accepted_tokens->view();
  } else if (final_state) {
    b->bound.out.final_state = add("ht", dtype.value_or(DType::f32), Shape{w.keys.num_seqs, w.keys.HV, w.keys.K, w.keys.V});
  }
  b->bound.grad_in.d_o = device ? dev_in->at("do").view() : h.d_o.view();
  if (grads)
    for (const auto& spec : op.inputs) b->bound.grads[spec.grad] = add(spec.grad, dtype.value_or(spec.dtype), op.input_shape(spec, w.keys));
  return b;
}

void synchronize(bool device, void* stream) {
#ifdef LINA_WITH_CUDA
  if (device && cudaStreamSynchronize(static_cast<cudaStream_t>(stream)) != cudaSuccess)
    throw Error(ErrorCode::runtime, "cuda", std::string("cudaStreamSynchronize: ") + cudaGetErrorString(cudaGetLastError()));
#else
  (void)device, (void)stream;
#endif
}

// Restores a cell's state pool to the seeded one (ordered on the op's stream on the GPU).
void reseed_pool(Buffers& b, const HostInputs& h, const std::map<std::string, DeviceTensor>& dev_in, bool device, void* stream) {
  if (device) {
    b.dev.at("ht").buffer.copy_from(dev_in.at("state_pool").buffer, stream);
  } else {
    HostTensor& pool = b.host.at("ht");
    std::memcpy(pool.data(), h.pool->pool.data(), static_cast<std::size_t>(pool.numel()) * dtype_size(pool.dtype()));
  }
}

HostTensor fetch(const Buffers& b, const std::string& name, bool device) {
  return device ? b.dev.at(name).to_host() : b.host.at(name);
}

void check_cell(const OpSpec& op, const Cell& cell, HostInputs& h, std::map<std::string, DeviceTensor>* dev_in, bool device,
                bool final_state, const Buffers& out, void* stream, CheckResult& res) {
  const bool fwd = mode_has_forward(cell.mode), bwd = mode_has_backward(cell.mode);
  // Ops without a GPU reference (the decode ops) are checked on the host in fp64 wherever they ran.
  const bool ref_on_device = device && op.gpu_reference_forward != nullptr;
  final_state = final_state || op.state_pool;
  res.reference = ref_on_device ? "fp32-gpu" : "fp64-host";
  std::unique_ptr<Buffers> ref;
  try {
    // ht only exists where the timed call ran a forward.
    ref = make_buffers(op, cell.workload, h, dev_in, ref_on_device, ref_on_device ? DType::f32 : DType::f64, bwd, final_state && fwd,
                       out.bound.kda_safe_gate);
    if (ref_on_device) {
      if (fwd) op.gpu_reference_forward(ref->bound, stream);
      if (bwd) op.gpu_reference_backward(ref->bound, stream);
#ifdef LINA_WITH_CUDA
      cudaStreamSynchronize(static_cast<cudaStream_t>(stream));
#endif
    } else {
      if (fwd) op.reference_forward(ref->bound);
      if (bwd) op.reference_backward(ref->bound);
    }
  } catch (const Error& e) {
    res.pass.reset();
    res.reason = std::string(device ? "GPU" : "fp64") + " reference could not run: " + e.what();
    return;
  }
  std::vector<std::string> names;
  if (fwd) names.push_back("o");
  if (fwd && final_state) names.push_back("ht");
  if (bwd)
    for (const auto& spec : op.inputs) names.push_back(spec.grad);
  const auto set = cell.workload.is_varlen() ? ToleranceSet::varlen : ToleranceSet::dense;
  bool all = true;
  // ht of a state-pool op is the whole pool after one call: the slots the call wrote and the rest.
  double worst = -1;
  double max_abs = 0;
  for (const auto& n : names) {
    const double tol = tolerance(op.name, n, set);
    const Closeness c = assert_close(fetch(*ref, n, ref_on_device), fetch(out, n, device), tol);
    res.tensors.push_back({n, c.err_ratio, c.max_abs, tol, c.has_nan, c.pass});
    all = all && c.pass;
    max_abs = std::max(max_abs, c.max_abs);
    const double score = c.has_nan ? INFINITY : c.err_ratio / tol;
    if (score > worst) {
      worst = score;
      res.err_ratio = c.err_ratio;
      res.tolerance = tol;
    }
  }
  res.max_abs = max_abs;
  res.pass = all;
}

}  // namespace

RunOutput run_plan(const RunConfig& cfg, const Plan& plan, const ProgressFn& progress) {
  RunOutput out;
  const bool device = plan.backend == Backend::cuda;
  const MachineInfo machine = machine_info(plan.backend);
  void* stream = nullptr;
#ifdef LINA_WITH_CUDA
  cudaStream_t st = nullptr;
  if (device) {
    if (cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) != cudaSuccess)
      throw Error(ErrorCode::runtime, "cuda", "cudaStreamCreate failed");
    stream = st;
  }
#endif
  ExecOptions opts;
  opts.backend = plan.backend;
  opts.stream = stream;
  opts.num_threads = cfg.threads;

  // Inputs are generated once per (op, workload); cells are planned grouped that way.
  std::string current_key;
  std::unique_ptr<HostInputs> inputs;
  std::map<std::string, DeviceTensor> dev_in;
  bool any_check_failed = false, any_runtime = false, any_refused = false;
  for (std::size_t i = 0; i < plan.cells.size(); ++i) {
    const Cell& cell = plan.cells[i];
    const OpSpec& op = *cell.op;
    const std::string mode = mode_name(cell.mode);
    const auto report = [&](const std::string& s) {
      if (progress) progress(i + 1, plan.cells.size(), cell, s);
    };
    try {
      const std::string key = op.name + "/" + cell.workload.name;
      if (key != current_key) {
        report("generating inputs");
        dev_in.clear();
        inputs = std::make_unique<HostInputs>(make_inputs(op, cell.workload, cfg.seed));
        if (device) {
          for (auto& [name, t] : inputs->in) dev_in.emplace(name, DeviceTensor::from_host(t));
          dev_in.emplace("do", DeviceTensor::from_host(inputs->d_o));
          if (cell.workload.is_varlen()) dev_in.emplace("cu_seqlens", DeviceTensor::from_host(inputs->cu));
          if (const auto& p = inputs->pool) {
            dev_in.emplace("state_pool", DeviceTensor::from_host(p->pool));
            dev_in.emplace("state_indices", DeviceTensor::from_host(p->state_indices));
            if (p->num_accepted_tokens) dev_in.emplace("num_accepted_tokens", DeviceTensor::from_host(*p->num_accepted_tokens));
          }
        }
        current_key = key;
      }
      auto bufs = make_buffers(op, cell.workload, *inputs, &dev_in, device, std::nullopt, mode_has_backward(cell.mode),
                               cfg.final_state && mode_has_forward(cell.mode), cfg.safe_gate);
      const Bound& b = bufs->bound;
      RunInfo info;
      std::function<void()> call;
      switch (cell.mode) {
        case Mode::fwd: call = [&] { info = op.forward(b, ForwardMode::training, opts); }; break;
        case Mode::infer: call = [&] { info = op.forward(b, ForwardMode::inference, opts); }; break;
        case Mode::bwd:
          report("untimed forward");
          op.forward(b, ForwardMode::training, opts);
          call = [&] { info = op.backward(b, opts); };
          break;
        case Mode::fwdbwd:
          call = [&] {
            RunInfo f = op.forward(b, ForwardMode::training, opts);
            info = op.backward(b, opts);
            f.kernels.insert(f.kernels.end(), info.kernels.begin(), info.kernels.end());
            info.kernels = std::move(f.kernels);
          };
          break;
      }
      ResultRow row;
      row.op = op.name;
      row.mode = mode;
      row.shape = cell.workload.name;
      row.keys = cell.workload.keys;
      row.bytes = op.bytes(row.keys, cell.mode, cfg.final_state && mode_has_forward(cell.mode));
      row.flops = op.flops(row.keys, cell.mode);
      row.bytes_model = op.bytes_model;
      row.flops_model = op.flops_model;
      if (device) {
        report("memory probe");
        row.peak_mem_bytes = static_cast<double>(probe_peak_memory(call, stream));
      }
      const ClockReading before = read_clock();
      std::unique_ptr<Timer> timer = device ? make_cuda_timer({cfg.l2_flush, cfg.graphs, stream}) : make_cpu_timer();
      row.timer = timer->name();
      report("timing");
      // State-pool ops update the pool in place: it is re-seeded before every call (untimed, ahead of the
      // L2 flush), and the checked outputs come from one more call on the seeded pool.
      std::function<void()> reset;
      if (op.state_pool) reset = [&] { reseed_pool(*bufs, *inputs, dev_in, device, stream); };
      const Measurement m = measure(*timer, call, cfg.policy, "lina:timed:" + op.name + ":" + mode + ":" + row.shape, reset);
      if (reset) {
        reset();
        call();
        synchronize(device, stream);
      }
      const ClockReading after = read_clock();
      row.sm_clock_before = before.sm_mhz;
      row.sm_clock_after = after.sm_mhz;
      row.throttled = throttled(after);
      row.backend = info.backend.empty() ? backend_name(plan.backend) : info.backend;
      row.kernels = info.kernels;
      row.times_ms = m.times_ms;
      row.stop_reason = m.stop_reason;
      derive(row, machine.ceilings.hbm_gbps, machine.ceilings.bf16_tflops, op.token_heads(row.keys));
      if (cfg.check) {
        report("checking");
        check_cell(op, cell, *inputs, &dev_in, device, cfg.final_state, *bufs, stream, row.check);
        if (row.check.pass == false) any_check_failed = true;
      } else {
        row.check.reference = "none";
        row.check.reason = "--no-check";
      }
      out.rows.push_back(std::move(row));
    } catch (const Error& e) {
      const bool runtime = e.code() == ErrorCode::runtime;
      (runtime ? any_runtime : any_refused) = true;
      out.failures.push_back({op.name, mode, cell.workload.name, e.what(), runtime});
      report(std::string("failed: ") + e.what());
    }
  }
#ifdef LINA_WITH_CUDA
  if (st) cudaStreamDestroy(st);
#endif
  json failures = json::array();
  for (const auto& f : out.failures)
    failures.push_back({{"op", f.op}, {"mode", f.mode}, {"shape", f.shape}, {"error", f.error}, {"runtime", f.runtime}});
  out.document = make_run_document(to_json(tool_info()), to_json(machine), config_json(cfg, plan.backend), out.rows, failures);
  out.exit_code = any_refused ? 2 : (any_runtime || any_check_failed) ? 1 : 0;
  return out;
}

}  // namespace lina::harness
