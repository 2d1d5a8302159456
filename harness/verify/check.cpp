#include "harness/verify/check.h"

#include <fmt/format.h>

#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>
#include <set>
#include <sstream>
#include <vector>

#include "harness/engine/registry.h"
#include "harness/verify/accuracy.h"
#include "harness/util/json_file.h"
#include "harness/util/npy.h"
#include "harness/util/text_file.h"
#include "harness/verify/tolerances.h"
#include "lina/lina.h"

#ifdef LINA_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace lina::harness {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& what, const std::string& msg) { throw Error(ErrorCode::invalid_argument, what, msg); }

// Device copies for --backend cuda.
class Mirror {
 public:
  TensorView put(const HostTensor& h) {
#ifdef LINA_WITH_CUDA
    void* p = nullptr;
    if (cudaMalloc(&p, h.nbytes() ? h.nbytes() : 1) != cudaSuccess) throw Error(ErrorCode::runtime, "", "cudaMalloc failed");
    ptrs_.push_back(p);
    if (h.nbytes()) cudaMemcpy(p, h.data(), h.nbytes(), cudaMemcpyHostToDevice);
    return TensorView::contiguous(p, h.dtype(), h.shape(), Device::cuda, 0);
#else
    (void)h;
    throw Error(ErrorCode::unsupported, "--backend", "this build has no CUDA backend");
#endif
  }
  void get(const TensorView& d, HostTensor& h) {
#ifdef LINA_WITH_CUDA
    cudaDeviceSynchronize();
    if (h.nbytes()) cudaMemcpy(h.data(), d.data, h.nbytes(), cudaMemcpyDeviceToHost);
#else
    (void)d;
    (void)h;
#endif
  }
  ~Mirror() {
#ifdef LINA_WITH_CUDA
    for (void* p : ptrs_) cudaFree(p);
#endif
  }

 private:
  std::vector<void*> ptrs_;
};

struct Tensors {
  std::map<std::string, HostTensor> in;  // by argument name
};

template <class T>
std::optional<T> kw(const json& k, const char* key, const fs::path& file) {
  if (!k.contains(key) || k[key].is_null()) return std::nullopt;
  try {
    return k[key].get<T>();
  } catch (const std::exception&) {
    bad("kwargs.json", "file " + file.string() + ": key '" + key + "' has the wrong type");
  }
}

}  // namespace

