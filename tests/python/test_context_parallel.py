"""lina.context_parallel: the segment-and-combine path of chunk_gla / chunk_kda / chunk_gated_delta_rule over
simulated ranks (1 to 4, and uneven segments) against the unsplit lina op and the float64 recurrence (values,
final states and every gradient), varlen sequences crossing 0, 1, 2 and 3 borders, borders on sequence
boundaries, zero-length sequences; the rank plans by hand; argument errors; and two real ranks through
torch.distributed with gloo; on machines with GPUs, simulated ranks on CUDA and two NCCL ranks. No timing.
    python -m unittest discover -s tests/python -p test_context_parallel.py -v
"""
import os
import socket
import sys
import tempfile
import unittest

import torch

sys.path.insert(0, os.path.dirname(__file__))
import naive  # noqa: E402
# FLA's metric and tolerance against the float64 recurrence, and the inputs, shared with the unsplit op's tests
from test_torch_ops import TOL, err_ratio, inputs  # noqa: E402

import lina  # noqa: E402
from lina import context_parallel as cp  # noqa: E402

# Against the unsplit lina op the split only reorders float32 sums: at most 5e-6 measured on these cases.
UNSPLIT_TOL = 1e-4

DENSE_SPLITS = (1, 2, 3, 4, [1, 76])
# cu_seqlens of 150 tokens: zero-length sequences at the start, in the middle and at the end; sequence 3 spans
# [7, 120). Even splits put 1 (R=2), 2 (R=3) and 3 (R=4) borders inside it; [7, 113, 30] puts the borders
# exactly on sequence boundaries (with a zero-length sequence on the first); [3, 4, 143] cuts the short one.
VARLEN_CU = [0, 0, 7, 7, 120, 150, 150]
VARLEN_SPLITS = (1, 2, 3, 4, [7, 113, 30], [3, 4, 143])


def run_with_grads(fn, tensors, names, seed=1):
    """fn(**leaves) -> (o, ht); backward of a fixed random projection of both; returns (o, ht, {name: grad})."""
    leaves = {n: t.detach().clone().requires_grad_(True) for n, t in zip(names, tensors)}
    o, ht = fn(**leaves)
    gen = torch.Generator().manual_seed(seed)
    loss = (o.double() * torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.device)).sum()
    if ht is not None:
        loss = loss + (ht.double() * torch.randn(ht.shape, generator=gen, dtype=torch.float64).to(o.device)).sum()
    loss.backward()

    def cpu(t):
        return None if t is None else t.detach().cpu()
    return cpu(o), cpu(ht), {n: cpu(x.grad) for n, x in leaves.items()}


class Case(unittest.TestCase):
    def assert_close(self, name, ref, out, tol):
        self.assertEqual(tuple(ref.shape), tuple(out.shape), name)
        r = err_ratio(ref, out)
        self.assertLessEqual(r, tol, f"{name}: error ratio {r:.2e} above {tol}")

    def assert_same_run(self, label, ref, out, tol):
        o1, h1, g1 = ref
        o2, h2, g2 = out
        self.assert_close(f"{label} o", o1, o2, tol)
        if h1 is not None:
            self.assertIsNotNone(h2, f"{label}: no final state")
            self.assert_close(f"{label} final_state", h1, h2, tol)
        for n, grad in g1.items():
            if grad is not None:
                self.assertIsNotNone(g2[n], f"{label}: no gradient for {n}")
                self.assert_close(f"{label} d{n}", grad, g2[n], tol)

    def check_splits(self, cp_fn, full_fn, ref_fn, tensors, names, splits):
        """cp_fn(ranks=split, **tensors) for every split against full_fn (the unsplit lina op) and ref_fn (the
        float64 recurrence): outputs, final states and the gradients of every input."""
        ref = run_with_grads(ref_fn, tensors, names)
        full = run_with_grads(full_fn, tensors, names)
        self.assert_same_run("unsplit lina vs float64", ref, full, TOL)
        for split in splits:
            out = run_with_grads(lambda **xs: cp_fn(ranks=split, **xs), tensors, names)
            self.assert_same_run(f"ranks={split} vs float64", ref, out, TOL)
            self.assert_same_run(f"ranks={split} vs unsplit", full, out, UNSPLIT_TOL)


