# Host-side models of ops/delta/cuda/bwd/grad_v4.cuh and grad_k_v2.cuh, and of the state passes' stores in bwd/state_passes.cuh
# (run: python3 tests/cuda/delta_bwd_grad_model.py; exit status 1 on a mismatch).
# 1. Lane-level emulation of grad_v4_kernel's index logic (fragments, warp tiles, epilogue masks, CTA roles; the
# same as grad_v3's, which it replaced) against the direct formulas. fp64, no bf16 rounding (the planes are modelled
# as exact).
import numpy as np
rng = np.random.default_rng(1)
kC, kVS, P40 = 64, 32, 40

def frag_a(A, m0, k0, lane):  # A: 2-D tile (rows, cols) -> 4 regs of 2 values
    g, t = lane >> 2, lane & 3
    return [(A[m0+g, k0+2*t], A[m0+g, k0+2*t+1]), (A[m0+g+8, k0+2*t], A[m0+g+8, k0+2*t+1]),
            (A[m0+g, k0+2*t+8], A[m0+g, k0+2*t+9]), (A[m0+g+8, k0+2*t+8], A[m0+g+8, k0+2*t+9])]
def frag_b_nk(Bt, n0, k0, lane):  # Bt [n][k]
    g, t = lane >> 2, lane & 3
    return [(Bt[n0+g, k0+2*t], Bt[n0+g, k0+2*t+1]), (Bt[n0+g, k0+2*t+8], Bt[n0+g, k0+2*t+9])]
def frag_b_kn(B, k0, n0, lane):  # B [k][n]
    g, t = lane >> 2, lane & 3
    return [(B[k0+2*t, n0+g], B[k0+2*t+1, n0+g]), (B[k0+2*t+8, n0+g], B[k0+2*t+9, n0+g])]
def frag_a_trans(X, m0, k0, lane):  # A = X^T, X [k][m] (ldmatrix.trans semantics = A[m][k] = X[k][m])
    return frag_a(X.T, m0, k0, lane)

def mma(acc, afr, bfr):  # acc: dict lane -> [4]; afr/bfr: dict lane -> frags. PTX m16n8k16 semantics.
    A = np.zeros((16, 16)); B = np.zeros((16, 8))
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        a = afr[lane]; b = bfr[lane]
        A[g, 2*t:2*t+2] = a[0]; A[g+8, 2*t:2*t+2] = a[1]; A[g, 2*t+8:2*t+10] = a[2]; A[g+8, 2*t+8:2*t+10] = a[3]
        B[2*t:2*t+2, g] = b[0]; B[2*t+8:2*t+10, g] = b[1]
    C = A @ B
    for lane in range(32):
        g, t = lane >> 2, lane & 3
        acc[lane][0] += C[g, 2*t]; acc[lane][1] += C[g, 2*t+1]; acc[lane][2] += C[g+8, 2*t]; acc[lane][3] += C[g+8, 2*t+1]

