# Host model (numpy, no GPU) of the K = 256 wgmma state kernel's shared-memory layouts: writes a stage
# exactly as the prep (record tiles) and the state kernel (v tile) do, then reads every wgmma operand
# through its descriptor as CuTe's canonical SW128 layouts define it (K-major ((8,n),2):((8,SBO),1),
# MN-major ((8,n),(8,k)):((1,LBO),(8,SBO)) in 16-byte units, Swizzle<3,4,3> on byte addresses) and
# checks the accumulator / register-A fragment identity (CLayout_64xN, ALayout_64x16). It checks the
# index arithmetic against those definitions, not the hardware. Run: python3 tests/cuda/d256_wgmma_layout_model.py
import numpy as np
rng = np.random.default_rng(1)
T, K, V = 64, 256, 64
def sw_phys(addr):  # Swizzle<3,4,3> on byte addresses
    return addr ^ (((addr >> 7) & 7) << 4)
def sw128(row, col):  # element offset, kernel's helper
    return row * 64 + ((((col >> 3) ^ row) & 7) << 3) + (col & 7)
wtile = 8192
wrec_qe, wrec_ke, wrec_a, wrec_meta = 0, 4 * wtile, 8 * wtile, 10 * wtile
ws_rec = wtile
smem = np.zeros(2 * 93184, dtype=np.float64)  # element-addressed by byte/2 (bf16 slots); meta ignored
def put(byte, val): smem[byte // 2] = val
def get(byte): return smem[byte // 2]
qe = rng.standard_normal((T, K)); ke = rng.standard_normal((T, K)); v = rng.standard_normal((T, V))
Ahi = np.tril(rng.standard_normal((T, T))); Alo = np.tril(rng.standard_normal((T, T))) * 1e-3
st = 1; stg = st * 93184
# prep writes (qk_at), record at stg + ws_rec
for r in range(T):
    for c in range(K):
        off = (c >> 6) * 4096 + sw128(r, c & 63)
        put(stg + ws_rec + wrec_qe + 2 * off, qe[r, c]); put(stg + ws_rec + wrec_ke + 2 * off, ke[r, c])
# A: 16-byte units, dst = hl*4096 + r*64 + (((c8^r)&7)<<3), causal units only (rest zero)
for hl, M in ((0, Ahi), (1, Alo)):
    for r in range(T):
        for c8 in range(8):
            for i in range(8):
                val = M[r, 8 * c8 + i] if c8 < 2 * ((r >> 4) + 1) else 0.0
                put(stg + ws_rec + wrec_a + 2 * (hl * 4096 + r * 64 + (((c8 ^ r) & 7) << 3) + i), val)
# v: cp.async pieces to stg + sw128_piece(r, c8)
for r in range(T):
    for c8 in range(8):
        for i in range(8):
            put(stg + r * 128 + (((c8 ^ r) & 7) << 4) + 2 * i, v[r, 8 * c8 + i])
sbase = 0
a_v = sbase + stg; a_rec = a_v + ws_rec
def read_k(start, sbo, N):  # K-major operand [N][16]
    out = np.zeros((N, 16))
    for mn in range(N):
        for k in range(16):
            out[mn, k] = get(sw_phys(start + (mn % 8) * 128 + (mn // 8) * sbo + 2 * k))
    return out
def read_mn(start, lbo, sbo, N):  # MN-major operand [N][16]
    out = np.zeros((N, 16))
    for mn in range(N):
        for k in range(16):
            out[mn, k] = get(sw_phys(start + (mn % 64) * 2 + (mn // 64) * lbo + (k % 8) * 128 + (k // 8) * sbo))
    return out
ok = True
def chk(name, a, b):
    global ok
    e = np.abs(a - b).max(); print(f"{name}: max abs diff {e:.3g}"); ok &= e < 1e-9
for kh in range(2):
    # o GEMM B operand: qe tile 2kh + ks/4, +32*(ks%4): B[n=tok][k=ch]
    for ks in range(8):
        B = read_k(a_rec + wrec_qe + (2 * kh + ks // 4) * wtile + (ks % 4) * 32, 1024, 64)
        chk(f"qe kh{kh} ks{ks}", B, qe[:, 128 * kh + 16 * ks: 128 * kh + 16 * ks + 16])
    # state update: A = v^T [m=V][k=tok], B = ke [n=ch][k=tok]
    for ks in range(4):
        A = read_mn(a_v + ks * 2048, wtile, 1024, 64)
        chk(f"v^T ks{ks}", A, v[16 * ks:16 * ks + 16, :].T)
        B = read_mn(a_rec + wrec_ke + 2 * kh * wtile + ks * 2048, wtile, 1024, 128)
        chk(f"ke kh{kh} ks{ks}", B, ke[16 * ks:16 * ks + 16, 128 * kh:128 * kh + 128].T)
    # A @ v: B[n=tok][k=tok'] = A[tok][tok'], blocks rbA = kh (kk 0,1), rbB = 3 - kh (kk 0..3)
    for j, rb in ((0, kh), (1, 3 - kh)):
        for kk in range(2 + 2 * j):
            ab = a_rec + wrec_a + kk * 32 + rb * 2048
            for hl, M in ((0, Ahi), (1, Alo)):
                B = read_k(ab + hl * wtile, 1024, 16)
                chk(f"A{hl} rb{rb} kk{kk}", B, M[16 * rb:16 * rb + 16, 16 * kk:16 * kk + 16])
# register fragments: CLayout_64xN: thread t=(t0,t1,t2) -> m = t1 + 16 t2, value (v0,v1,v2) -> n = 2 t0 + v0 + 8 v2, m += 8 v1
# kernel: ht[4 nt + e] at (v = 16 w + g8 + 8 (e>=2), ch = 8 nt + 2 t4 + (e&1)); check same mapping
for w in range(4):
    for lane in range(32):
        g8, t4 = lane >> 2, lane & 3
        for idx in range(64):
            v0, v1, v2 = idx & 1, (idx >> 1) & 1, idx >> 2
            m_c, n_c = g8 + 16 * w + 8 * v1, 2 * t4 + v0 + 8 * v2
            nt, e = idx // 4, idx % 4
            m_k, n_k = 16 * w + g8 + (8 if e >= 2 else 0), 8 * nt + 2 * t4 + (e & 1)
            assert (m_c, n_c) == (m_k, n_k)
        # ALayout_64x16: value (v0,v1,v2) strides (64, 8, 512) over (m + 64 k): k += v0, m += 8 v1, k += 8 v2
        for ks in range(8):
            for i in range(4):
                for h in range(2):
                    val = 2 * i + h; v0, v1, v2 = val & 1, (val >> 1) & 1, val >> 2
                    m_a, k_a = g8 + 16 * w + 8 * v1, 2 * t4 + v0 + 8 * v2
                    # kernel packs af[ks][i] from ht[8 ks + 2 i + h]
                    idx = 8 * ks + 2 * i + h; nt, e = idx // 4, idx % 4
                    m_k, n_k = 16 * w + g8 + (8 if e >= 2 else 0), 8 * nt + 2 * t4 + (e & 1)
                    assert (m_a, 16 * ks + k_a) == (m_k, n_k), (w, lane, ks, i, h)
print("fragment identity OK")
print("ALL OK" if ok else "MISMATCH")
