"""lina's decode operators (lina.fused_recurrent_*, torch.ops.lina.fused_recurrent_*): values against the float64
token-by-token recurrence for dense, pooled (continuous batching), speculative and per-token states, FLA's keywords
honoured or refused by name, bad input refused before any write, the forward-only rule, the schema's in-place
declaration (opcheck, torch.compile), and lina as FLA's decode backend.

CPU backend everywhere; the CUDA case skips itself without a GPU. No timing.
"""
import logging
import os
import sys
import unittest

import torch

sys.path.insert(0, os.path.dirname(__file__))
import naive  # noqa: E402
from test_torch_ops import Case, FlaBackendCase, inputs  # noqa: E402

import lina  # noqa: E402
import lina.decode  # noqa: E402,F401  (loads torch.ops.lina and the fake kernels)

HAS_CUDA = torch.cuda.is_available()
GATE = dict(use_qk_l2norm_in_kernel=True, use_gate_in_kernel=True, use_beta_sigmoid_in_kernel=True)


def gate_params(seed, HV, K, kda):
    gen = torch.Generator().manual_seed(seed)
    A_log = torch.rand(HV, generator=gen).add(0.5).log()
    dt_bias = 0.3 * torch.randn(HV * K if kda else HV, generator=gen)
    return A_log, dt_bias


def lina_call(op, q, k, v, g, beta, **kw):
    if op == "gla":
        return lina.fused_recurrent_gla(q, k, v, g, **kw)
    if op == "kda":
        return lina.fused_recurrent_kda(q, k, v, g, beta, **kw)
    return lina.fused_recurrent_gated_delta_rule(q, k, v, g, beta=beta, **kw)  # FLA's order: g, gk, gv, beta


def naive_call(op, q, k, v, g, beta, initial_state=None, cu_seqlens=None, **kw):
    if op == "gla":
        return naive.gla(q, k, v, g, initial_state=initial_state, cu_seqlens=cu_seqlens)
    return naive.delta(q, k, v, g, beta, initial_state=initial_state, cu_seqlens=cu_seqlens, kda=op == "kda", **kw)


def naive_per_token(op, q, k, v, g, beta, h0, **kw):
    """(o, [state after token t of sequence n] as [B, T, HV, K, V]) one token at a time."""
    states, outs, h = [], [], h0
    for t in range(q.shape[1]):
        sl = slice(t, t + 1)
        o, h = naive_call(op, q[:, sl], k[:, sl], v[:, sl], g[:, sl], None if beta is None else beta[:, sl],
                          initial_state=h, **kw)
        outs.append(o)
        states.append(h)
    return torch.cat(outs, 1), torch.stack(states, 1)


def op_inputs(op, seed, B, T, H=2, K=16, V=8, HV=None):
    q, k, v, g, beta = inputs(seed, B, T, H, K, V, HV=HV if op != "gla" else None, kda=op != "gdn")
    return q, k, v, g, (None if op == "gla" else beta)


OPS = ("gla", "kda", "gdn")


