"""Context parallelism for chunk_gla, chunk_kda and chunk_gated_delta_rule: one sequence split over ranks.

Each rank holds a contiguous segment of the token stream. The recurrences are affine in the incoming state,
so over a segment S_out = M S_in + B, with B the segment's final state from a zero state and M a K x K
transition that does not depend on v (GLA: diagonal, exp of the segment's summed gate; the delta rules: the
segment run from the identity state with zero values). Every rank computes its (M, B), the ranks exchange
them, each rank combines them in rank order up to its own border and reruns its segment from the state that
enters it. Everything is lina's differentiable operators and torch matmuls, so autograd gives the backward.

    from lina.context_parallel import chunk_kda_cp
    o, ht = chunk_kda_cp(q, k, v, g, beta, ranks=4, output_final_state=True)   # simulated: 4 segments, one process
    o_r, ht_r = chunk_kda_cp(q_r, k_r, v_r, g_r, beta_r, group=group)           # rank r of torch.distributed

docs/context-parallel.md gives the varlen rules, what each rank returns and the cost.
"""
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.distributed.nn.functional as dist_nn

import lina.ops as ops

__all__ = ["chunk_gla_cp", "chunk_kda_cp", "chunk_gated_delta_rule_cp", "chunk_gdn_cp", "RankPlan", "plan_ranks",
           "segment_lengths"]


# ---- which sequences each rank holds ------------------------------------------------------------------------

@dataclass(frozen=True)
class RankPlan:
    """One rank's part of the token stream. Dense inputs (no cu_seqlens): every batch row is one sequence that
    spans all ranks. Varlen (B == 1, cu_seqlens): `seq_ids` are the global sequences this rank holds tokens of
    (and the zero-length ones that start on it), `local_cu` their borders in the rank's own tokens."""
    start: int
    length: int
    dense: bool
    seq_ids: tuple
    local_cu: tuple
    carry_in: bool   # the first local sequence started on an earlier rank
    carry_out: bool  # the last local sequence goes on into the next rank

    @property
    def passes_through(self):
        """The rank lies inside one sequence: the state entering it leaves it through its affine map."""
        return self.carry_in and self.carry_out and (self.dense or len(self.seq_ids) == 1)

    @property
    def tail_start(self):
        """Local offset of the last local sequence (its tokens make the state handed to the next rank)."""
        return 0 if self.dense else self.local_cu[-2]

    @property
    def owned(self):
        """How many local sequences end on this rank (their final states are this rank's to return)."""
        if self.dense:
            return 0 if self.carry_out else len(self.seq_ids)
        return len(self.seq_ids) - (1 if self.carry_out else 0)


def segment_lengths(total, ranks):
    """`ranks` segments of `total` tokens, as equal as possible, the longer ones first."""
    base, extra = divmod(total, ranks)
    return [base + (1 if r < extra else 0) for r in range(ranks)]


def plan_ranks(lengths, cu_seqlens, batch):
    """The RankPlan of every rank, from the segments' lengths and the global cu_seqlens (a list, or None)."""
    starts = [sum(lengths[:r]) for r in range(len(lengths))]
    last = len(lengths) - 1
    plans = []
    for r, (a, n_tokens) in enumerate(zip(starts, lengths)):
        b = a + n_tokens
        if cu_seqlens is None:
            plans.append(RankPlan(a, n_tokens, True, tuple(range(batch)), (0, n_tokens), r > 0, r < last))
            continue
        ids, ends = [], []
        for n, (s, e) in enumerate(zip(cu_seqlens[:-1], cu_seqlens[1:])):
            # a zero-length sequence belongs to the rank its position lies on (the end of the stream: the last)
            mine = (a <= s < b or (r == last and s == b)) if s == e else (s < b and e > a)
            if mine:
                ids.append(n)
                ends.append(min(e, b) - a)
        carry_in = cu_seqlens[ids[0]] < a
        carry_out = cu_seqlens[ids[-1] + 1] > b
        plans.append(RankPlan(a, n_tokens, False, tuple(ids), (0, *ends), carry_in, carry_out))
    return plans


# ---- the three operators ------------------------------------------------------------------------------------

