"""Smoke test of an installed lina wheel (scripts/test-package.sh runs it from outside the source tree).

Checks that `lina` is the installed package, that its extension lina/_C.so loads into torch, and,
where the package has FLA's chunk_gla, one CPU call against a float64 recurrence written here.
Exits non-zero with the reason on the first failure.
"""

import importlib.metadata
import pathlib
import sys
import sysconfig

import torch

import lina


def fail(message: str) -> None:
    print(f"smoke_test: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def check_installed_package(expected_version: str) -> pathlib.Path:
    package_dir = pathlib.Path(lina.__file__).resolve().parent
    site_dir = pathlib.Path(sysconfig.get_paths()["platlib"]).resolve()
    if package_dir.parent != site_dir:
        fail(f"lina was imported from {package_dir}, expected the installed package in {site_dir}")
    version = importlib.metadata.version("lina")
    if version != expected_version:
        fail(f"installed lina has version {version}, expected {expected_version} (project() in CMakeLists.txt)")
    print(f"smoke_test: lina {version} from {package_dir}")
    return package_dir


def check_extension_loads(package_dir: pathlib.Path) -> None:
    extension = package_dir / "_C.so"
    if not extension.is_file():
        fail(f"{extension} is missing from the wheel")
    # Raises when the library does not load (an undefined symbol, another torch's ABI).
    torch.ops.load_library(str(extension))
    print(f"smoke_test: {extension.name} loaded into torch {torch.__version__}")


def gla_recurrence(q, k, v, g, scale, initial_state):
    """S_t = diag(exp(g_t)) S_{t-1} + k_t v_t^T, o_t = S_t^T (scale q_t); [B,T,H,K] inputs, float64."""
    batch, steps, heads, _ = q.shape
    state = initial_state.double().clone()
    outputs = torch.empty(batch, steps, heads, v.shape[-1], dtype=torch.float64)
    for t in range(steps):
        decay = g[:, t].double().exp().unsqueeze(-1)
        state = decay * state + k[:, t].double().unsqueeze(-1) * v[:, t].double().unsqueeze(-2)
        outputs[:, t] = torch.einsum("bhk,bhkv->bhv", scale * q[:, t].double(), state)
    return outputs, state


def error_ratio(reference, output):
    """RMS(reference - output) / RMS(reference), the error ratio of FLA's assert_close."""
    diff = (reference - output.double()).square().mean().sqrt()
    return (diff / (reference.square().mean().sqrt() + 1e-8)).item()


def check_chunk_gla_on_cpu() -> None:
    if not hasattr(lina, "chunk_gla"):
        print("smoke_test: lina.chunk_gla not in this package yet: no op call")
        return
    generator = torch.Generator().manual_seed(36)
    batch, steps, heads, key_dim, value_dim = 2, 70, 2, 16, 8
    q = torch.rand(batch, steps, heads, key_dim, generator=generator)
    k = torch.rand(batch, steps, heads, key_dim, generator=generator)
    v = torch.rand(batch, steps, heads, value_dim, generator=generator)
    g = -0.2 * torch.rand(batch, steps, heads, key_dim, generator=generator)
    h0 = torch.rand(batch, heads, key_dim, value_dim, generator=generator)
    o, ht = lina.chunk_gla(q, k, v, g, initial_state=h0, output_final_state=True)
    o_ref, ht_ref = gla_recurrence(q, k, v, g, key_dim**-0.5, h0)
    tolerance = 1e-5
    errors = {"o": error_ratio(o_ref, o), "final_state": error_ratio(ht_ref, ht)}
    print(f"smoke_test: lina.chunk_gla on CPU, error ratios {errors} (tolerance {tolerance:g})")
    # `not <` so that a NaN fails too.
    bad = {name: err for name, err in errors.items() if not err < tolerance}
    if bad:
        fail(f"lina.chunk_gla differs from the float64 recurrence: {bad}, tolerance {tolerance:g}")


def main() -> None:
    if len(sys.argv) != 2:
        fail(f"usage: smoke_test.py EXPECTED_VERSION, got arguments {sys.argv[1:]}")
    package_dir = check_installed_package(sys.argv[1])
    check_extension_loads(package_dir)
    check_chunk_gla_on_cpu()
    print("smoke_test: ok")


if __name__ == "__main__":
    main()