class DecodeValues(Case):
    def test_dense_state_one_and_several_tokens(self):
        for op in OPS:
            for T in (1, 3):
                HV = 4 if op != "gla" else None  # GVA for the delta rules
                q, k, v, g, beta = op_inputs(op, 20 + T, 3, T, HV=HV)
                h0 = torch.randn(3, v.shape[2], 16, 8)
                o, ht = lina_call(op, q, k, v, g, beta, initial_state=h0, output_final_state=True)
                ro, rh = naive_call(op, q, k, v, g, beta, initial_state=h0)
                self.assert_close(f"{op} T={T} o", ro, o)
                self.assert_close(f"{op} T={T} final_state", rh, ht)
                self.assertEqual(ht.dtype, torch.float32)
                _, none = lina_call(op, q, k, v, g, beta, initial_state=h0)
                self.assertIsNone(none)

    def test_in_kernel_gate_l2norm_and_beta_sigmoid(self):
        for op in ("kda", "gdn"):
            q, k, v, g, beta = inputs(30, 2, 2, 2, 16, 8, HV=4, kda=op == "kda", gate_raw=True)
            A_log, dt_bias = gate_params(31, 4, 16, op == "kda")
            h0 = torch.randn(2, 4, 16, 8)
            o, ht = lina_call(op, q, k, v, g, beta, initial_state=h0, output_final_state=True, A_log=A_log,
                              dt_bias=dt_bias, **GATE)
            ro, rh = naive_call(op, q, k, v, g, beta, initial_state=h0, A_log=A_log, dt_bias=dt_bias, **GATE)
            self.assert_close(f"{op} o", ro, o)
            self.assert_close(f"{op} final_state", rh, ht)

    def test_state_v_first_round_trip(self):
        # FLA's layers keep the state V-first; lina returns it as a view of its own [K, V] state
        q, k, v, g, beta = op_inputs("kda", 40, 2, 1)
        h0 = torch.randn(2, 2, 16, 8)
        o, ht = lina.fused_recurrent_kda(q, k, v, g, beta, initial_state=h0.transpose(-1, -2).contiguous(),
                                         output_final_state=True, state_v_first=True)
        ro, rh = naive_call("kda", q, k, v, g, beta, initial_state=h0)
        self.assertEqual(tuple(ht.shape), (2, 2, 8, 16))
        self.assert_close("final_state", rh.transpose(-1, -2), ht)
        self.assertTrue(ht.transpose(-1, -2).is_contiguous())  # the next step passes it on without a copy
        o2, _ = lina.fused_recurrent_kda(q, k, v, g, beta, initial_state=ht, state_v_first=True)
        ro2, _ = naive_call("kda", q, k, v, g, beta, initial_state=rh)
        self.assert_close("second step o", ro2, o2)

    def test_varlen(self):
        for op in OPS:
            q, k, v, g, beta = op_inputs(op, 50, 1, 5)
            cu = torch.tensor([0, 2, 3, 5], dtype=torch.int32)
            h0 = torch.randn(3, 2, 16, 8)
            o, ht = lina_call(op, q, k, v, g, beta, initial_state=h0, output_final_state=True, cu_seqlens=cu)
            ro, rh = naive_call(op, q, k, v, g, beta, initial_state=h0, cu_seqlens=cu)
            self.assert_close(f"{op} o", ro, o)
            self.assert_close(f"{op} final_state", rh, ht)

    def test_gdn_without_g_and_beta_is_fla_default(self):
        q, k, v, _, _ = op_inputs("gdn", 55, 2, 1)
        o, _ = lina.fused_recurrent_gated_delta_rule(q, k, v)
        ro, _ = naive_call("gdn", q, k, v, torch.zeros(2, 1, 2), torch.ones(2, 1, 2))
        self.assert_close("o", ro, o)


