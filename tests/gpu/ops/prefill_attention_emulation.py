# Fragment-level CPU emulation of PrefillAttentionKernel (kernels/cuda/prefill_attention.cu), used to
# check the kernel's index math without a GPU: tile location, swizzled shared-memory rows,
# ldmatrix (.trans) lane -> element mapping and mma.m16n8k16 fragments as the PTX ISA defines them,
# causal masks and the online softmax, against a numpy reference. Mirrors the kernel by hand: keep it
# in step when the kernel's layout changes. Run: python3 tests/gpu/ops/prefill_attention_emulation.py
# (needs numpy; a few seconds). Not collected by pytest.
import numpy as np, math, random
def swz(HD, r, c):  # half-element offset of chunk c of row r
    return r*HD + ((c ^ (r & 7)) * 8)
def ldm(smem, addrs, trans):  # addrs[32] half offsets; returns regs[32][4] as pairs
    regs = [[None]*4 for _ in range(32)]
    for i in range(4):
        M = np.stack([smem[addrs[8*i+r]: addrs[8*i+r]+8] for r in range(8)])  # 8x8
        for l in range(32):
            if not trans: regs[l][i] = (M[l//4, 2*(l%4)], M[l//4, 2*(l%4)+1])
            else: regs[l][i] = (M[2*(l%4), l//4], M[2*(l%4)+1, l//4])
    return regs
def mma(C, A, B0, B1):  # C[32][4], A[32][4] pairs, B0,B1 [32] pairs -> returns new C
    Am = np.zeros((16,16)); Bm = np.zeros((16,8))
    for l in range(32):
        g, t = l//4, l%4
        Am[g, 2*t:2*t+2] = A[l][0]; Am[g+8, 2*t:2*t+2] = A[l][1]
        Am[g, 2*t+8:2*t+10] = A[l][2]; Am[g+8, 2*t+8:2*t+10] = A[l][3]
        Bm[2*t:2*t+2, g] = B0[l]; Bm[2*t+8:2*t+10, g] = B1[l]
    D = Am @ Bm
    out = []
    for l in range(32):
        g, t = l//4, l%4
        out.append([C[l][0]+D[g,2*t], C[l][1]+D[g,2*t+1], C[l][2]+D[g+8,2*t], C[l][3]+D[g+8,2*t+1]])
    return out
f16 = lambda x: np.float16(x).astype(np.float64)

def run(HD, warps, keys, heads, kvh, seqs, page_size, seed):
    rng = np.random.default_rng(seed)
    group = heads // kvh
    rows = warps*16; bq = rows // group
    T = sum(n for _, n in seqs)
    tb = [0]
    for _, n in seqs: tb.append(tb[-1]+n)
    positions = [sp+i for sp, n in seqs for i in range(n)]
    # pages
    need = [ (sp+n+page_size-1)//page_size for sp, n in seqs]
    ids = list(range(sum(need)+3)); random.Random(seed).shuffle(ids)
    tables = []; k = 0
    for nd in need: tables.append(ids[k:k+nd]); k += nd
    num_pages = len(ids)
    K = rng.standard_normal((num_pages, page_size, kvh, HD)); V = rng.standard_normal((num_pages, page_size, kvh, HD))
    q = rng.standard_normal((T, heads, HD)); gate = rng.standard_normal((T, heads, HD))
    scale = 3/math.sqrt(HD); qs = scale*1.4426950408889634
    out = np.full((T, heads, HD), np.nan)
    # reference
    ref = np.full((T, heads, HD), np.nan)
    for s,(sp,n) in enumerate(seqs):
        if n <= 4: continue
        for i in range(n):
            t = tb[s]+i; p = positions[t]
            ks = np.stack([K[tables[s][x//page_size], x%page_size] for x in range(p+1)])
            vs = np.stack([V[tables[s][x//page_size], x%page_size] for x in range(p+1)])
            for h in range(heads):
                sc = ks[:, h//group] @ q[t,h] * scale
                w = np.exp(sc - sc.max()); w /= w.sum()
                ref[t,h] = (w @ vs[:, h//group]) / (1+np.exp(-gate[t,h]))
    ntiles_total = (T + bq - 1)//bq + len(seqs)
    for bx in range(ntiles_total * kvh):
        g = bx % kvh; tile_id = bx // kvh
        # LocateTile
        info = None; base = 0
        for s in range(len(seqs)):
            n = tb[s+1]-tb[s]; nt = (n+bq-1)//bq if n > 4 else 0
            if nt and base <= tile_id < base+nt:
                kk = tile_id-base; end = n-kk*bq; begin = max(0, end-bq)
                info = (s, tb[s]+begin, end-begin)
            base += nt
        if info is None: continue
        seq, t0, nq = info
        sQ = np.zeros(rows*HD)
        for r in range(rows):
            tok = r//group
            for c in range(HD//8):
                if tok < nq:
                    sQ[swz(HD,r,c):swz(HD,r,c)+8] = f16(q[t0+tok, g*group+r%group, c*8:c*8+8]*qs)
        ctx = positions[t0+nq-1]+1
        ntl = (ctx+keys-1)//keys
        st = []
        for w in range(warps):
            st.append(dict(o=[[ [0.0]*4 for _ in range(HD//8)] for _ in range(32)], m=[[-math.inf,-math.inf] for _ in range(32)], l=[[0.0,0.0] for _ in range(32)]))
        for it in range(ntl):
            kb = it*keys
            sK = np.zeros(keys*HD); sV = np.zeros(keys*HD)
            for j in range(keys):
                for c in range(HD//8):
                    if kb+j < ctx:
                        pg = tables[seq][(kb+j)//page_size]; sl = (kb+j)%page_size
                        sK[swz(HD,j,c):swz(HD,j,c)+8] = f16(K[pg, sl, g, c*8:c*8+8]); sV[swz(HD,j,c):swz(HD,j,c)+8] = f16(V[pg, sl, g, c*8:c*8+8])
            for w in range(warps):
                ft = (w*16)//group; lt = min(nq-1, (w*16+15)//group)
                active = ft < nq
                wmin = positions[t0+ft] if active else -1; wmax = positions[t0+lt] if active else -1
                if kb > wmax: continue
                S = [[[0.0]*4 for _ in range(keys//8)] for _ in range(32)]
                for d in range(HD//16):
                    A = ldm(sQ, [ (w*16+(l&15))*HD + (((2*d+(l>>4)) ^ (l&7))*8) for l in range(32)], False)
                    for jp in range(keys//16):
                        B = ldm(sK, [ (jp*16 + (l>>4)*8 + (l&7))*HD + (((2*d+((l>>3)&1)) ^ (l&7))*8) for l in range(32)], False)
                        C0 = mma([S[l][2*jp] for l in range(32)], A, [B[l][0] for l in range(32)], [B[l][1] for l in range(32)])
                        C1 = mma([S[l][2*jp+1] for l in range(32)], A, [B[l][2] for l in range(32)], [B[l][3] for l in range(32)])
                        for l in range(32): S[l][2*jp] = C0[l]; S[l][2*jp+1] = C1[l]
                masked = kb+keys-1 > wmin
                P = [None]*32
                mx = []
                for l in range(32):
                    rl = w*16 + l//4; rh = rl+8
                    qpl = positions[t0+rl//group] if rl//group < nq else -1
                    qph = positions[t0+rh//group] if rh//group < nq else -1
                    for n in range(keys//8):
                        for e in range(4):
                            if masked:
                                key = kb + n*8 + 2*(l&3) + (e&1)
                                if key > (qpl if e < 2 else qph): S[l][n][e] = -math.inf
                for l in range(32):
                    q0 = l & ~3
                    mlo = max(max(S[x][n][0], S[x][n][1]) for x in range(q0,q0+4) for n in range(keys//8))
                    mhi = max(max(S[x][n][2], S[x][n][3]) for x in range(q0,q0+4) for n in range(keys//8))
                    mx.append((mlo, mhi))
                for l in range(32):
                    sd = st[w]; 
                    newm = [max(sd['m'][l][0], mx[l][0]), max(sd['m'][l][1], mx[l][1])]
                    base_ = [0.0 if x == -math.inf else x for x in newm]
                    alpha = [2**(sd['m'][l][i]-base_[i]) if sd['m'][l][i] != -math.inf else 0.0 for i in range(2)]
                    sd['m'][l] = newm
                    sd['l'][l] = [sd['l'][l][0]*alpha[0], sd['l'][l][1]*alpha[1]]
                    for n in range(HD//8):
                        o = sd['o'][l][n]; sd['o'][l][n] = [o[0]*alpha[0], o[1]*alpha[0], o[2]*alpha[1], o[3]*alpha[1]]
                    for n in range(keys//8):
                        for e in range(4):
                            S[l][n][e] = 2**(S[l][n][e]-base_[e//2]) if S[l][n][e] != -math.inf else 0.0
                        sd['l'][l][0] += S[l][n][0]+S[l][n][1]; sd['l'][l][1] += S[l][n][2]+S[l][n][3]
                for kk in range(keys//16):
                    A = [ ((f16(S[l][2*kk][0]), f16(S[l][2*kk][1])), (f16(S[l][2*kk][2]), f16(S[l][2*kk][3])), (f16(S[l][2*kk+1][0]), f16(S[l][2*kk+1][1])), (f16(S[l][2*kk+1][2]), f16(S[l][2*kk+1][3]))) for l in range(32)]
                    for dn in range(HD//16):
                        B = ldm(sV, [ (kk*16 + ((l>>3)&1)*8 + (l&7))*HD + (((2*dn+(l>>4)) ^ (l&7))*8) for l in range(32)], True)
                        C0 = mma([st[w]['o'][l][2*dn] for l in range(32)], A, [B[l][0] for l in range(32)], [B[l][1] for l in range(32)])
                        C1 = mma([st[w]['o'][l][2*dn+1] for l in range(32)], A, [B[l][2] for l in range(32)], [B[l][3] for l in range(32)])
                        for l in range(32): st[w]['o'][l][2*dn] = C0[l]; st[w]['o'][l][2*dn+1] = C1[l]
        for w in range(warps):
            for l in range(32):
                q0 = l & ~3
                L = [sum(st[w]['l'][x][i] for x in range(q0,q0+4)) for i in range(2)]
                for half in range(2):
                    r = w*16 + l//4 + 8*half; tok = r//group
                    if tok >= nq: continue
                    t = t0+tok; h = g*group + r%group
                    for n in range(HD//8):
                        d = n*8 + 2*(l&3)
                        for e in range(2):
                            y = st[w]['o'][l][n][2*half+e] / L[half] / (1+math.exp(-gate[t,h,d+e]))
                            assert math.isnan(out[t,h,d+e]), ("written twice", t, h, d+e)
                            out[t,h,d+e] = y
    mask = ~np.isnan(ref)
    assert np.array_equal(mask, ~np.isnan(out)), "coverage differs"
    err = np.abs(out[mask]-ref[mask]).max() / np.abs(ref[mask]).max()
    print(f"HD {HD} warps {warps} keys {keys} heads {heads}/{kvh} page {page_size}: rel err {err:.2e}")
    assert err < 6e-3

run(64, 2, 32, 6, 2, [(0, 13), (5, 1), (37, 9), (0, 5)], 3, 1)
run(64, 2, 32, 2, 2, [(0, 40), (70, 2), (20, 33)], 5, 2)
run(64, 4, 64, 8, 1, [(3, 21), (0, 6)], 16, 3)
run(256, 8, 64, 8, 2, [(0, 40), (60, 7), (3, 1)], 16, 4)
run(128, 4, 32, 16, 1, [(10, 70), (0, 1)], 7, 5)