int run_check(const CheckOptions& o, std::ostream& out) {
  const bool gla = o.op == "chunk_gla", kda = o.op == "chunk_kda";
  if (!lookup_op(o.op)) bad("--op", "argument `--op`: seen '" + o.op + "', expected " + op_name_list(" or "));
  const std::string backend = o.backend.empty() ? (cuda_device_count() > 0 ? "cuda" : "cpu") : o.backend;
  if (backend != "cpu" && backend != "cuda") bad("--backend", "argument `--backend`: seen '" + o.backend + "', expected cpu or cuda");
  if (backend == "cuda" && cuda_device_count() == 0)
    throw Error(ErrorCode::unsupported, "--backend", "--backend cuda needs an NVIDIA GPU and none is visible; use --backend cpu");
  if (!fs::is_directory(o.inputs)) bad("--inputs", "argument `--inputs`: " + o.inputs.string() + " is not a directory");
  // --out is checked before any work: an existing non-directory, or one that cannot be created.
  if (o.out) {
    std::error_code ec;
    if (fs::exists(*o.out, ec) && !fs::is_directory(*o.out, ec))
      bad("--out", "argument `--out`: " + o.out->string() + " exists and is not a directory, expected a directory (created if absent)");
    if (!fs::create_directories(*o.out, ec) && ec)
      bad("--out", "argument `--out`: cannot create " + o.out->string() + " (" + ec.message() + "), expected a writable directory");
  }

  // kwargs.json: scalar flags, plus "bf16": true | [names] for uint16 files holding bfloat16 bits.
  json k = json::object();
  const fs::path kwf = o.inputs / "kwargs.json";
  if (fs::exists(kwf)) {
    k = read_json_file(kwf, "kwargs.json");
    if (!k.is_object()) bad("kwargs.json", "file " + kwf.string() + " must hold a JSON object");
    static const std::set<std::string> known = {"scale", "use_qk_l2norm_in_kernel", "use_beta_sigmoid_in_kernel", "allow_neg_eigval",
                                                "use_gate_in_kernel", "lower_bound", "safe_gate", "output_final_state", "bf16"};
    for (const auto& [key, v] : k.items())
      if (!known.count(key)) bad("kwargs.json", "file " + kwf.string() + ": unknown key '" + key + "'");
    // Types are checked here, not where a key is first read, so a wrong one never runs half a check.
    static const std::set<std::string> numbers = {"scale", "lower_bound"};
    for (const auto& [key, v] : k.items()) {
      if (v.is_null() || key == "bf16") continue;
      const bool ok = numbers.count(key) ? v.is_number() : v.is_boolean();
      if (!ok)
        bad("kwargs.json", "file " + kwf.string() + ": key '" + key + "' is " + v.type_name() + ", expected " +
                               (numbers.count(key) ? "a number" : "true or false"));
    }
    if (k.contains("bf16")) {
      static const std::set<std::string> names = {"q", "k", "v", "g", "beta", "initial_state", "do", "dht", "A_log", "dt_bias"};
      const json& b = k["bf16"];
      bool ok = b.is_boolean() || b.is_array();
      if (b.is_array())
        for (const auto& e : b) ok = ok && e.is_string() && names.count(e.get<std::string>());
      if (!ok)
        bad("kwargs.json", "file " + kwf.string() + ": key 'bf16' is " + b.dump() +
                               ", expected true, false or a list of argument names (q, k, v, g, beta, ...)");
    }
  }
  auto is_bf16 = [&](const std::string& name) {
    if (!k.contains("bf16")) return false;
    const json& b = k["bf16"];
    if (b.is_boolean()) return b.get<bool>();
    if (b.is_array())
      for (const auto& e : b)
        if (e.is_string() && e.get<std::string>() == name) return true;
    return false;
  };

  std::vector<std::string> required = {"q", "k", "v", "g"};
  if (!gla) required.push_back("beta");
  std::vector<std::string> optional = {"initial_state", "cu_seqlens", "do", "dht"};
  if (!gla) {
    optional.push_back("A_log");
    optional.push_back("dt_bias");
  }
  std::map<std::string, HostTensor> in;
  for (const auto& n : required) {
    const fs::path p = o.inputs / (n + ".npy");
    if (!fs::exists(p)) bad(n, "file " + p.string() + ": missing (" + o.op + " needs " + n + ".npy)");
  }
  for (const auto* list : {&required, &optional})
    for (const auto& n : *list) {
      const fs::path p = o.inputs / (n + ".npy");
      if (!fs::exists(p)) continue;
      NpyReadOptions ro;
      ro.u2_is_bf16 = is_bf16(n);
      in[n] = read_npy(p, ro);
    }
  for (const auto& e : fs::directory_iterator(o.inputs)) {
    const std::string stem = e.path().stem().string();
    if (e.path().extension() == ".npy" && !in.count(stem)) out << "note: ignoring " << e.path().filename().string() << " (not an argument of " << o.op << ")\n";
  }
  const bool backward = in.count("do") > 0;
  if (in.count("dht") && !backward) bad("dht", "file " + (o.inputs / "dht.npy").string() + ": given without do.npy (the backward needs do)");

  // Shapes: the op's own validation names the argument; prefix it with the file.
  const HostTensor& q = in["q"];
  const HostTensor& v = in["v"];
  if (q.shape().rank != 4) bad("q", "file " + (o.inputs / "q.npy").string() + ": shape " + q.shape().str() + ", expected [B,T,H,K]");
  if (v.shape().rank != 4) bad("v", "file " + (o.inputs / "v.npy").string() + ": shape " + v.shape().str() + ", expected [B,T,HV,V]");
  if (in.count("cu_seqlens") && (in["cu_seqlens"].shape().rank != 1 || in["cu_seqlens"].numel() < 2))
    bad("cu_seqlens", "file " + (o.inputs / "cu_seqlens.npy").string() + ": shape " + in["cu_seqlens"].shape().str() +
                          ", expected [N+1] with N >= 1");
  const std::int64_t N = in.count("cu_seqlens") ? in["cu_seqlens"].numel() - 1 : q.shape()[0];
  const Shape state{N, v.shape()[2], q.shape()[3], v.shape()[3]};
  const bool varlen = in.count("cu_seqlens") > 0;
  const bool has_h0 = in.count("initial_state") > 0;
  const bool gate_in = kw<bool>(k, "use_gate_in_kernel", kwf).value_or(false);

  // Result tensors: lina's (exact dtypes) and the reference's (f64).
  struct Slot {
    std::string name, file;
    HostTensor lina, ref;
  };
  std::vector<Slot> slots;
  auto slot = [&](const std::string& name, const std::string& file, DType dt, const Shape& s) {
    slots.push_back({name, file, HostTensor::filled(dt, s, NAN), HostTensor::filled(DType::f64, s, NAN)});
  };
  slot("o", "o", v.dtype(), v.shape());
  slot("ht", "ht", DType::f32, state);
  if (backward) {
    slot("dq", "dq", q.dtype(), q.shape());
    slot("dk", "dk", in["k"].dtype(), in["k"].shape());
    slot("dv", "dv", v.dtype(), v.shape());
    slot("dg", "dg", in["g"].dtype(), in["g"].shape());
    if (!gla) slot("dbeta", "dbeta", in["beta"].dtype(), in["beta"].shape());
    if (has_h0) slot("dh0", "dh0", DType::f32, state);
    if (!gla && gate_in && in.count("A_log")) slot("dA_log", "dA_log", DType::f32, in["A_log"].shape());
    if (!gla && gate_in && in.count("dt_bias")) slot("ddt_bias", "ddt_bias", DType::f32, in["dt_bias"].shape());
  }

  auto run = [&](bool reference) {
    Mirror m;
    const bool dev = !reference && backend == "cuda";
    auto view_in = [&](const std::string& n) { return dev ? m.put(in.at(n)) : in.at(n).view(); };
    auto opt_in = [&](const std::string& n) -> std::optional<TensorView> {
      if (!in.count(n)) return std::nullopt;
      return view_in(n);
    };
    std::map<std::string, TensorView> res;
    for (auto& s : slots) res[s.name] = reference ? s.ref.view() : dev ? m.put(s.lina) : s.lina.view();
    auto opt_res = [&](const std::string& n) -> std::optional<TensorView> {
      if (!res.count(n)) return std::nullopt;
      return res[n];
    };
    AttentionOutputs outs{res["o"], res["ht"]};
    AttentionGradInputs gi;
    if (backward) gi = {view_in("do"), opt_in("dht")};
    ExecOptions eo;
    eo.backend = backend == "cuda" ? Backend::cuda : Backend::cpu;
    auto common = [&](auto& a) {
      a.q = view_in("q");
      a.k = view_in("k");
      a.v = view_in("v");
      a.g = view_in("g");
      a.scale = kw<double>(k, "scale", kwf);
      a.initial_state = opt_in("initial_state");
      a.cu_seqlens = opt_in("cu_seqlens");
      if (dev && varlen) a.cu_seqlens_cpu = in.at("cu_seqlens").view();
    };
    auto delta = [&](auto& a) {
      common(a);
      a.beta = view_in("beta");
      a.use_qk_l2norm_in_kernel = kw<bool>(k, "use_qk_l2norm_in_kernel", kwf).value_or(false);
      a.use_beta_sigmoid_in_kernel = kw<bool>(k, "use_beta_sigmoid_in_kernel", kwf).value_or(false);
      a.allow_neg_eigval = kw<bool>(k, "allow_neg_eigval", kwf).value_or(false);
      a.use_gate_in_kernel = gate_in;
      if (gate_in) {
        a.A_log = opt_in("A_log");
        a.dt_bias = opt_in("dt_bias");
      }
    };
    DeltaRuleGrads dg;
    if (backward) {
      dg.dq = res["dq"];
      dg.dk = res["dk"];
      dg.dv = res["dv"];
      dg.dg = res["dg"];
      if (!gla) dg.dbeta = res["dbeta"];
      dg.d_initial_state = opt_res("dh0");
      dg.d_A_log = opt_res("dA_log");
      dg.d_dt_bias = opt_res("ddt_bias");
    }
    if (gla) {
      ChunkGlaArgs a;
      common(a);
      const ChunkGlaGrads g{res.count("dq") ? res["dq"] : TensorView{}, res.count("dk") ? res["dk"] : TensorView{},
                            res.count("dv") ? res["dv"] : TensorView{}, res.count("dg") ? res["dg"] : TensorView{}, opt_res("dh0")};
      if (reference) {
        reference::chunk_gla_forward(a, outs);
        if (backward) reference::chunk_gla_backward(a, gi, g);
      } else {
        chunk_gla_forward(a, outs, ForwardMode::training, eo);
        if (backward) chunk_gla_backward(a, gi, g, eo);
      }
    } else if (kda) {
      ChunkKdaArgs a;
      delta(a);
      a.lower_bound = kw<double>(k, "lower_bound", kwf);
      a.safe_gate = kw<bool>(k, "safe_gate", kwf).value_or(false);
      if (reference) {
        reference::chunk_kda_forward(a, outs);
        if (backward) reference::chunk_kda_backward(a, gi, dg);
      } else {
        chunk_kda_forward(a, outs, ForwardMode::training, eo);
        if (backward) chunk_kda_backward(a, gi, dg, eo);
      }
    } else {
      ChunkGdnArgs a;
      delta(a);
      if (reference) {
        reference::chunk_gdn_forward(a, outs);
        if (backward) reference::chunk_gdn_backward(a, gi, dg);
      } else {
        chunk_gdn_forward(a, outs, ForwardMode::training, eo);
        if (backward) chunk_gdn_backward(a, gi, dg, eo);
      }
    }
    if (dev)
      for (auto& s : slots) m.get(res[s.name], s.lina);
  };
  try {
    run(/*reference=*/false);
    run(/*reference=*/true);
  } catch (const Error& e) {
    // Refusals name the argument; the user knows it as a file.
    if (e.code() != ErrorCode::runtime && in.count(e.argument()))
      throw Error(e.code(), e.argument(), "file " + (o.inputs / (e.argument() + ".npy")).string() + ": " + e.what());
    throw;
  }

  const auto set = varlen ? ToleranceSet::varlen : ToleranceSet::dense;
  out << fmt::format("{} on {} ({}, {}), reference: fp64 naive recurrence\n", o.op, backend, varlen ? "varlen" : "dense",
                     backward ? "forward + backward" : "forward");
  out << fmt::format("{:<9} {:<22} {:>12} {:>12} {:>8}  {}\n", "tensor", "shape", "err_ratio", "max_abs", "tol", "result");
  bool all = true;
  for (const auto& s : slots) {
    const Closeness c = assert_close(s.ref, s.lina, tolerance(o.op, s.name, set));
    all = all && c.pass;
    out << fmt::format("{:<9} {:<22} {:>12.3e} {:>12.3e} {:>8.3g}  {}\n", s.name, s.lina.shape().str(), c.err_ratio, c.max_abs,
                       c.tolerance, c.pass ? "pass" : "FAIL");
  }
  if (o.out) {
    json dtypes = json::object();
    for (const auto& s : slots) {
      write_npy(*o.out / (s.file + ".npy"), s.lina);
      dtypes[s.file] = std::string(dtype_name(s.lina.dtype()));
    }
    // bfloat16 is written as '<u2' bits; this file says which outputs hold bfloat16.
    write_file_atomically(*o.out / "dtypes.json", dtypes.dump(2) + "\n", "--out");
    out << "outputs written to " << o.out->string() << "\n";
  }
  out << (all ? "check: pass\n" : "check: FAIL\n");
  return all ? 0 : 1;
}

}  // namespace lina::harness
