"""What one cell of the side by side runs on: the shape grammar, FLA's input transforms from one seed,
the longtail varlen set, the roofline floor of a cell, and the FLA keywords every implementation is given."""
import dataclasses

import torch
import torch.nn.functional as F

OPS = ("chunk_gla", "chunk_kda", "chunk_gdn")
# fwd: the training forward (inputs need gradients); fwdbwd: forward and backward; infer: the forward without grad
# (what a forward-only implementation's fwd is, so infer compares every implementation on the same call)
MODES = ("fwd", "fwdbwd", "infer")
# FLA's benchmarks/ops/registry.py default shapes
DEFAULT_SHAPES = ["B1_T8192_H96_D128", "B2_T16384_H16_D128", "B4_T2048_H16_D128", "B4_T4096_H64_D128",
                  "B8_T2048_H32_D256", "B8_T1024_H8_D64"]
HBM_GBPS = 4300.0  # measured device copy on the lent H200 (anchors/README.md)
TC_TFLOPS = 790.0
# --gate: how chunk_kda receives its gate. precomputed: logsigmoid(x) clamped by safe_gate's lower bound, beta
# after its sigmoid (FLA's registry). in_kernel: the raw gate with A_log / dt_bias and beta logits, the gate and
# the sigmoid computed in the kernel (what FLA's KDA layer passes, and the only form FlashKDA takes).
GATES = ("precomputed", "in_kernel")
# --safe-gate: chunk_kda with safe_gate=True and lower_bound -5 (FLA's registry, on) or neither (off: FLA's KDA
# layer default, where lina checks each chunk's gates itself, docs/math.md section 5)
SAFE_GATE = ("on", "off")
KDA_LOWER_BOUND = -5.0


def parse_shape(name):
    """B<b>_T<t>_H<h>_D<d> (other parts, e.g. varlen_longtail, are labels) -> (B, T, H, D)."""
    parts = dict((p[0], int(p[1:])) for p in name.split("_") if p and p[0] in "BTHD" and p[1:].isdigit())
    missing = [k for k in "BTHD" if k not in parts]
    if missing:
        raise ValueError(f"--shapes: '{name}' has no {', '.join(missing)} part; expected e.g. B4_T2048_H16_D128")
    return parts["B"], parts["T"], parts["H"], parts["D"]


def floor_us(op, tokens_heads, d):
    """anchors/README.md 'Floors': bytes per token-head in the forward, and FLOPs with C = 64."""
    C = 64
    byts = {"chunk_gla": 10 * d, "chunk_kda": 10 * d + 2, "chunk_gdn": 8 * d + 4}[op] * tokens_heads
    flops = (4 * C * d + 4 * d * d if op == "chunk_gla" else 10 * C * d + 6 * d * d + C * C) * tokens_heads
    return byts, flops, max(byts / (HBM_GBPS * 1e3), flops / (TC_TFLOPS * 1e6))


def longtail_cu(total, seed):
    """Many short sequences plus a few long ones, packed to exactly `total` tokens."""
    g = torch.Generator().manual_seed(seed)
    lens, left = [], total
    while left > 0:
        long = torch.rand(1, generator=g).item() < 0.1
        n = int(torch.randint(2048, 8192, (1,), generator=g)) if long else int(torch.randint(16, 512, (1,), generator=g))
        n = min(n, left)
        lens.append(n)
        left -= n
    cu = [0]
    for n in lens:
        cu.append(cu[-1] + n)
    return torch.tensor(cu, dtype=torch.int32)


@dataclasses.dataclass
class Workload:
    """One cell's inputs, shared by every implementation (they copy, never modify, them)."""
    op: str
    shape: str
    B: int
    T: int
    H: int
    D: int
    gate: str
    tensors: dict  # q, k, v, g, beta (delta rules), A_log and dt_bias (chunk_kda with the in-kernel gate)
    cu: torch.Tensor = None  # cu_seqlens (int32, on the tensors' device) for a varlen cell, else None
    safe_gate: bool = True  # chunk_kda: safe_gate=True, lower_bound -5 (else neither)

    @property
    def device(self):
        return self.tensors["q"].device

    @property
    def varlen(self):
        return self.cu is not None

    @property
    def num_seqs(self):
        return self.cu.numel() - 1 if self.varlen else self.B

    def fla_flags(self):
        """The keywords of FLA's signature that define this op's math (lina and FLA-signature peers take them)."""
        if self.op == "chunk_gla":
            return {}
        flags = dict(use_qk_l2norm_in_kernel=True)
        if self.op == "chunk_kda":
            if self.safe_gate:
                flags.update(safe_gate=True, lower_bound=KDA_LOWER_BOUND)
            if self.gate == "in_kernel":
                flags.update(use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True)
        return flags

    def shape_keys(self):
        return dict(B=self.B, T=self.T, H=self.H, HV=self.H, K=self.D, V=self.D,
                    varlen="longtail" if self.varlen else None, num_seqs=self.num_seqs)


def make_workload(op, shape, seed, device, gate="precomputed", cu=None, safe_gate=True):
    """FLA's registry transforms from torch seed `seed`: q, k, v ~ N(0, 1) bf16; GLA g = logsigmoid clamped at
    -5; delta g = logsigmoid (GDN: one per head); beta = sigmoid(N(0, 1))."""
    B, T, H, D = parse_shape(shape)
    torch.manual_seed(seed)
    dt = torch.bfloat16
    q, k, v = (torch.randn(B, T, H, D, device=device, dtype=dt) for _ in range(3))
    x = torch.randn(B, T, H, D if op != "chunk_gdn" else 1, device=device, dtype=dt)
    if op == "chunk_gla":
        t = dict(q=q, k=k, v=v, g=F.logsigmoid(x.float()).clamp_min(-5).to(dt))
    elif op == "chunk_kda" and gate == "in_kernel":
        beta = torch.randn(B, T, H, device=device, dtype=torch.float32).to(dt)
        A_log = torch.empty(H, device=device, dtype=torch.float32).uniform_(1, 16).log()
        dt_bias = torch.randn(H * D, device=device, dtype=torch.float32) * 0.5
        t = dict(q=q, k=k, v=v, g=x, beta=beta, A_log=A_log, dt_bias=dt_bias)
    else:
        g = F.logsigmoid(x.float()).to(dt)
        if op == "chunk_gdn":
            g = g.squeeze(-1)
        beta = torch.sigmoid(torch.randn(B, T, H, device=device, dtype=torch.float32)).to(dt)
        t = dict(q=q, k=k, v=v, g=g, beta=beta)
    return Workload(op=op, shape=shape, B=B, T=T, H=H, D=D, gate=gate if op == "chunk_kda" else "precomputed",
                    tensors=t, cu=None if cu is None else cu.to(device), safe_gate=safe_gate or op != "chunk_kda")