class GlaTest(Case):
    def test_dense_with_states(self):
        q, k, v, g, _ = inputs(0, 2, 77, 2, 16, 8)
        h0 = torch.randn(2, 2, 16, 8)
        self.check_splits(
            lambda ranks, q, k, v, g, h0: cp.chunk_gla_cp(q, k, v, g, ranks=ranks, initial_state=h0,
                                                          output_final_state=True),
            lambda q, k, v, g, h0: lina.chunk_gla(q, k, v, g, initial_state=h0, output_final_state=True),
            lambda q, k, v, g, h0: naive.gla(q, k, v, g, initial_state=h0),
            (q, k, v, g, h0), ("q", "k", "v", "g", "h0"), DENSE_SPLITS)

    def test_varlen_across_borders_state_v_first(self):
        q, k, v, g, _ = inputs(1, 1, 150, 2, 16, 8)
        cu = torch.tensor(VARLEN_CU, dtype=torch.int32)
        h0 = torch.randn(6, 2, 16, 8)
        flip = (lambda o, h: (o, h.transpose(-1, -2)))
        self.check_splits(
            lambda ranks, q, k, v, g, h0: cp.chunk_gla_cp(q, k, v, g, ranks=ranks, initial_state=h0.transpose(-1, -2),
                                                          output_final_state=True, state_v_first=True, cu_seqlens=cu),
            lambda q, k, v, g, h0: lina.chunk_gla(q, k, v, g, initial_state=h0.transpose(-1, -2),
                                                  output_final_state=True, state_v_first=True, cu_seqlens=cu),
            lambda q, k, v, g, h0: flip(*naive.gla(q, k, v, g, initial_state=h0, cu_seqlens=cu)),
            (q, k, v, g, h0), ("q", "k", "v", "g", "h0"), VARLEN_SPLITS)


KDA_LAYER = dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True)


class DeltaCase(Case):
    def check_delta(self, kda, tensors, splits, final=True, **flags):
        """check_splits of chunk_kda_cp (kda) or chunk_gdn_cp: `tensors` by keyword (q, k, v, g, beta and any
        of A_log, dt_bias, initial_state), each differentiated; `flags` the other keywords, for all three."""
        cp_fn, full_fn = (cp.chunk_kda_cp, lina.chunk_kda) if kda else (cp.chunk_gdn_cp, lina.chunk_gdn)

        def ref(**xs):
            o, ht = naive.delta(kda=kda, **xs, **flags)
            return o, (ht if final else None)
        self.check_splits(lambda ranks, **xs: cp_fn(ranks=ranks, output_final_state=final, **xs, **flags),
                          lambda **xs: full_fn(output_final_state=final, **xs, **flags), ref,
                          tuple(tensors.values()), tuple(tensors), splits)

    def check_dense_layer_call(self, kda, seed):
        # FLA's layer call: raw gate with A_log / dt_bias, beta logits, l2norm, 2 value heads per q/k head
        q, k, v, g, beta = inputs(seed, 2, 77, 1, 16, 8, HV=2, kda=kda, gate_raw=True)
        gen = torch.Generator().manual_seed(seed)
        A_log = torch.randn(2, generator=gen) * 0.3
        dt_bias = torch.randn(2 * 16 if kda else 2, generator=gen) * 0.3
        h0 = torch.randn(2, 2, 16, 8, generator=gen) * 0.1
        self.check_delta(kda, dict(q=q, k=k, v=v, g=g, beta=beta, A_log=A_log, dt_bias=dt_bias, initial_state=h0),
                         DENSE_SPLITS, **KDA_LAYER)

    def check_varlen(self, kda, seed, H, HV):
        q, k, v, g, beta = inputs(seed, 1, 150, H, 16, 8, HV=HV, kda=kda)
        h0 = torch.randn(6, HV, 16, 8, generator=torch.Generator().manual_seed(seed)) * 0.1
        self.check_delta(kda, dict(q=q, k=k, v=v, g=g, beta=beta, initial_state=h0), VARLEN_SPLITS,
                         cu_seqlens=torch.tensor(VARLEN_CU), use_qk_l2norm_in_kernel=True)


class KdaTest(DeltaCase):
    def test_dense_gva_in_kernel_gate(self):
        self.check_dense_layer_call(kda=True, seed=2)

    def test_varlen_across_borders(self):
        self.check_varlen(kda=True, seed=3, H=2, HV=2)

    def test_varlen_without_initial_state_or_final_state(self):
        # the carried state is the only initial state given; the rest of the rank's sequences start at zero
        q, k, v, g, beta = inputs(4, 1, 150, 2, 16, 8)
        self.check_delta(True, dict(q=q, k=k, v=v, g=g, beta=beta), (3, 4), final=False,
                         cu_seqlens=torch.tensor(VARLEN_CU, dtype=torch.int32), use_qk_l2norm_in_kernel=True)