class _Gla:
    name = "chunk_gla_cp"
    token_names = ("q", "k", "v", "g")

    def __init__(self, scale, kwargs):
        self.scale, self.kwargs = scale, kwargs

    def call(self, xs, h0, output_final_state, cu=None, cu_cpu=None):
        return ops.chunk_gla(*(xs[n] for n in self.token_names), scale=self.scale, initial_state=h0,
                             output_final_state=output_final_state, cu_seqlens=cu, cu_seqlens_cpu=cu_cpu,
                             **self.kwargs)

    def through(self, xs):
        """[M | B] of a segment inside one sequence: M diagonal, exp of the gate summed over the segment per
        sequence, head and key channel ([N, H, K, 1]); B the segment's final state from zero."""
        _, B = self.call(xs, None, True)
        return torch.cat([xs["g"].float().sum(1).exp().unsqueeze(-1), B], dim=-1)

    @staticmethod
    def transition_width(K):
        return 1

    @staticmethod
    def apply(M, S):
        return M * S


class _Delta(_Gla):
    def __init__(self, op, name, scale, kwargs):
        super().__init__(scale, kwargs)
        self.op, self.name = op, name

    token_names = ("q", "k", "v", "g", "beta")

    def call(self, xs, h0, output_final_state, cu=None, cu_cpu=None):
        return self.op(*(xs[n] for n in self.token_names), scale=self.scale, initial_state=h0,
                       output_final_state=output_final_state, cu_seqlens=cu, cu_seqlens_cpu=cu_cpu, **self.kwargs)

    def through(self, xs):
        """[M | B] of a segment inside one sequence, in one call: value columns are independent, so columns
        [0, K) run from the identity with zero values (their final state is M, [N, HV, K, K]) while columns
        [K, K + V) run from zero with v (their final state is B)."""
        v, K = xs["v"], xs["k"].shape[-1]
        N, T, HV, V = v.shape
        eye = torch.eye(K, dtype=torch.float32, device=v.device).expand(N, HV, K, K)
        start = torch.cat([eye, eye.new_zeros((N, HV, K, V))], dim=-1)
        _, MB = self.call(dict(xs, v=torch.cat([v.new_zeros((N, T, HV, K)), v], dim=-1)), start, True)
        return MB

    @staticmethod
    def transition_width(K):
        return K

    @staticmethod
    def apply(M, S):
        return M @ S


# ---- one rank's passes --------------------------------------------------------------------------------------

def _rows(h0, n):
    return None if h0 is None else h0[n:n + 1]


def _contribution(spec, plan, xs, h0, state_shape):
    """[M | B] concatenated on the last axis: the map from the state entering this rank to the state it hands
    on, S_next = M S_in + B (M is zero, unused, unless the rank passes its incoming state through)."""
    N, HV, K, V = state_shape
    width = spec.transition_width(K)
    if not plan.carry_out:
        return xs["q"].new_zeros((N, HV, K, width + V), dtype=torch.float32)
    if plan.passes_through:
        return spec.through(xs)
    # the last local sequence started on this rank: its final state, from its own initial state, is handed on
    tail = xs if plan.dense else {n: x[:, plan.tail_start:] for n, x in xs.items()}
    _, B = spec.call(tail, h0 if plan.dense else _rows(h0, plan.seq_ids[-1]), True)
    return torch.cat([B.new_zeros((N, HV, K, width)), B], dim=-1)


def _carries(spec, plans, contributions, K):
    """The state entering each rank after the given ranks' contributions, combined in rank order: a list from
    rank 0 on (None where no sequence crosses into the rank)."""
    width = spec.transition_width(K)
    carries, state = [None], None
    for plan, mb in zip(plans, contributions):
        M, B = mb[..., :width], mb[..., width:]
        state = spec.apply(M, state) + B if plan.passes_through else B
        carries.append(state if plan.carry_out else None)
    return carries


def _final_pass(spec, plan, xs, h0, carry, output_final_state, cu_like):
    """The rank's segment run from the states entering its sequences: (o, final states of the sequences that
    end on this rank, or None)."""
    if plan.dense:
        o, ht = spec.call(xs, carry if plan.carry_in else h0, output_final_state)
    else:
        starts = []
        for i, n in enumerate(plan.seq_ids):
            if i == 0 and plan.carry_in:
                starts.append(carry)
            elif h0 is not None:
                starts.append(_rows(h0, n))
        state = None
        if starts:
            if len(starts) != len(plan.seq_ids):  # the carry alone, no user initial_state: the others start at 0
                zeros = carry.new_zeros((len(plan.seq_ids) - 1, *carry.shape[1:]))
                starts.append(zeros)
            state = torch.cat(starts, dim=0)
        cu_cpu = torch.tensor(plan.local_cu, dtype=cu_like.dtype)
        o, ht = spec.call(xs, state, output_final_state, cu_cpu.to(cu_like.device), cu_cpu)
    return o, (ht[:plan.owned] if output_final_state else None)


