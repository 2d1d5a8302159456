"""Token-by-token recurrences in float64 PyTorch (docs/math.md section 2), differentiated by autograd: the
reference the torch-operator tests compare lina against. Layouts are FLA's: [B, T, H, D], states [N, H, K, V]."""
import torch
import torch.nn.functional as F


def l2norm(x):
    return x / torch.sqrt((x * x).sum(-1, keepdim=True) + 1e-6)


def _run(step, v, initial_state, cu_seqlens, state_shape):
    """Runs step(S, b, t, h) -> (S, o_t) over every sequence (the batch rows, or the cu_seqlens segments of
    row 0) and value head; returns (o, final states [N, HV, K, V])."""
    B, T, HV, V = v.shape
    o = torch.zeros(B, T, HV, V, dtype=torch.float64)
    if cu_seqlens is None:
        seqs = [(b, 0, T) for b in range(B)]
    else:
        c = cu_seqlens.tolist()
        seqs = [(0, s, e) for s, e in zip(c[:-1], c[1:])]
    finals = []
    for n, (b, s, e) in enumerate(seqs):
        heads = []
        for h in range(HV):
            S = (initial_state[n, h].double() if initial_state is not None
                 else torch.zeros(*state_shape, dtype=torch.float64))
            for t in range(s, e):
                S, o[b, t, h] = step(S, b, t, h)
            heads.append(S)
        finals.append(torch.stack(heads))
    return o, torch.stack(finals)


def gla(q, k, v, g, scale=None, initial_state=None, cu_seqlens=None):
    q, k, v, g = (x.double() for x in (q, k, v, g))
    K, V = q.shape[-1], v.shape[-1]
    scale = K ** -0.5 if scale is None else scale

    def step(S, b, t, h):
        S = torch.exp(g[b, t, h])[:, None] * S + torch.outer(k[b, t, h], v[b, t, h])
        return S, S.T @ (scale * q[b, t, h])
    return _run(step, v, initial_state, cu_seqlens, (K, V))


def delta(q, k, v, g, beta, scale=None, initial_state=None, cu_seqlens=None, kda=True, use_qk_l2norm_in_kernel=False,
          use_gate_in_kernel=False, use_beta_sigmoid_in_kernel=False, allow_neg_eigval=False, A_log=None,
          dt_bias=None, lower_bound=None):
    """chunk_kda (kda=True: gate [B, T, HV, K]) and chunk_gated_delta_rule (gate [B, T, HV])."""
    q, k, v, g, beta = (x.double() for x in (q, k, v, g, beta))
    H, K = q.shape[2], q.shape[-1]
    HV, V = v.shape[2], v.shape[-1]
    G = HV // H
    scale = K ** -0.5 if scale is None else scale
    if use_qk_l2norm_in_kernel:
        q, k = l2norm(q), l2norm(k)
    if use_beta_sigmoid_in_kernel:
        beta = torch.sigmoid(beta) * (2.0 if allow_neg_eigval else 1.0)
    if use_gate_in_kernel:
        bias = 0.0 if dt_bias is None else dt_bias.double().view(HV, K) if kda else dt_bias.double()
        raw = g + bias
        a = torch.exp(A_log.double()).view(HV, *([1] if kda else [])) if A_log is not None else 1.0
        g = lower_bound * torch.sigmoid(a * raw) if lower_bound is not None else -a * F.softplus(raw)

    def step(S, b, t, h):
        decay = torch.exp(g[b, t, h])
        S = (decay[:, None] if kda else decay) * S
        kt = k[b, t, h // G]
        u = beta[b, t, h] * (v[b, t, h] - S.T @ kt)
        S = S + torch.outer(kt, u)
        return S, S.T @ (scale * q[b, t, h // G])
    return _run(step, v, initial_state, cu_seqlens, (K, V))
