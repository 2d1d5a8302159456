"""lina's PyTorch operators and FLA interface (python/lina): values and gradients against the float64
token-by-token recurrence, the FLA keywords, torch.compile, fake tensors, opcheck, and lina as FLA's backend.

Runs on the CPU backend everywhere; the CUDA cases skip themselves without a GPU. No timing.
    python -m unittest discover -s tests/python -v      (with lina installed, or LINA_TORCH_LIB set)
"""
import logging
import os
import sys
import unittest

import torch

sys.path.insert(0, os.path.dirname(__file__))
import naive  # noqa: E402

import lina  # noqa: E402
import lina.ops  # noqa: E402,F401  (loads torch.ops.lina)

# FLA's metric and its tolerance for these ops: RMS(ref - out) / RMS(ref).
TOL = 0.005
HAS_CUDA = torch.cuda.is_available()


def err_ratio(ref, out):
    ref, out = ref.double(), out.double()
    return ((ref - out).pow(2).mean().sqrt() / ref.pow(2).mean().sqrt().clamp_min(1e-30)).item()


def leaf(x, device="cpu"):
    return x.detach().to(device).clone().requires_grad_(True)


def inputs(seed, B, T, H, K, V, HV=None, kda=True, gate_raw=False):
    gen = torch.Generator().manual_seed(seed)
    HV = HV or H
    q = torch.randn(B, T, H, K, generator=gen)
    k = torch.randn(B, T, H, K, generator=gen)
    v = torch.randn(B, T, HV, V, generator=gen)
    gshape = (B, T, HV, K) if kda else (B, T, HV)
    g = torch.randn(*gshape, generator=gen) if gate_raw else -0.2 * torch.rand(*gshape, generator=gen)
    beta = torch.rand(B, T, HV, generator=gen)
    return q, k, v, g, beta


class Case(unittest.TestCase):
    def assert_close(self, name, ref, out, tol=TOL):
        self.assertEqual(tuple(ref.shape), tuple(out.shape), name)
        r = err_ratio(ref, out)
        self.assertLessEqual(r, tol, f"{name}: error ratio {r:.2e} above {tol}")

    def compare(self, lina_fn, ref_fn, tensors, names, weights_seed=1):
        """Runs both on leaf copies, backward of the same random projection of (o, final state), compares
        outputs and every gradient."""
        a = {n: leaf(t) for n, t in zip(names, tensors)}
        b = {n: leaf(t) for n, t in zip(names, tensors)}
        o1, h1 = lina_fn(**a)
        o2, h2 = ref_fn(**b)
        self.assert_close("o", o2, o1)
        gen = torch.Generator().manual_seed(weights_seed)
        wo = torch.randn(o2.shape, generator=gen, dtype=torch.float64)
        loss1 = (o1.double() * wo).sum()
        loss2 = (o2 * wo).sum()
        if h1 is not None:
            self.assert_close("final_state", h2, h1)
            wh = torch.randn(h2.shape, generator=gen, dtype=torch.float64)
            loss1 = loss1 + (h1.double() * wh).sum()
            loss2 = loss2 + (h2 * wh).sum()
        loss1.backward()
        loss2.backward()
        for n in names:
            if b[n].grad is not None:
                self.assertIsNotNone(a[n].grad, f"lina gave no gradient for {n}")
                self.assert_close("d" + n, b[n].grad, a[n].grad)


class GlaTest(Case):
    def test_forward_backward_with_states(self):
        q, k, v, g, _ = inputs(0, 2, 77, 2, 32, 16)
        h0 = torch.randn(2, 2, 32, 16)
        self.compare(lambda q, k, v, g, h0: lina.chunk_gla(q, k, v, g, initial_state=h0, output_final_state=True),
                     lambda q, k, v, g, h0: naive.gla(q, k, v, g, initial_state=h0),
                     (q, k, v, g, h0), ("q", "k", "v", "g", "h0"))

    def test_varlen_and_state_v_first(self):
        q, k, v, g, _ = inputs(1, 1, 150, 2, 16, 16)
        cu = torch.tensor([0, 10, 10, 150], dtype=torch.int64)
        h0 = torch.randn(3, 2, 16, 16)
        self.compare(lambda q, k, v, g, h0: lina.chunk_gla(q, k, v, g, initial_state=h0.transpose(-1, -2),
                                                           output_final_state=True, state_v_first=True,
                                                           cu_seqlens=cu),
                     lambda q, k, v, g, h0: (lambda o, h: (o, h.transpose(-1, -2)))(
                         *naive.gla(q, k, v, g, initial_state=h0, cu_seqlens=cu)),
                     (q, k, v, g, h0), ("q", "k", "v", "g", "h0"))