# ---- arguments ----------------------------------------------------------------------------------------------

def _fail(op, name, seen, expected):
    raise ValueError(f"lina.context_parallel.{op}: argument `{name}` is {seen}; expected {expected}")


def _host_list(cu, cu_cpu):
    if cu is None:
        return None
    return (cu_cpu if cu_cpu is not None else cu).tolist()


def _check_cu(op, cu, total, batch):
    if cu is None:
        return
    if batch != 1:
        _fail(op, "q", f"of batch {batch} with cu_seqlens", "batch 1 (varlen packs every sequence in one row)")
    if len(cu) < 2 or cu[0] != 0 or cu[-1] != total or any(a > b for a, b in zip(cu, cu[1:])):
        _fail(op, "cu_seqlens", cu if len(cu) <= 16 else f"{cu[:8]}...{cu[-4:]}",
              f"non-decreasing offsets from 0 to the stream's {total} tokens")


def _check_state(op, h0, n_seqs):
    if h0 is not None and (h0.dim() != 4 or h0.shape[0] != n_seqs):
        _fail(op, "initial_state", f"of shape {tuple(h0.shape)}", f"[{n_seqs}, HV, K, V], one state per sequence")


def _check_lengths(op, ranks, total):
    if isinstance(ranks, int) and not isinstance(ranks, bool):
        if not 1 <= ranks <= total:
            _fail(op, "ranks", ranks, f"a count from 1 to the {total} tokens of the sequence")
        return segment_lengths(total, ranks)
    lengths = list(ranks)
    if not lengths or any(not isinstance(n, int) or n < 1 for n in lengths) or sum(lengths) != total:
        _fail(op, "ranks", lengths, f"a rank count, or positive segment lengths summing to the {total} tokens")
    return lengths


class _TieToExchange(torch.autograd.Function):
    """Passes `out` through, and makes the state exchange part of its graph: the exchange's backward is a
    collective, so every rank's backward must reach it, also on ranks whose output does not depend on it."""

    @staticmethod
    def forward(ctx, out, *exchanged):
        ctx.shapes = [(x.shape, x.dtype, x.device) for x in exchanged]
        return out.view_as(out)

    @staticmethod
    def backward(ctx, grad, *_):
        return (grad, *(torch.zeros(s, dtype=d, device=dev) for s, d, dev in ctx.shapes))


# ---- the entry point ----------------------------------------------------------------------------------------

def _context_parallel(spec, tensors, *, group, ranks, initial_state, output_final_state, state_v_first,
                      cu_seqlens, cu_seqlens_cpu):
    op = spec.name
    if (group is None) == (ranks is None):
        _fail(op, "ranks", f"{ranks!r} with group={group!r}",
              "exactly one of `ranks` (simulated, one process) and `group` (a torch.distributed process group)")
    xs = dict(zip(spec.token_names, tensors))
    q, k, v = xs["q"], xs["k"], xs["v"]
    for name, x in xs.items():
        if x.dim() < 3 or x.shape[:2] != q.shape[:2]:
            _fail(op, name, f"of shape {tuple(x.shape)}", f"[B, T, ...] with B, T = {tuple(q.shape[:2])} of `q`")
    batch, local_tokens = q.shape[0], q.shape[1]
    h0 = ops._state_in(initial_state, state_v_first)
    state_shape = (batch if cu_seqlens is None else 1, v.shape[2], k.shape[-1], v.shape[-1])
    cu = _host_list(cu_seqlens, cu_seqlens_cpu)
    n_seqs = batch if cu is None else len(cu) - 1

    if ranks is not None:
        total = local_tokens
        lengths = _check_lengths(op, ranks, total)
        _check_cu(op, cu, total, batch)
        _check_state(op, h0, n_seqs)
        plans = plan_ranks(lengths, cu, batch)
        segments = [{n: x[:, p.start:p.start + p.length] for n, x in xs.items()} for p in plans]
        contributions = [_contribution(spec, p, s, h0, state_shape) for p, s in zip(plans, segments)]
        carries = _carries(spec, plans, contributions, k.shape[-1])
        outs, states = [], []
        for p, s, carry in zip(plans, segments, carries):
            o, ht = _final_pass(spec, p, s, h0, carry, output_final_state, cu_seqlens)
            outs.append(o)
            states.append(ht)
        ht = torch.cat(states, dim=0) if output_final_state else None
        return torch.cat(outs, dim=1), ops._state_out(ht, output_final_state, state_v_first)

    if local_tokens < 1:
        _fail(op, "q", f"of shape {tuple(q.shape)}", "a rank's segment of at least one token")
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    counts = [torch.zeros(1, dtype=torch.int64, device=q.device) for _ in range(world)]
    dist.all_gather(counts, torch.tensor([local_tokens], dtype=torch.int64, device=q.device), group=group)
    lengths = torch.cat(counts).tolist()  # one host copy
    _check_cu(op, cu, sum(lengths), batch)
    _check_state(op, h0, n_seqs)
    plans = plan_ranks(lengths, cu, batch)
    mine = _contribution(spec, plans[rank], xs, h0, state_shape)
    params = [x for x in spec.kwargs.values() if isinstance(x, torch.Tensor)]
    if ops._training(*xs.values(), h0, *params) and not mine.requires_grad:
        # a rank that hands no state on (the last) sends zeros: they still take part in the exchange's backward,
        # a collective that every rank must join
        mine.requires_grad_(True)
    exchanged = dist_nn.all_gather(mine, group=group) if world > 1 else (mine,)
    carry = _carries(spec, plans[:rank], exchanged[:rank], k.shape[-1])[rank]
    o, ht = _final_pass(spec, plans[rank], xs, h0, carry, output_final_state, cu_seqlens)
    if world > 1:
        o = _TieToExchange.apply(o, *exchanged)
        ht = _TieToExchange.apply(ht, *exchanged) if ht is not None else None
    return o, ops._state_out(ht, output_final_state, state_v_first)