class GdnTest(DeltaCase):
    def test_dense_gva_in_kernel_gate(self):
        self.check_dense_layer_call(kda=False, seed=5)

    def test_varlen_gva_across_borders(self):
        self.check_varlen(kda=False, seed=6, H=1, HV=2)


class PlanTest(unittest.TestCase):
    """The rank plans of VARLEN_CU, worked out by hand."""

    def test_sequence_across_three_borders(self):
        plans = cp.plan_ranks([38, 38, 37, 37], VARLEN_CU, 1)
        # rank 0 holds the empty sequence 0, sequence 1, the empty 2 and the start of 3
        self.assertEqual((plans[0].seq_ids, plans[0].local_cu), ((0, 1, 2, 3), (0, 0, 7, 7, 38)))
        self.assertEqual((plans[0].carry_in, plans[0].carry_out, plans[0].owned), (False, True, 3))
        for p in plans[1:3]:  # inside sequence 3: the incoming state passes through
            self.assertEqual((p.seq_ids, p.carry_in, p.carry_out, p.passes_through, p.owned),
                             ((3,), True, True, True, 0))
        # the last rank ends sequence 3 at local 120 - 113 = 7, holds 4 and the empty 5 at its end
        self.assertEqual((plans[3].seq_ids, plans[3].local_cu), ((3, 4, 5), (0, 7, 37, 37)))
        self.assertEqual((plans[3].carry_in, plans[3].carry_out, plans[3].owned), (True, False, 3))

    def test_borders_on_sequence_boundaries(self):
        plans = cp.plan_ranks([7, 113, 30], VARLEN_CU, 1)
        self.assertEqual([p.seq_ids for p in plans], [(0, 1), (2, 3), (4, 5)])
        self.assertEqual([(p.carry_in, p.carry_out) for p in plans], [(False, False)] * 3)
        self.assertEqual([p.owned for p in plans], [2, 2, 2])

    def test_dense(self):
        plans = cp.plan_ranks(cp.segment_lengths(10, 3), None, 2)
        self.assertEqual([(p.start, p.length) for p in plans], [(0, 4), (4, 3), (7, 3)])
        self.assertEqual([p.passes_through for p in plans], [False, True, False])
        self.assertEqual([p.owned for p in plans], [0, 0, 2])


class ArgumentsTest(unittest.TestCase):
    def setUp(self):
        self.q, self.k, self.v, self.g, self.beta = inputs(7, 1, 20, 2, 16, 8)

    def test_errors_name_the_argument(self):
        q, k, v, g, beta = self.q, self.k, self.v, self.g, self.beta
        cases = [
            ("`ranks`", dict()),                                    # neither ranks nor group
            ("`ranks`", dict(ranks=2, group=object())),             # both
            ("`ranks`", dict(ranks=0)),
            ("`ranks`", dict(ranks=21)),
            ("`ranks`", dict(ranks=[10, 9])),                       # does not sum to T
            ("`ranks`", dict(ranks=[20, 0])),
            ("`cu_seqlens`", dict(ranks=2, cu_seqlens=torch.tensor([0, 5, 19]))),
            ("`cu_seqlens`", dict(ranks=2, cu_seqlens=torch.tensor([0, 12, 5, 20]))),
            ("`initial_state`", dict(ranks=2, cu_seqlens=torch.tensor([0, 5, 20]),
                                     initial_state=torch.zeros(1, 2, 16, 8))),
            ("`beta`", dict(ranks=2, beta_override=beta[:, :10])),
        ]
        for name, kw in cases:
            b = kw.pop("beta_override", beta)
            with self.subTest(kw=kw), self.assertRaisesRegex(ValueError, name):
                cp.chunk_kda_cp(q, k, v, g, b, **kw)
        with self.assertRaisesRegex(ValueError, "`q`"):
            cp.chunk_gla_cp(*(torch.cat([x, x]) for x in (q, k, v, g)), ranks=2, cu_seqlens=torch.tensor([0, 20]))
        with self.assertRaisesRegex(NotImplementedError, "`cp_context`"):
            cp.chunk_kda_cp(q, k, v, g, beta, ranks=2, cp_context=object())
        with self.assertRaisesRegex(TypeError, "bogus"):
            cp.chunk_gdn_cp(q, k, v, g[..., 0], beta, ranks=2, bogus=1)


