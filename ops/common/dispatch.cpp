#include "lina/error.h"
#include "ops/common/backends.h"

namespace lina {

std::string backend_name(Backend b) {
  switch (b) {
    case Backend::automatic: return "auto";
    case Backend::cpu: return "cpu";
    case Backend::cuda: return "cuda";
  }
  return "?";
}

namespace detail {

Backend pick_backend(const Problem& p, const ExecOptions& opts) {
  const Backend by_device = p.device == Device::cuda ? Backend::cuda : Backend::cpu;
  if (opts.backend != Backend::automatic && opts.backend != by_device)
    throw_invalid("backend", backend_name(opts.backend) + " with tensors on " + (p.device == Device::cuda ? "cuda" : "cpu"),
                  "the backend of the tensors' device (" + backend_name(by_device) + ")");
  if (by_device == Backend::cuda && !cuda::compiled())
    throw_unsupported("backend", "cuda (this build has no CUDA backend)", "cpu tensors, or a build with LINA_WITH_CUDA=ON");
  return by_device;
}

}  // namespace detail
}  // namespace lina