_DOC = """

    Exactly one of:
      ranks: simulated context parallelism in one process: a rank count (equal segments) or the segments'
             token lengths; q, k, v, ... are the whole sequences; returns the whole (o, final_state).
      group: a torch.distributed process group; q, k, v, ... are this rank's contiguous segment (ranks in
             group order), cu_seqlens the global offsets of the packed stream (varlen) and initial_state the
             states of every sequence (the same on every rank); returns this rank's o and the final states of
             the sequences that end on this rank (dense: the last rank holds them, the others get 0 rows).
    The other keywords are lina's (FLA's) for the unsplit operator."""


def chunk_gla_cp(q, k, v, g, *, group=None, ranks=None, scale=None, initial_state=None, output_final_state=False,
                 state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None, **kwargs):
    return _context_parallel(_Gla(scale, kwargs), (q, k, v, g), group=group, ranks=ranks,
                             initial_state=initial_state, output_final_state=output_final_state,
                             state_v_first=state_v_first, cu_seqlens=cu_seqlens, cu_seqlens_cpu=cu_seqlens_cpu)


def _delta_cp(op, name):
    def run(q, k, v, g, beta, *, group=None, ranks=None, scale=None, initial_state=None, output_final_state=False,
            state_v_first=False, cu_seqlens=None, cu_seqlens_cpu=None, **kwargs):
        if "cp_context" in kwargs:
            ops._refuse(name, "cp_context", kwargs["cp_context"], "pass `group` (or `ranks`) to this function")
        state_v_first = state_v_first or bool(kwargs.pop("transpose_state_layout", False))
        return _context_parallel(_Delta(op, name, scale, kwargs), (q, k, v, g, beta), group=group, ranks=ranks,
                                 initial_state=initial_state, output_final_state=output_final_state,
                                 state_v_first=state_v_first, cu_seqlens=cu_seqlens, cu_seqlens_cpu=cu_seqlens_cpu)
    run.__name__ = run.__qualname__ = name
    return run


chunk_kda_cp = _delta_cp(ops.chunk_kda, "chunk_kda_cp")
chunk_gated_delta_rule_cp = _delta_cp(ops.chunk_gated_delta_rule, "chunk_gated_delta_rule_cp")
chunk_gdn_cp = chunk_gated_delta_rule_cp

chunk_gla_cp.__doc__ = "lina.chunk_gla over context-parallel ranks: returns (o, final_state or None)." + _DOC
chunk_kda_cp.__doc__ = "lina.chunk_kda over context-parallel ranks: returns (o, final_state or None)." + _DOC
chunk_gated_delta_rule_cp.__doc__ = ("lina.chunk_gated_delta_rule over context-parallel ranks: returns "
                                     "(o, final_state or None)." + _DOC)
