"""An implementation of the side by side: what it is called, whether it can run here, and the callable that
one sample of a cell times. Plugins subclass Implementation and register with @register."""
import importlib
import importlib.metadata

import torch

REGISTRY = {}  # name -> Implementation subclass, in registration order
DO_SEED = 1234  # the output gradient of fwdbwd


def register(cls):
    REGISTRY[cls.name] = cls
    return cls


class Implementation:
    """name: the --impls name; label: the `impl` of its JSON rows (lina-* rows are claims, others references);
    package: the distribution whose version is recorded; module: what is imported (None: nothing); ops: the
    ops it offers."""
    name = ""
    label = ""
    package = None
    module_name = None
    ops = ()
    forward_only = False  # no autograd: fwd is timed as an inference call, fwdbwd is skipped

    def __init__(self):
        self.module, self.reason = import_module(self.module_name) if self.module_name else (None, None)

    def row_label(self, device):
        """The `impl` of this implementation's rows on `device`."""
        return self.label

    def available(self, device):
        """(True, None) or (False, why): can this implementation run on `device` (a torch.device) at all?"""
        if self.module_name and self.module is None:
            return False, self.reason
        why = self.unusable(device)
        return why is None, why

    def unusable(self, device):
        """None, or why the imported module cannot run on `device` (its API, the GPU)."""
        return None

    def supports(self, work, mode):
        """None, or why this implementation does not run `work` in `mode` (the row is recorded as skipped)."""
        if work.op not in self.ops:
            return f"{self.name} offers no {work.op} (it offers {', '.join(self.ops)})"
        if mode == "fwdbwd" and self.forward_only:
            return f"{self.name} has no backward"
        return None

    def forward(self, work, t):
        """The op's output o for inputs `t` (work.tensors or copies of them)."""
        raise NotImplementedError

    def decode_step(self, work, t):
        """A decode op's step on inputs `t` (bench/decode.py): (o, the state after it)."""
        raise NotImplementedError

    def grad_enabled(self, work, mode):
        """Whether the timed forward runs with inputs that need gradients (a training forward)."""
        return mode != "infer" and not self.forward_only

    def prepare(self, work, mode):
        """What one sample of a cell calls, on leaf copies of the inputs: fwd (the training forward: inputs that
        need gradients), fwdbwd (forward, then autograd backward with a fixed random do), infer (no grad); a
        forward-only implementation's fwd runs without grad."""
        grad = self.grad_enabled(work, mode)
        ti = {n: x.detach().clone().requires_grad_(grad and x.is_floating_point()) for n, x in work.tensors.items()}
        o = self.forward(work, ti)
        if mode == "fwdbwd":  # the same do for every implementation, whatever ran before
            gen = torch.Generator(device=o.device).manual_seed(DO_SEED)
            do = torch.randn(o.shape, generator=gen, device=o.device, dtype=torch.float32).to(o.dtype)
            leaves = [x for x in ti.values() if x.requires_grad]
            fn = lambda: torch.autograd.grad(self.forward(work, ti), leaves, do)  # noqa: E731
            fn()
            return fn
        if grad:
            return lambda: self.forward(work, ti)

        def no_grad_fn():
            with torch.no_grad():
                return self.forward(work, ti)
        return no_grad_fn

    def output(self, work):
        """The output compared with the reference: one call on the shared inputs, without grad."""
        with torch.no_grad():
            return self.forward(work, work.tensors).float()

    def version(self):
        """The imported package's __version__, else its distribution's (FLA ships as more than one)."""
        top = self.module_name.split(".")[0] if self.module_name else None
        found = getattr(importlib.import_module(top), "__version__", None) if self.module is not None and top else None
        if found or not self.package:
            return found
        try:
            return importlib.metadata.version(self.package)
        except importlib.metadata.PackageNotFoundError:
            return None

    def describe(self, device):
        ok, why = self.available(device)
        return dict(name=self.name, label=self.label, available=ok, reason=why, version=self.version() if ok else None,
                    ops=list(self.ops), forward_only=self.forward_only)


def import_module(name):
    """(module, None) or (None, why the import failed)."""
    try:
        return importlib.import_module(name), None
    except Exception as e:  # noqa: BLE001 - any import failure makes the plugin unavailable, with its reason
        return None, f"`import {name}` failed: {type(e).__name__}: {e}"


def need_cuda_arch(device, majors, who):
    """None, or why `device` is not a CUDA device of compute capability major in `majors`."""
    if device.type != "cuda":
        return f"{who} runs on CUDA tensors only (the run's device is {device.type})"
    if not torch.cuda.is_available():
        return "no CUDA device is visible"
    major, minor = torch.cuda.get_device_capability(device)
    if major not in majors:
        return f"{who} needs compute capability {' or '.join(f'{m}.x' for m in majors)}, this GPU is {major}.{minor}"
    return None