class KdaTest(Case):
    def test_l2norm_safe_inputs(self):
        q, k, v, g, beta = inputs(2, 2, 90, 2, 32, 32)
        self.compare(lambda q, k, v, g, beta: lina.chunk_kda(q, k, v, g, beta, use_qk_l2norm_in_kernel=True,
                                                             output_final_state=True),
                     lambda q, k, v, g, beta: naive.delta(q, k, v, g, beta, use_qk_l2norm_in_kernel=True),
                     (q, k, v, g, beta), ("q", "k", "v", "g", "beta"))

    def test_in_kernel_gate_beta_sigmoid_gva_varlen(self):
        # FLA's KDA layer call: raw gate with A_log / dt_bias, beta logits, l2norm, GVA (2 value heads per q/k head)
        q, k, v, g, beta = inputs(3, 1, 140, 1, 16, 32, HV=2, gate_raw=True)
        A_log = torch.randn(2) * 0.3
        dt_bias = torch.randn(2 * 16) * 0.3
        cu = torch.tensor([0, 60, 140], dtype=torch.int32)
        h0 = torch.randn(2, 2, 16, 32) * 0.1
        flags = dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True,
                     allow_neg_eigval=True)
        self.compare(lambda q, k, v, g, beta, A_log, dt_bias, h0: lina.chunk_kda(
                         q, k, v, g, beta, initial_state=h0, output_final_state=True, cu_seqlens=cu, A_log=A_log,
                         dt_bias=dt_bias, **flags),
                     lambda q, k, v, g, beta, A_log, dt_bias, h0: naive.delta(
                         q, k, v, g, beta, initial_state=h0, cu_seqlens=cu, A_log=A_log, dt_bias=dt_bias, **flags),
                     (q, k, v, g, beta, A_log, dt_bias, h0), ("q", "k", "v", "g", "beta", "A_log", "dt_bias", "h0"))

    def test_safe_gate_lower_bound(self):
        q, k, v, g, beta = inputs(4, 1, 70, 2, 16, 16, gate_raw=True)
        A_log = torch.randn(2) * 0.3
        flags = dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, safe_gate=True, lower_bound=-5.0)
        self.compare(lambda q, k, v, g, beta, A_log: lina.chunk_kda(q, k, v, g, beta, A_log=A_log, **flags),
                     lambda q, k, v, g, beta, A_log: naive.delta(
                         q, k, v, g, beta, A_log=A_log, use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True,
                         lower_bound=-5.0),
                     (q, k, v, g, beta, A_log), ("q", "k", "v", "g", "beta", "A_log"))


class GdnTest(Case):
    def test_gated_delta_rule_layer_call(self):
        # FLA's GatedDeltaNet layer call (state_v_first, in-kernel gate, beta sigmoid, l2norm)
        q, k, v, g, beta = inputs(5, 2, 80, 2, 32, 16, kda=False, gate_raw=True)
        A_log = torch.randn(2) * 0.3
        dt_bias = torch.randn(2) * 0.3
        flags = dict(use_qk_l2norm_in_kernel=True, use_beta_sigmoid_in_kernel=True)
        self.compare(lambda q, k, v, g, beta, A_log, dt_bias: lina.chunk_gated_delta_rule(
                         q=q, k=k, v=v, g=g, beta=beta, output_final_state=True, state_v_first=True,
                         use_gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias, **flags),
                     lambda q, k, v, g, beta, A_log, dt_bias: (lambda o, h: (o, h.transpose(-1, -2)))(*naive.delta(
                         q, k, v, g, beta, kda=False, use_gate_in_kernel=True, A_log=A_log, dt_bias=dt_bias, **flags)),
                     (q, k, v, g, beta, A_log, dt_bias), ("q", "k", "v", "g", "beta", "A_log", "dt_bias"))

    def test_non_contiguous_inputs(self):
        # q, k, v from one projection unbound along a middle axis: FLA accepts these, so does lina
        gen = torch.Generator().manual_seed(6)
        qkv = torch.randn(1, 70, 3, 2, 16, generator=gen)
        g = -0.1 * torch.rand(1, 70, 2, generator=gen)
        beta = torch.rand(1, 70, 2, generator=gen)
        q, k, v = qkv.unbind(2)
        self.assertFalse(q.is_contiguous())
        o, _ = lina.chunk_gated_delta_rule(q, k, v, g, beta, use_qk_l2norm_in_kernel=True)
        ref, _ = naive.delta(q, k, v, g, beta, kda=False, use_qk_l2norm_in_kernel=True)
        self.assert_close("o", ref, o)