class ContinuousBatching(Case):
    def test_pool_in_place_with_padding(self):
        for op in OPS:
            q, k, v, g, beta = op_inputs(op, 60, 3, 1)
            pool = torch.randn(6, 2, 16, 8)
            before = pool.clone()
            slots = torch.tensor([4, -1, 1])  # sequence 1 is padding (vLLM's PAD_SLOT_ID)
            o, ht = lina_call(op, q, k, v, g, beta, initial_state=pool, ssm_state_indices=slots,
                              inplace_final_state=True)
            self.assertIs(ht, pool)
            live = [0, 2]
            ro, rh = naive_call(op, q[live], k[live], v[live], g[live], None if beta is None else beta[live],
                                initial_state=before[[4, 1]])
            self.assert_close(f"{op} o", ro, o[live])
            self.assertTrue(torch.equal(o[1], torch.zeros_like(o[1])), f"{op}: a padding sequence's o is zero")
            self.assert_close(f"{op} pool slots", rh, pool[[4, 1]])
            untouched = [0, 2, 3, 5]
            self.assertTrue(torch.equal(pool[untouched], before[untouched]), f"{op}: other slots unchanged")

    def test_speculative_tokens_write_a_slot_per_token(self):
        # [N, L] indices: read slot indices[n][num_accepted - 1], the state after token t goes to indices[n][t]
        q, k, v, g, beta = op_inputs("gdn", 70, 2, 3)
        pool = torch.randn(8, 2, 16, 8)
        before = pool.clone()
        slots = torch.tensor([[0, 1, 2], [3, 4, 5]])
        accepted = torch.tensor([2, 1])
        o, _ = lina.fused_recurrent_gated_delta_rule(q, k, v, g, beta=beta, initial_state=pool, ssm_state_indices=slots,
                                                     num_accepted_tokens=accepted, inplace_final_state=True)
        h0 = before[[1, 3]]
        ro, states = naive_per_token("gdn", q, k, v, g, beta, h0)
        self.assert_close("o", ro, o)
        for n in range(2):
            for t in range(3):
                self.assert_close(f"slot of seq {n} token {t}", states[n, t], pool[slots[n, t]])

    def test_per_token_states_out_of_place(self):
        q, k, v, g, beta = op_inputs("kda", 80, 2, 2)
        pool = torch.randn(4, 2, 16, 8)
        before = pool.clone()
        slots = torch.tensor([2, 0])
        _, ht = lina.fused_recurrent_kda(q, k, v, g, beta, initial_state=pool, ssm_state_indices=slots,
                                         output_final_state=True)
        self.assertTrue(torch.equal(pool, before), "the pool is only read")
        _, states = naive_per_token("kda", q, k, v, g, beta, before[[2, 0]])
        self.assertEqual(tuple(ht.shape), (4, 2, 16, 8))  # one row per token of the flattened token axis
        self.assert_close("per-token states", states.reshape(4, 2, 16, 8), ht)

    def test_fla_fwd_form_updates_the_dense_state_in_place(self):
        # FLA's fused_recurrent_kda_fwd: inplace_final_state=True by default, `out` receives o
        q, k, v, g, beta = op_inputs("kda", 85, 2, 1)
        h = torch.randn(2, 2, 16, 8)
        before = h.clone()
        out = torch.empty_like(v)
        o, ht = lina.decode.fused_recurrent_kda_fwd(q, k, v, g, beta, initial_state=h, out=out)
        self.assertIs(o, out)
        self.assertIs(ht, h)
        ro, rh = naive_call("kda", q, k, v, g, beta, initial_state=before)
        self.assert_close("o", ro, out)
        self.assert_close("state", rh, h)