# ---- two real ranks through torch.distributed (gloo) ----------------------------------------------------------

def _distributed_cases(K, V):
    """(name, cp function, unsplit function, tensors, names of the tensors every rank holds in full, keywords,
    cu list): KDA varlen with sequences across the border, GLA and GDN dense."""
    gen = torch.Generator().manual_seed(12)  # the same tensors in every rank's process
    q, k, v, g, beta = inputs(8, 1, 150, 1, K, V, HV=2, gate_raw=True)
    A_log, dt_bias = torch.randn(2, generator=gen) * 0.3, torch.randn(2 * K, generator=gen) * 0.3
    cu = [0, 30, 140, 150]
    h0 = torch.randn(3, 2, K, V, generator=gen) * 0.1
    kda = ("kda varlen", cp.chunk_kda_cp, lina.chunk_kda,
           dict(q=q, k=k, v=v, g=g, beta=beta, A_log=A_log, dt_bias=dt_bias, initial_state=h0),
           ("A_log", "dt_bias", "initial_state"),
           dict(cu_seqlens=torch.tensor(cu), output_final_state=True, **KDA_LAYER), cu)
    q, k, v, g, _ = inputs(9, 2, 77, 2, K, V)
    h0 = torch.randn(2, 2, K, V, generator=gen)
    gla = ("gla dense", cp.chunk_gla_cp, lina.chunk_gla, dict(q=q, k=k, v=v, g=g, initial_state=h0),
           ("initial_state",), dict(output_final_state=True), None)
    q, k, v, g, beta = inputs(10, 2, 77, 1, K, V, HV=2, kda=False)
    gdn = ("gdn dense", cp.chunk_gdn_cp, lina.chunk_gdn, dict(q=q, k=k, v=v, g=g, beta=beta),
           (), dict(output_final_state=True, use_qk_l2norm_in_kernel=True), None)
    return kda, gla, gdn


def _on_device(cases, device):
    """The cases with q, k, v rounded to bf16 (what lina's CUDA kernels take; chunk_gla's g too, its CUDA kernels
    read a bf16 gate): (case, function moving a tensor of it to `device`). On the CPU nothing changes."""
    on_gpu = device.type == "cuda"
    for name, cp_fn, full_fn, tensors, replicated, kw, cu in cases:
        rounded = ("q", "k", "v", "g") if name.startswith("gla") else ("q", "k", "v")
        if on_gpu:
            tensors = {n: (t.bfloat16().float() if n in rounded else t) for n, t in tensors.items()}

        def move(n, t, on_gpu=on_gpu, rounded=rounded):
            t = t.to(device)
            return t.bfloat16() if on_gpu and n in rounded else t
        kw_dev = {n: (x.to(device) if isinstance(x, torch.Tensor) else x) for n, x in kw.items()}
        yield (name, cp_fn, full_fn, tensors, replicated, kw, cu), move, kw_dev