class ReferenceOpTest(Case):
    """torch.ops.lina.*_reference: lina's fp64 host recurrence on CPU tensors (fp32 GPU recurrence on CUDA)."""

    def test_references_match_the_float64_recurrence(self):
        q, k, v, g, beta = inputs(15, 1, 90, 2, 16, 16)
        h0 = torch.randn(1, 2, 16, 16)
        ops = torch.ops.lina
        o, ht = ops.chunk_gla_reference(q, k, v, g, None, h0, True, None, None)
        ref_o, ref_h = naive.gla(q, k, v, g, initial_state=h0)
        self.assertEqual(o.dtype, torch.float64)
        self.assert_close("gla o", ref_o, o, tol=1e-10)
        self.assert_close("gla ht", ref_h, ht, tol=1e-10)
        o, ht = ops.chunk_kda_reference(q, k, v, g, beta, None, h0, True, True, False, False, False, False, None,
                                        None, None, None, None)
        ref_o, ref_h = naive.delta(q, k, v, g, beta, initial_state=h0, use_qk_l2norm_in_kernel=True)
        self.assert_close("kda o", ref_o, o, tol=1e-10)
        self.assert_close("kda ht", ref_h, ht, tol=1e-10)
        o, _ = ops.chunk_gdn_reference(q, k, v, g[..., 0], beta, None, None, False, True, False, False, False, None,
                                       None, None, None)
        ref_o, _ = naive.delta(q, k, v, g[..., 0], beta, kda=False, use_qk_l2norm_in_kernel=True)
        self.assert_close("gdn o", ref_o, o, tol=1e-10)


class ValueBlocksTest(Case):
    """A V wider than the CUDA kernels take runs as column blocks (lina.ops._v_blocks). The split is checked
    here on the CPU backend, forced to two blocks, against the unsplit call: values and gradients."""

    def test_blocks_match_the_unsplit_call(self):
        import lina.ops as lina_ops
        q, k, v, g, beta = inputs(12, 1, 70, 2, 16, 32, gate_raw=True)
        h0 = torch.randn(1, 2, 16, 32)
        A_log = torch.randn(2) * 0.3
        for fn, args, kw in ((lina.chunk_kda, (q, k, v, g, beta), dict(use_gate_in_kernel=True, A_log=A_log,
                                                                         use_qk_l2norm_in_kernel=True)),
                             (lina.chunk_gated_delta_rule, (q, k, v, g[..., 0], beta), dict(use_qk_l2norm_in_kernel=True)),
                             (lina.chunk_gla, (q, k, v, -F_softplus(g)), {})):
            results = []
            for split in (False, True):
                saved = lina_ops._v_blocks
                if split:
                    lina_ops._v_blocks = lambda v, gla: [16, 16]
                try:
                    xs = [leaf(t) for t in args] + [leaf(h0)]
                    o, ht = fn(*xs[:-1], initial_state=xs[-1], output_final_state=True, **kw)
                    (o.square().sum() + ht.sum()).backward()
                    results.append([o, ht] + [x.grad for x in xs])
                finally:
                    lina_ops._v_blocks = saved
            names = ["o", "ht"] + ["d" + n for n in ("q", "k", "v", "g", "beta")[:len(args)]] + ["dh0"]
            for name, a, b in zip(names, *results):
                self.assert_close(f"{fn.__name__} {name}", a, b, tol=1e-5)


def F_softplus(x):
    return torch.nn.functional.softplus(x)