class DecodeInterface(Case):
    def setUp(self):
        self.args = op_inputs("kda", 90, 2, 1)

    def test_fla_keywords_refused_by_name(self):
        q, k, v, g, beta = self.args
        with self.assertRaisesRegex(NotImplementedError, "`gv`"):
            lina.fused_recurrent_gla(q, k, v, g, gv=torch.zeros_like(v))
        for name in ("gk", "gv"):
            with self.assertRaisesRegex(NotImplementedError, f"`{name}`"):
                lina.fused_recurrent_gated_delta_rule(q, k, v, g[..., 0], beta=beta, **{name: torch.zeros_like(v)})
        with self.assertRaisesRegex(NotImplementedError, "`beta`"):
            lina.fused_recurrent_kda(q, k, v, g, torch.rand_like(v))
        with self.assertRaisesRegex(TypeError, "bogus"):
            lina.fused_recurrent_kda(q, k, v, g, beta, bogus=1)
        pool = torch.randn(2, 2, 8, 16)  # V-first in memory
        with self.assertRaisesRegex(NotImplementedError, "`state_v_first`"):
            lina.fused_recurrent_kda(q, k, v, g, beta, initial_state=pool, state_v_first=True,
                                     ssm_state_indices=torch.tensor([0, 1]), inplace_final_state=True)
        with self.assertRaisesRegex(ValueError, "`A_log`"):
            lina.fused_recurrent_gated_delta_rule(q, k, v, g[..., 0], beta=beta, use_gate_in_kernel=True)

    def test_bad_state_refused_before_any_write(self):
        q, k, v, g, beta = self.args
        pool = torch.randn(3, 2, 16, 8)
        before = pool.clone()
        with self.assertRaisesRegex(ValueError, "state_indices"):
            lina.fused_recurrent_kda(q, k, v, g, beta, initial_state=pool, ssm_state_indices=torch.tensor([0, 3]),
                                     inplace_final_state=True)
        with self.assertRaisesRegex(ValueError, "initial_state"):
            lina.fused_recurrent_kda(q, k, v, g, beta, initial_state=pool.double(), ssm_state_indices=torch.tensor([0, 1]),
                                     inplace_final_state=True)
        with self.assertRaisesRegex(ValueError, "initial_state"):
            lina.fused_recurrent_kda(q, k, v, g, beta, initial_state=pool[:, :, :8], output_final_state=True)
        with self.assertRaisesRegex(ValueError, "initial_state"):  # in place needs the memory itself
            lina.fused_recurrent_kda(q, k, v, g, beta, initial_state=pool[:2].transpose(-1, -2).contiguous().transpose(-1, -2),
                                     inplace_final_state=True)
        self.assertTrue(torch.equal(pool, before))

    def test_forward_only(self):
        q, k, v, g, beta = self.args
        qg = q.clone().requires_grad_()
        with self.assertRaisesRegex(RuntimeError, "`q` requires grad.*no backward"):
            lina.fused_recurrent_kda(qg, k, v, g, beta)
        with torch.no_grad():
            o, _ = lina.fused_recurrent_kda(qg, k, v, g, beta)
        self.assertFalse(o.requires_grad)
        with torch.inference_mode():
            lina.fused_recurrent_kda(qg, k, v, g, beta)

    def test_in_place_bumps_the_version(self):
        q, k, v, g, beta = self.args
        pool = torch.randn(2, 2, 16, 8)
        version = pool._version
        with torch.no_grad():
            lina.fused_recurrent_kda(q, k, v, g, beta, initial_state=pool, ssm_state_indices=torch.tensor([1, 0]),
                                     inplace_final_state=True)
        self.assertGreater(pool._version, version)

    def test_meta_tensors(self):
        with torch.device("meta"):
            q, k, v, g = (torch.empty(4, 1, 2, 16) for _ in range(4))
            beta = torch.empty(4, 1, 2)
            o, h = lina.fused_recurrent_kda(q, k, v, g, beta, initial_state=torch.empty(4, 2, 16, 16),
                                            output_final_state=True)
            self.assertEqual((o.device.type, tuple(o.shape), tuple(h.shape)), ("meta", (4, 1, 2, 16), (4, 2, 16, 16)))

    def test_opcheck_declares_the_in_place_pool(self):
        # opcheck's schema test fails if the op writes an input its schema does not mark (a!)
        q, k, v, g, beta = self.args
        ops = torch.ops.lina
        slots = torch.tensor([1, 0])
        torch.library.opcheck(ops.fused_recurrent_kda.default,
                              (q, k, v, g, beta, None, torch.randn(3, 2, 16, 8), slots, None, True, False, True,
                               False, False, False, None, None, None, None, None, None, ""))
        torch.library.opcheck(ops.fused_recurrent_gdn.default,
                              (q, k, v, g[..., 0], beta, None, torch.randn(2, 2, 16, 8), None, None, False, True,
                               False, False, False, False, None, None, None, None, torch.empty_like(v), ""))
        torch.library.opcheck(ops.fused_recurrent_gla.default,
                              (q, k, v, g, None, torch.randn(2, 2, 16, 8), None, None, True, False, False, None, None,
                               None, ""))

    def test_compile_in_place_decode_step_matches_eager(self):
        q, k, v, g, beta = self.args
        slots = torch.tensor([2, 0])

        def step(pool, q, k, v, g, beta):
            o, _ = lina.fused_recurrent_kda(q, k, v, g, beta, initial_state=pool, ssm_state_indices=slots,
                                            inplace_final_state=True, use_qk_l2norm_in_kernel=True)
            return o * 2

        compiled = torch.compile(step, fullgraph=True, backend="aot_eager")
        pa, pb = torch.randn(3, 2, 16, 8), None
        pb = pa.clone()
        with torch.no_grad():
            for _ in range(2):  # the second step reads what the first wrote
                oa, ob = step(pa, q, k, v, g, beta), compiled(pb, q, k, v, g, beta)
                self.assertTrue(torch.equal(oa, ob))
                self.assertTrue(torch.equal(pa, pb))