def _distributed_worker(rank, world, port, out_dir, backend):
    import torch.distributed as dist
    torch.set_num_threads(1)
    on_gpu = backend == "nccl"
    if on_gpu:
        torch.cuda.set_device(rank)
    device = torch.device("cuda", rank) if on_gpu else torch.device("cpu")
    try:
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    except Exception as e:  # no usable local network here: the test skips with the reason
        with open(os.path.join(out_dir, f"init-error-{rank}"), "w") as f:
            f.write(repr(e))
        return
    ratios = {}
    K, V = (64, 64) if on_gpu else (16, 8)  # the CUDA kernels' smallest head size
    for case, move, kw_dev in _on_device(_distributed_cases(K, V), device):
        name, cp_fn, full_fn, tensors, replicated, kw, cu = case
        T = tensors["q"].shape[1]
        plans = cp.plan_ranks(cp.segment_lengths(T, world), cu, tensors["q"].shape[0])
        mine = plans[rank]
        # the reference: the unsplit op on the CPU, float32
        gen = torch.Generator().manual_seed(11)
        full_leaves = {n: t.clone().requires_grad_(True) for n, t in tensors.items()}
        o, ht = full_fn(**full_leaves, **kw)
        wo, wh = torch.randn(o.shape, generator=gen), torch.randn(ht.shape, generator=gen)
        ((o * wo).sum() + (ht * wh).sum()).backward()

        def local(n, t):
            return t if n in replicated else t[:, mine.start:mine.start + mine.length]
        leaves = {n: move(n, local(n, t)).detach().clone().requires_grad_(True) for n, t in tensors.items()}
        o_r, ht_r = cp_fn(group=dist.group.WORLD, **leaves, **kw_dev)
        rows = list(range(mine.owned)) if mine.dense else list(mine.seq_ids[:mine.owned])
        loss = (o_r.float() * local("o", wo).to(device)).sum() + (ht_r * wh[rows].to(device)).sum()
        loss.backward()
        ratios[f"{name} o"] = err_ratio(local("o", o.detach()), o_r.detach().cpu())
        if rows:
            ratios[f"{name} final_state"] = err_ratio(ht.detach()[rows], ht_r.detach().cpu())
        for n, leaf in leaves.items():
            grad = leaf.grad if leaf.grad is not None else torch.zeros_like(leaf)  # a rank may not use it
            if n in replicated:  # every rank holds its share of a replicated tensor's gradient: summed here
                dist.all_reduce(grad)
            ratios[f"{name} d{n}"] = err_ratio(local(n, full_leaves[n].grad), grad.cpu())
    torch.save(ratios, os.path.join(out_dir, f"rank-{rank}.pt"))
    dist.destroy_process_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class DistributedTest(unittest.TestCase):
    WORLD = 2

    def run_ranks(self, backend, tol):
        """Runs _distributed_worker on WORLD spawned processes; asserts every rank's ratios against `tol`."""
        import torch.multiprocessing as mp
        with tempfile.TemporaryDirectory() as out_dir:
            try:
                context = mp.start_processes(_distributed_worker, args=(self.WORLD, _free_port(), out_dir, backend),
                                             nprocs=self.WORLD, join=False, start_method="spawn")
            except (OSError, RuntimeError) as e:
                self.skipTest(f"cannot spawn {self.WORLD} processes: {e!r}")
            # a hang guard, not a timed assertion: a deadlocked collective would otherwise block the suite
            for _ in range(180):
                if context.join(timeout=1):
                    break
            else:
                for p in context.processes:
                    p.kill()
                self.fail(f"the {backend} ranks did not finish within 3 minutes (a collective not every rank joined)")
            errors = [f for f in os.listdir(out_dir) if f.startswith("init-error")]
            if errors:
                with open(os.path.join(out_dir, errors[0])) as f:
                    self.skipTest(f"{backend} could not start on 127.0.0.1: {f.read()}")
            for rank in range(self.WORLD):
                ratios = torch.load(os.path.join(out_dir, f"rank-{rank}.pt"))
                self.assertGreater(len(ratios), 10)
                for name, r in ratios.items():
                    self.assertLessEqual(r, tol, f"{backend} rank {rank} {name}: error ratio {r:.2e} against the "
                                         "unsplit op")

    def test_gloo_ranks_match_the_unsplit_op(self):
        self.run_ranks("gloo", UNSPLIT_TOL)

    @unittest.skipUnless(torch.cuda.device_count() >= 2, "fewer than 2 CUDA devices")
    def test_nccl_ranks_match_the_unsplit_op(self):
        # bf16 q, k, v on the GPUs against the float32 CPU op: FLA's tolerance; NVLink multicast stays off
        os.environ["NCCL_NVLS_ENABLE"] = "0"
        self.run_ranks("nccl", TOL)


@unittest.skipUnless(torch.cuda.is_available(), "no CUDA device")
class CudaTest(Case):
    def test_simulated_ranks_on_cuda(self):
        # bf16 q, k, v through lina's CUDA kernels against the float32 CPU op, FLA's tolerance
        device = torch.device("cuda")
        for case, move, kw_dev in _on_device(_distributed_cases(64, 64), device):
            name, cp_fn, full_fn, tensors, _, kw, _ = case
            names = tuple(tensors)
            ref = run_with_grads(lambda **xs: full_fn(**xs, **kw), tuple(tensors.values()), names)
            on_dev = tuple(move(n, t) for n, t in tensors.items())
            for ranks in (2, 3, 4):
                out = run_with_grads(lambda **xs: cp_fn(ranks=ranks, **xs, **kw_dev), on_dev, names)
                self.assert_same_run(f"{name} cuda ranks={ranks}", ref, out, TOL)


if __name__ == "__main__":
    unittest.main()