class InterfaceTest(Case):
    def setUp(self):
        self.args = inputs(7, 1, 64, 2, 16, 16)

    def test_fla_keywords_refused_by_name(self):
        q, k, v, g, beta = self.args
        for kw in (dict(cp_context=object()), dict(return_intermediate_states=True), dict(use_graph=True),
                   dict(max_num_seqs=4), dict(chunk_size=32)):
            name = next(iter(kw))
            with self.assertRaisesRegex(NotImplementedError, f"`{name}`"):
                lina.chunk_kda(q, k, v, g, beta, **kw)
        with self.assertRaisesRegex(TypeError, "bogus"):
            lina.chunk_kda(q, k, v, g, beta, bogus=1)
        with self.assertRaisesRegex(NotImplementedError, "`cp_context`"):
            lina.chunk_gated_delta_rule(q, k, v, g[..., 0], beta, cp_context=object())

    def test_fla_keywords_honoured(self):
        q, k, v, g, beta = self.args
        o1, _ = lina.chunk_kda(q, k, v, g, beta)
        o2, _ = lina.chunk_kda(q, k, v, g, beta, disable_recompute=True, chunk_size=64, cu_seqlens_cpu=None)
        self.assertTrue(torch.equal(o1, o2))
        h0 = torch.randn(1, 2, 16, 16)
        _, h_a = lina.chunk_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True)
        # FLA's deprecated alias of state_v_first
        _, h_b = lina.chunk_kda(q, k, v, g, beta, initial_state=h0.transpose(-1, -2).contiguous(),
                                output_final_state=True, transpose_state_layout=True)
        self.assertTrue(torch.allclose(h_a, h_b.transpose(-1, -2)))

    def test_model_dtype_gate_parameters(self):
        # FLA's models hold A_log / dt_bias in the model's dtype; lina takes them and returns their gradients so
        q, k, v, g, beta = inputs(13, 1, 64, 2, 16, 16, gate_raw=True)
        A_log = (torch.randn(2) * 0.3).to(torch.float16).requires_grad_()
        o, _ = lina.chunk_kda(q, k, v, g, beta, use_gate_in_kernel=True, A_log=A_log, use_qk_l2norm_in_kernel=True)
        o.sum().backward()
        self.assertEqual(A_log.grad.dtype, torch.float16)
        ref, _ = naive.delta(q, k, v, g, beta, use_gate_in_kernel=True, A_log=A_log.detach().float(),
                             use_qk_l2norm_in_kernel=True)
        self.assert_close("o", ref, o)

    def test_bad_input_names_the_argument(self):
        q, k, v, g, beta = self.args
        with self.assertRaisesRegex(ValueError, "`k`"):
            lina.chunk_kda(q, k[..., :8], v, g, beta)
        with self.assertRaisesRegex(ValueError, "`beta`"):
            lina.chunk_kda(q, k, v, g, beta[:, :10])
        with self.assertRaisesRegex(ValueError, "`q`"):
            lina.chunk_gla(q[0], k, v, g)

    def test_meta_tensors(self):
        with torch.device("meta"):
            q, k, v = (torch.empty(1, 64, 2, 16) for _ in range(3))
            g, beta = torch.empty(1, 64, 2, 16), torch.empty(1, 64, 2)
            o, h = lina.chunk_kda(q, k, v, g, beta, output_final_state=True)
            self.assertEqual((o.device.type, tuple(o.shape), tuple(h.shape)), ("meta", (1, 64, 2, 16), (1, 2, 16, 16)))
            o, h = lina.chunk_gla(q, k, v, g)
            self.assertIsNone(h)

    def test_opcheck(self):
        # schema, fake kernel, autograd registration and AOT dispatch of each forward and backward operator
        q, k, v, g, beta = (t.clone().requires_grad_() for t in self.args)
        h0 = torch.randn(1, 2, 16, 16, requires_grad=True)
        ops = torch.ops.lina
        torch.library.opcheck(ops.chunk_gla_fwd.default, (q, k, v, g, None, h0, True, None, None, True, ""))
        torch.library.opcheck(ops.chunk_kda_fwd.default, (q, k, v, g, beta, None, h0, True, True, False, False, False,
                                                          False, None, None, None, None, None, True, ""))
        torch.library.opcheck(ops.chunk_gdn_fwd.default, (q, k, v, g[..., 0].detach().requires_grad_(), beta, None, h0,
                                                          True, True, False, False, False, None, None, None, None,
                                                          True, ""))
        # the backward operators have no derivative of their own: checked without gradients
        do = torch.randn(1, 64, 2, 16)
        plain = [t.detach() for t in (q, k, v, g, beta, h0)]
        torch.library.opcheck(ops.chunk_kda_bwd.default, (*plain[:5], None, plain[5], True, False, False, False, False,
                                                          None, None, None, None, None, do, None, False, False, ""))

    def test_double_backward_is_refused_by_name(self):
        q, k, v, g, beta = (t.clone().requires_grad_() for t in self.args)
        o, _ = lina.chunk_kda(q, k, v, g, beta, use_qk_l2norm_in_kernel=True)
        (dq,) = torch.autograd.grad(o.square().sum(), q, create_graph=True)
        with self.assertRaisesRegex(RuntimeError, "lina::chunk_kda_bwd"):
            dq.sum().backward()

    def test_compile_dynamic_shapes(self):
        def step(q, k, v, g, beta):
            o, h = lina.chunk_kda(q, k, v, g, beta, use_qk_l2norm_in_kernel=True, output_final_state=True)
            return o.square().mean() + h.mean()

        compiled = torch.compile(step, fullgraph=True, dynamic=True, backend="aot_eager")
        for T in (64, 100, 130):  # one graph with a symbolic T serves every length
            xs = [leaf(t) for t in inputs(14 + T, 1, T, 2, 16, 16)]
            ys = [leaf(t) for t in xs]
            a, b = compiled(*xs), step(*ys)
            a.backward()
            b.backward()
            self.assertTrue(torch.equal(a, b), f"T={T}")
            self.assertTrue(torch.equal(xs[0].grad, ys[0].grad), f"T={T}")

    def test_extension_records_its_torch(self):
        import lina._library as lib
        self.assertEqual(lib._minor(torch.ops.lina.torch_version()), lib._minor(torch.__version__))
        self.assertNotEqual(lib._minor("2.10.0+cu130"), lib._minor("2.11.0"))

    def test_compile_fullgraph_matches_eager(self):
        q, k, v, g, beta = self.args

        def step(q, k, v, g, beta):
            o, h = lina.chunk_kda(q, k, v, g, beta, use_qk_l2norm_in_kernel=True, output_final_state=True)
            return o.square().mean() + h.mean()

        compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
        a = [leaf(t) for t in (q, k, v, g, beta)]
        b = [leaf(t) for t in (q, k, v, g, beta)]
        la, lb = step(*a), compiled(*b)
        la.backward()
        lb.backward()
        self.assertTrue(torch.equal(la, lb))
        for x, y in zip(a, b):
            self.assertTrue(torch.equal(x.grad, y.grad))