@unittest.skipUnless(HAS_CUDA, "no CUDA device")
class DecodeCuda(Case):
    def test_graph_replay_updates_the_pool(self):
        dev = "cuda"
        q, k, v, g, beta = (t.to(dev, torch.bfloat16) for t in op_inputs("kda", 95, 4, 1, K=64, V=64))
        pool = torch.randn(8, 2, 64, 64, device=dev)
        slots = torch.tensor([5, 2, 7, 0], device=dev, dtype=torch.int32)
        ref_pool = pool.clone()
        with torch.no_grad():
            lina.fused_recurrent_kda(q, k, v, g, beta, initial_state=ref_pool, ssm_state_indices=slots,
                                     inplace_final_state=True)
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                lina.fused_recurrent_kda(q, k, v, g, beta, initial_state=pool.clone(), ssm_state_indices=slots,
                                         inplace_final_state=True)  # warm-up outside capture
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                lina.fused_recurrent_kda(q, k, v, g, beta, initial_state=pool, ssm_state_indices=slots,
                                         inplace_final_state=True)
            graph.replay()
        torch.cuda.synchronize()
        self.assert_close("pool after replay", ref_pool, pool)


class FlaDecodeBackend(FlaBackendCase):
    def test_fla_decode_functions_run_lina(self):
        from fla.ops.kda import fused_recurrent_kda
        import fla.layers.gated_deltanet as gdn_layer
        import fla.layers.gla as gla_layer
        q, k, v, g, beta = op_inputs("kda", 100, 2, 1)
        h0 = torch.randn(2, 2, 16, 8)
        with torch.no_grad():
            o_fla, h_fla = fused_recurrent_kda(q=q, k=k, v=v, g=g, beta=beta, initial_state=h0,
                                               output_final_state=True)
            o_lina, h_lina = lina.fused_recurrent_kda(q, k, v, g, beta, initial_state=h0, output_final_state=True)
            self.assertTrue(torch.equal(o_fla, o_lina))
            self.assertTrue(torch.equal(h_fla, h_lina))
            o_fla, _ = gdn_layer.fused_recurrent_gated_delta_rule(q=q, k=k, v=v, g=g[..., 0], beta=beta)
            o_lina, _ = lina.fused_recurrent_gated_delta_rule(q, k, v, g[..., 0], beta=beta)
            self.assertTrue(torch.equal(o_fla, o_lina))
            o_fla, _ = gla_layer.fused_recurrent_gla(q=q, k=k, v=v, gk=g)
            o_lina, _ = lina.fused_recurrent_gla(q, k, v, g)
            self.assertTrue(torch.equal(o_fla, o_lina))

    def test_declines_calls_that_need_grad(self):
        import fla.layers.gla as gla_layer
        q, k, v, g, _ = op_inputs("gla", 101, 1, 4)
        q.requires_grad_()
        with self.assertLogs("lina.fla_backend", level=logging.INFO) as logs:
            try:
                gla_layer.fused_recurrent_gla(q=q, k=k, v=v, gk=g)
            except Exception:
                pass  # FLA's own Triton path then runs (and needs a GPU)
        self.assertTrue(any("forward only" in line for line in logs.output), logs.output)
        self.assertTrue(any("forward only" in why for (op, why) in self.backend.declines() if op == "fused_recurrent_gla"))


if __name__ == "__main__":
    unittest.main()