def run(K, V, Cn, kda=True):
    KH = K // 2; NTK = KH // 16
    H = rng.standard_normal((K, V)); D = rng.standard_normal((K, V))
    dO = rng.standard_normal((kC, V)); vn = rng.standard_normal((kC, V)); dvn = rng.standard_normal((kC, V)); v = rng.standard_normal((kC, V))
    for X in (dO, vn, dvn, v): X[Cn:] = 0  # rows past Cn zero (tile zero-fill)
    T = np.tril(rng.standard_normal((kC, kC))); T[Cn:] = 0
    beta = rng.random(kC); beta[Cn:] = 0
    b = -np.cumsum(rng.random((kC, K)), axis=0)
    bL = b[Cn-1]
    scale = 0.3
    out = {n: np.full(s, np.nan) for n, s in [('dqe', (kC, K)), ('dw', (kC, K)), ('dke', (kC, K)), ('dAqk', (kC, kC)),
                                           ('dTv', (kC, kC)), ('dv', (kC, V)), ('hd', (K,)), ('dbp', (kC,))]}
    cnt = {n: np.zeros(a.shape, int) for n, a in out.items()}
    def put(n, idx, val):
        out[n][idx] = val; cnt[n][idx] += 1
    for kh in range(2):
        k0 = kh * KH
        dbp_s = np.zeros(kC)
        accs = {}
        for warp in range(8):
            m0, nk0, n64, nv0 = 16*(warp & 3), (KH//2)*(warp >> 2), 32*(warp >> 2), 16*(warp >> 2)
            ak = [{l: [0.]*4 for l in range(32)} for _ in range(NTK)]
            aq = [{l: [0.]*4 for l in range(32)} for _ in range(NTK)]
            aw = [{l: [0.]*4 for l in range(32)} for _ in range(NTK)]
            aX = [{l: [0.]*4 for l in range(32)} for _ in range(4)]
            for c0 in range(0, V, kVS):
                Hs = H[k0:k0+KH, c0:c0+kVS]; Ds = D[k0:k0+KH, c0:c0+kVS]
                vns, dOs, dvns, vs = vn[:, c0:c0+kVS], dO[:, c0:c0+kVS], dvn[:, c0:c0+kVS], v[:, c0:c0+kVS]
                for ks in range(kVS // 16):
                    af = {l: frag_a(vns, m0, 16*ks, l) for l in range(32)}
                    for nt in range(NTK): mma(ak[nt], af, {l: frag_b_nk(Ds, nk0+8*nt, 16*ks, l) for l in range(32)})
                    af = {l: frag_a(dOs, m0, 16*ks, l) for l in range(32)}
                    for nt in range(NTK): mma(aq[nt], af, {l: frag_b_nk(Hs, nk0+8*nt, 16*ks, l) for l in range(32)})
                    if kh == 0:
                        for nt in range(4): mma(aX[nt], af, {l: frag_b_nk(vns, n64+8*nt, 16*ks, l) for l in range(32)})
                    af = {l: frag_a(dvns, m0, 16*ks, l) for l in range(32)}
                    for nt in range(NTK): mma(aw[nt], af, {l: frag_b_nk(Hs, nk0+8*nt, 16*ks, l) for l in range(32)})
                    if kh == 1:
                        for nt in range(4): mma(aX[nt], af, {l: frag_b_nk(vs, n64+8*nt, 16*ks, l) for l in range(32)})
                if kh == 1:
                    acc = [{l: [0.]*4 for l in range(32)} for _ in range(2)]
                    for ks in range(m0 >> 4, kC // 16):
                        af = {l: frag_a_trans(T, m0, ks*16, l) for l in range(32)}
                        for nt in range(2): mma(acc[nt], af, {l: frag_b_kn(dvns, 16*ks, nv0+8*nt, l) for l in range(32)})
                    for lane in range(32):
                        g, t = lane >> 2, lane & 3
                        for hf in range(2):
                            r = m0 + g + 8*hf
                            for nt in range(2):
                                c = nv0 + nt*8 + 2*t
                                x0, x1 = acc[nt][lane][2*hf], acc[nt][lane][2*hf+1]
                                dbp_s[r] += x0*vs[r, c] + x1*vs[r, c+1] if r < Cn else 0
                                if r < Cn: put('dv', (r, c0+c), x0*beta[r]); put('dv', (r, c0+c+1), x1*beta[r])
            for lane in range(32):
                g, t = lane >> 2, lane & 3
                for hf in range(2):
                    r = m0 + g + 8*hf
                    if r >= Cn: continue
                    for nt in range(NTK):
                        c = k0 + nk0 + nt*8 + 2*t
                        for e in range(2):
                            put('dke', (r, c+e), np.exp(min(bL[c+e]-b[r, c+e], 0))*ak[nt][lane][2*hf+e])
                            put('dqe', (r, c+e), scale*np.exp(b[r, c+e])*aq[nt][lane][2*hf+e])
                            put('dw', (r, c+e), -aw[nt][lane][2*hf+e])
                    for nt in range(4):
                        c = n64 + nt*8 + 2*t
                        for e in range(2):
                            if kh == 0: put('dAqk', (r, c+e), scale*aX[nt][lane][2*hf+e] if c+e <= r else 0.)
                            else: put('dTv', (r, c+e), aX[nt][lane][2*hf+e] if c+e < r else 0.)
        for tid in range(KH): put('hd', (k0+tid,), np.sum(H[k0+tid]*D[k0+tid]))
        if kh == 1:
            for tid in range(Cn): put('dbp', (tid,), dbp_s[tid])
    # direct formulas
    ref = {}
    ref['dqe'] = scale*np.exp(b)*(dO @ H.T); ref['dw'] = -(dvn @ H.T)
    ref['dke'] = np.exp(np.minimum(bL[None, :]-b, 0))*(vn @ D.T)
    ref['dAqk'] = scale*np.tril(dO @ vn.T); ref['dTv'] = np.tril(dvn @ v.T, -1)
    dvb = T.T @ dvn; ref['dv'] = beta[:, None]*dvb; ref['hd'] = np.sum(H*D, axis=1); ref['dbp'] = np.sum(dvb*v, axis=1)
    ok = True
    for n in out:
        rows = Cn if n not in ('hd',) else K
        o = out[n][:rows] if n != 'hd' else out[n]; r_ = ref[n][:rows] if n != 'hd' else ref[n]
        c = cnt[n][:rows] if n != 'hd' else cnt[n]
        good = np.all(c == 1) and np.allclose(o, r_, atol=1e-9)
        extra = (cnt[n][Cn:].sum() if n not in ('hd',) else 0)
        if not good or extra: ok = False; print('  MISMATCH', n, 'counts', np.unique(c), 'extra', extra, 'maxerr', np.nanmax(np.abs(o-r_)))
    print(f"K={K} V={V} Cn={Cn}: {'match' if ok else 'FAIL'}")
    return ok

res_v3 = [run(K, V, Cn) for K, V, Cn in [(64, 64, 64), (128, 64, 17), (64, 128, 1), (128, 128, 40), (64, 192, 63)]]
print('grad_v4:', sum(res_v3), '/', len(res_v3))

# 2. grad_k_v2: transposes (lane x reads a float4 of row x, writes dAt[j4+e][x]) and the tail's float4 reads,
# per (channel c, x0), against the direct intra formulas. fp64.
rng = np.random.default_rng(2)
AP = 68
def run_k2(Cn):
    K = 8  # channels (the index logic does not depend on K)
    b = -np.cumsum(rng.random((kC, K)), axis=0); b[Cn:] = b[Cn-1]
    k = rng.standard_normal((kC, K)); q = rng.standard_normal((kC, K)); k[Cn:] = 0; q[Cn:] = 0
    beta = rng.random(kC); beta[Cn:] = 0
    dA = np.tril(rng.standard_normal((kC, kC))); dA[Cn:] = 0
    dAkk = np.tril(rng.standard_normal((kC, kC)), -1); dAkk[Cn:] = 0
    # smem as flat arrays with pitch AP
    sdA = np.zeros(kC*AP); sdAkk = np.zeros(kC*AP)
    for r in range(kC): sdA[r*AP:r*AP+kC] = dA[r]; sdAkk[r*AP:r*AP+kC] = dAkk[r]
    dAt = np.full(kC*AP, np.nan); dAkkt = np.full(kC*AP, np.nan)
    for u in range(kC*16//256):
        for tid in range(256):
            i = tid + u*256; x = i & 63; j4 = 4*(i >> 6)
            a = sdA[x*AP+j4:x*AP+j4+4]; l = sdAkk[x*AP+j4:x*AP+j4+4]
            for e in range(4): dAt[(j4+e)*AP+x] = a[e]; dAkkt[(j4+e)*AP+x] = l[e]
    ok = True
    for c in range(K):
        for x0 in range(0, 64, 16):
            if x0 >= Cn: continue
            bq = b[x0:x0+16, c]; kq = k[x0:x0+16, c]; qq = q[x0:x0+16, c]
            dqi = np.zeros(16); kr = np.zeros(16); dkt = np.zeros(16)
            bref = bq[0]
            for j in range(x0):
                kt = k[j, c]*np.exp(bref - b[j, c])
                a = dAt[j*AP+x0:j*AP+x0+16]; l = dAkkt[j*AP+x0:j*AP+x0+16]
                dqi += a*kt; kr += l*kt
            e = np.exp(bq - bref); e[0] = 1; dqi *= e; kr *= e
            bref = bq[15]
            for r in range(x0+16, Cn):
                e = np.exp(b[r, c]-bref); qt = q[r, c]*e; kt = beta[r]*k[r, c]*e
                dkt += sdA[r*AP+x0:r*AP+x0+16]*qt + sdAkk[r*AP+x0:r*AP+x0+16]*kt
            e = np.exp(bref - bq); e[15] = 1; dkt *= e
            for i in range(16):
                ar = sdA[(x0+i)*AP+x0:(x0+i)*AP+x0+16]; lr = sdAkk[(x0+i)*AP+x0:(x0+i)*AP+x0+16]
                a_row = qq[i]; l_row = beta[x0+i]*kq[i]
                for j in range(i+1):
                    e = np.exp(bq[i]-bq[j])
                    dqi[i] += ar[j]*kq[j]*e; kr[i] += lr[j]*kq[j]*e; dkt[j] += (ar[j]*a_row + lr[j]*l_row)*e
            # direct
            for i in range(16):
                x = x0 + i
                if x >= Cn: continue
                rdq = sum(dA[x, j]*k[j, c]*np.exp(b[x, c]-b[j, c]) for j in range(x+1))
                rkr = sum(dAkk[x, j]*k[j, c]*np.exp(b[x, c]-b[j, c]) for j in range(x))
                rdk = sum((dA[r, x]*q[r, c] + dAkk[r, x]*beta[r]*k[r, c])*np.exp(b[r, c]-b[x, c]) for r in range(x, Cn))
                if not (np.isclose(dqi[i], rdq) and np.isclose(kr[i], rkr) and np.isclose(dkt[i], rdk)):
                    ok = False
    print('Cn', Cn, 'match' if ok else 'FAIL'); return ok
res_k2 = [run_k2(Cn) for Cn in (1, 17, 40, 63, 64)]
print('grad_k_v2 tail:', sum(res_k2), '/', len(res_k2))

# 3. delta_bwd_state_wg.cuh's wg_store_frags: the state passes' m64nN accumulator (S^T [64 V][N rows]: lane (warp w,
# g8 = lane / 4, t4 = lane % 4) holds x[i] at v = 16 w + g8 + 8 ((i >> 1) & 1), row = 8 (i >> 2) + 2 t4 + (i & 1)),
# split into words f[s][j] = (x[8 s + 2 j], x[8 s + 2 j + 1]) (low, high half), stored as [rows][V] pieces of two
# elements after one shuffle with lane ^ 4 and one byte permute (even g8: (own low, other low); odd: (other high, own
# high)). Every element of the rows below nrows must land once, at its own (row, v); nothing at or past nrows.
def run_store(N, nrows):
    S = rng.standard_normal((N, 64))  # S[row][v]
    x = {}
    for w in range(4):
        for lane in range(32):
            g8, t4 = lane >> 2, lane & 3
            x[(w, lane)] = [S[8*(i >> 2) + 2*t4 + (i & 1), 16*w + g8 + 8*((i >> 1) & 1)] for i in range(N // 2)]
    out = np.full((N, 64), np.nan); cnt = np.zeros((N, 64), int)
    for w in range(4):
        for lane in range(32):
            g8, t4 = lane >> 2, lane & 3
            vrow = 16*w + g8; odd = vrow & 1
            own, other = x[(w, lane)], x[(w, lane ^ 4)]
            base_r, base_c = 2*t4 + odd, vrow - odd  # pt = base + (2 t4 + odd) rs + vrow - odd
            for s_ in range(N // 16):
                for j in range(4):
                    i = 8*s_ + 2*j
                    h, hx = (own[i], own[i + 1]), (other[i], other[i + 1])
                    piece = (hx[1], h[1]) if odd else (h[0], hx[0])
                    r = 8*(2*s_ + (j >> 1))
                    if r + 2*t4 + odd < nrows:
                        R, C = base_r + r, base_c + 8*(j & 1)
                        for e in range(2):
                            out[R, C + e] = piece[e]; cnt[R, C + e] += 1
    ok = np.all(cnt[:nrows] == 1) and np.allclose(out[:nrows], S[:nrows]) and cnt[nrows:].sum() == 0
    print(f"wg_store_frags N={N} nrows={nrows}: {'match' if ok else 'FAIL'}")
    return ok
res_st = [run_store(N, n) for N, n in [(128, 128), (64, 64), (64, 1), (64, 17), (64, 63)]]
print('wg_store_frags:', sum(res_st), '/', len(res_st))
raise SystemExit(0 if all(res_v3) and all(res_k2) and all(res_st) else 1)