@unittest.skipUnless(HAS_CUDA, "no CUDA device")
class CudaTest(Case):
    def test_cuda_matches_cpu_and_graph_replay(self):
        K = V = 64
        q, k, v, g, beta = (t.to(torch.bfloat16) if i < 3 else t for i, t in enumerate(inputs(8, 2, 200, 2, K, V)))
        dev = [t.cuda() for t in (q, k, v, g, beta)]
        o_cpu, _ = lina.chunk_kda(q.float(), k.float(), v.float(), g, beta, use_qk_l2norm_in_kernel=True)
        o_gpu, _ = lina.chunk_kda(*dev, use_qk_l2norm_in_kernel=True)
        self.assert_close("o", o_cpu, o_gpu.float().cpu())
        graph = torch.cuda.CUDAGraph()
        out = {}
        torch.cuda.synchronize()
        with torch.cuda.graph(graph):
            out["o"], _ = lina.chunk_kda(*dev, use_qk_l2norm_in_kernel=True)
        dev[2].mul_(2.0)  # new contents, same buffers: the replay must see them
        graph.replay()
        torch.cuda.synchronize()
        o2, _ = lina.chunk_kda(*dev, use_qk_l2norm_in_kernel=True)
        self.assertTrue(torch.equal(out["o"], o2))

    def test_scratch_comes_from_torch_allocator(self):
        q, k, v, g, beta = (t.cuda() for t in inputs(9, 1, 4096, 4, 128, 128))
        q, k, v = (x.to(torch.bfloat16).requires_grad_() for x in (q, k, v))
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        o, _ = lina.chunk_kda(q, k, v, g, beta, use_qk_l2norm_in_kernel=True)
        o.sum().backward()
        torch.cuda.synchronize()
        # the backward's scratch is far above its outputs and shows in torch's peak
        self.assertGreater(torch.cuda.max_memory_allocated() - base, 4 * o.numel() * o.element_size())


class FlaBackendCase(Case):
    """lina registered as FLA's backend and switched on for each test (skipped where FLA does not import)."""

    @classmethod
    def setUpClass(cls):
        try:
            import fla  # noqa: F401
        except Exception as e:  # FLA is optional; it needs triton and transformers
            raise unittest.SkipTest(f"fla not importable: {e}")
        import lina.fla_backend
        cls.backend = lina.fla_backend
        cls.backend.register()

    def setUp(self):
        # FLA reads its backend switches at every call; another test (the bench tool's) may have set this one off
        self._saved = os.environ.get("FLA_LINA")
        os.environ["FLA_LINA"] = "1"

    def tearDown(self):
        if self._saved is None:
            os.environ.pop("FLA_LINA", None)
        else:
            os.environ["FLA_LINA"] = self._saved


class FlaBackendTest(FlaBackendCase):
    def test_fla_functions_run_lina(self):
        from fla.ops.gated_delta_rule import chunk_gated_delta_rule
        from fla.ops.kda import chunk_kda
        q, k, v, g, beta = inputs(10, 1, 70, 2, 16, 16)
        o_fla, _ = chunk_kda(q=q, k=k, v=v, g=g, beta=beta, use_qk_l2norm_in_kernel=True)
        o_lina, _ = lina.chunk_kda(q, k, v, g, beta, use_qk_l2norm_in_kernel=True)
        self.assertTrue(torch.equal(o_fla, o_lina))
        o_fla, _ = chunk_gated_delta_rule(q=q, k=k, v=v, g=g[..., 0], beta=beta)
        o_lina, _ = lina.chunk_gated_delta_rule(q, k, v, g[..., 0], beta)
        self.assertTrue(torch.equal(o_fla, o_lina))
        import fla.layers.gla as gla_layer
        o_fla, _ = gla_layer.chunk_gla(q=q, k=k, v=v, g=g)
        o_lina, _ = lina.chunk_gla(q, k, v, g)
        self.assertTrue(torch.equal(o_fla, o_lina))

    def test_declines_with_the_reason(self):
        from fla.ops.kda import chunk_kda
        q, k, v, g, beta = inputs(11, 1, 64, 2, 16, 16)
        with self.assertLogs("fla.backends", level=logging.INFO) as logs:
            try:
                chunk_kda(q=q, k=k, v=v, g=g, beta=beta, chunk_size=32)
            except Exception:
                pass  # FLA's own Triton path then runs (and needs a GPU)
        self.assertTrue(any("chunk_size=32" in line for line in logs.output), logs.output)
        self.assertTrue(any("chunk_size=32" in reason for (_, reason) in self.backend.declines()))

    @unittest.skipUnless(torch.cuda.is_available(), "needs a GPU")
    def test_gla_declines_a_float32_gate_on_cuda(self):
        # lina's CUDA chunk_gla reads bf16 q and g: FLA keeps a float32 gate, so the call stays FLA's
        q, k, v, g, _ = inputs(12, 1, 64, 2, 64, 64)
        dev = dict(q=q.cuda().bfloat16(), k=k.cuda().bfloat16(), v=v.cuda().bfloat16())
        ok, reason = self.backend._gla_verifier(**dev, g=g.cuda())
        self.assertFalse(ok)
        self.assertIn("`g` dtype torch.float32", reason)
        ok, reason = self.backend._gla_verifier(**dev, g=g.cuda().bfloat16())
        self.assertTrue(ok, reason)


    @unittest.skipUnless(torch.cuda.is_available(), "needs a GPU")
    def test_gdn_training_goes_to_fla_where_its_backward_runs(self):
        import fla.ops.common.chunk_o as chunk_o
        q, k, v, g, beta = (t.cuda() for t in inputs(13, 1, 64, 2, 64, 64, kda=False))
        q, k, v = q.bfloat16(), k.bfloat16(), v.bfloat16()
        saved = chunk_o.TRITON_ABOVE_3_7_1
        try:
            chunk_o.TRITON_ABOVE_3_7_1 = True  # FLA's gated backward runs
            ok, reason = self.backend._gdn_verifier(q=q, k=k, v=v.requires_grad_(), g=g, beta=beta)
            self.assertFalse(ok)
            self.assertIn("training (`v` requires grad)", reason)
            with torch.no_grad():  # inference stays lina's
                self.assertEqual(self.backend._gdn_verifier(q=q, k=k, v=v, g=g, beta=beta), (True, None))
            self.backend.register(gdn_training=True)
            self.assertEqual(self.backend._gdn_verifier(q=q, k=k, v=v, g=g, beta=beta), (True, None))
            self.backend.register()
            chunk_o.TRITON_ABOVE_3_7_1 = False  # FLA's guard refuses its backward on Hopper + Triton 3.4-3.7.0
            if chunk_o.IS_NVIDIA_HOPPER and chunk_o.TRITON_ABOVE_3_4_0:
                self.assertEqual(self.backend._gdn_verifier(q=q, k=k, v=v, g=g, beta=beta), (True, None))
        finally:
            chunk_o.TRITON_ABOVE_3_7_1 = saved
            self.backend.register()


if __name__ == "__main__":
    unittest.main()
