// Causal multi-head attention over a packed batch, and its KV-cache decode form.
//
// Work items are (query row, head) pairs — (key row, head) for dK, dV — one warp each, taken
// in a grid-stride loop. Lanes split the keys for scores (each lane a full dot product), then
// split the head's channels for the weighted sums over keys, which run in key order: every sum
// has a fixed order, there are no atomics, and the backward never needs the (T, T)
// probability matrix: it recomputes probabilities from the forward's per-row log-sum-exp.
//
// bounds (6n ints) gives each row six row numbers of the packed batch: its sequence [start,
// end) (start -1 for a row outside every sequence), the rows of the prefix it continues
// [ps, pe) (empty if none: its keys are those rows, then its own sequence's up to itself), and
// for a prefix's row, the rows of its continuations [cs, ce) (empty otherwise: its later
// queries are its own sequence's, then all of those). qkv rows are (3c): q, k, v, head h at
// h·hd. Dynamic shared memory is per warp; the host sizes it from tmax, the most keys of a
// query row (forward, dq) or the most queries of a key row (dk, dv).
#include "common.cuh"

// q·k over hd channels, in channel order.
__device__ __forceinline__ float rkcu_dot(const float* a, const float* b, int hd) {
	float d = 0.0f;
	for (int e = 0; e < hd; e++) d += a[e] * b[e];
	return d;
}

// Key j of a query's n1 + n2 keys: the first n1 at k1 + j·stride (a prefix), then n2 at
// k2 (its own sequence). Values sit at the same rows, c floats after the keys' for packed
// rows; the decode passes its own value base.
__device__ __forceinline__ const float* rkcu_key(const float* k1, int n1, const float* k2, int j, long long stride) {
	return j < n1 ? k1 + j * stride : k2 + (j - n1) * stride;
}

// Shared by the packed forward and the decode: given the warp's query q (shared), keys and
// values in two runs (n1 at k1, v1 then n2 at k2, v2, rows stride apart), writes the head's
// output and returns the log-sum-exp of the scaled scores. s is the warp's shared score
// buffer (n1 + n2 floats).
__device__ float rkcu_attend(float* outp, const float* q, float* s, const float* k1, const float* v1, int n1,
                             const float* k2, const float* v2, int n2, long long stride, int hd, float scale) {
	int lane = rkcu_lane(), nk = n1 + n2;
	float mx = -INFINITY;
	for (int j = lane; j < nk; j += 32) {
		float d = rkcu_dot(q, rkcu_key(k1, n1, k2, j, stride), hd) * scale;
		s[j] = d;
		mx = rkcu_max_nan(mx, d);
	}
	mx = warp_max_nan(mx);
	float sum = 0.0f;
	for (int j = lane; j < nk; j += 32) {
		float p = expf(s[j] - mx);
		s[j] = p;
		sum += p;
	}
	sum = warp_sum(sum);
	__syncwarp(); // every lane's s[j] is visible before the weighted sum reads them all
	float inv = 1.0f / sum;
	for (int e = lane; e < hd; e += 32) {
		float acc = 0.0f;
		for (int j = 0; j < n1; j++) acc += s[j] * v1[j * stride + e];
		for (int j = 0; j < n2; j++) acc += s[n1 + j] * v2[j * stride + e];
		outp[e] = acc * inv;
	}
	return mx + logf(sum);
}

// Forward: out (n, c) and lse (n, nh). Shared per warp: hd + tmax floats.
extern "C" __global__ void rkcu_attention_forward(float* out, float* lse, const float* qkv, const int* bounds, int n,
                                                  int nh, int c, int tmax) {
	int lane = rkcu_lane(), hd = c / nh;
	float scale = 1.0f / sqrtf((float)hd);
	float* q = dynamic_smem<float>() + (long long)rkcu_warp() * (hd + tmax);
	float* s = q + hd;
	long long c3 = 3LL * c;
	RKCU_WARP_LOOP(item, (long long)n * nh) {
		int row = (int)(item / nh), h = (int)(item % nh);
		const int* bd = bounds + 6LL * row;
		int start = bd[0], ps = bd[2], pe = bd[3];
		if (start < 0) continue;
		const float* qrow = qkv + row * c3 + h * hd;
		for (int e = lane; e < hd; e += 32) q[e] = qrow[e];
		__syncwarp();
		const float* kp = qkv + ps * c3 + c + h * hd;
		const float* kbase = qkv + start * c3 + c + h * hd;
		float l = rkcu_attend(out + (long long)row * c + h * hd, q, s, kp, kp + c, pe - ps, kbase, kbase + c, row - start + 1,
		                      c3, hd, scale);
		if (lane == 0) lse[(long long)row * nh + h] = l;
		__syncwarp(); // the next item overwrites q and s
	}
}

// Backward, pass 1 (query rows): D_r = dy_r·y_r (saved in dd (n, nh) for pass 2), then with
// P_rj = exp(scale·q_r·k_j − lse_r) recomputed and dS_rj = P_rj(dy_r·v_j − D_r),
// dq_r = scale·Σ_j dS_rj k_j over the row's keys (prefix, then own). Shared per warp:
// 2hd + tmax floats.
extern "C" __global__ void rkcu_attention_backward_dq(float* dqkv, float* dd, const float* dout, const float* out,
                                                      const float* lse, const float* qkv, const int* bounds, int n, int nh,
                                                      int c, int tmax) {
	int lane = rkcu_lane(), hd = c / nh;
	float scale = 1.0f / sqrtf((float)hd);
	float* q = dynamic_smem<float>() + (long long)rkcu_warp() * (2 * hd + tmax);
	float* dy = q + hd;
	float* ds = dy + hd;
	long long c3 = 3LL * c;
	RKCU_WARP_LOOP(item, (long long)n * nh) {
		int row = (int)(item / nh), h = (int)(item % nh);
		const int* bd = bounds + 6LL * row;
		int start = bd[0], ps = bd[2], np = bd[3] - bd[2];
		if (start < 0) continue;
		const float* qrow = qkv + row * c3 + h * hd;
		const float* dyrow = dout + (long long)row * c + h * hd;
		const float* yrow = out + (long long)row * c + h * hd;
		float d = 0.0f;
		for (int e = lane; e < hd; e += 32) {
			q[e] = qrow[e];
			dy[e] = dyrow[e];
			d += dyrow[e] * yrow[e];
		}
		d = warp_sum(d);
		__syncwarp(); // q and dy are read by every lane below
		if (lane == 0) dd[(long long)row * nh + h] = d;
		float l = lse[(long long)row * nh + h];
		int nk = np + row - start + 1;
		const float* kp = qkv + ps * c3 + c + h * hd;
		const float* kbase = qkv + start * c3 + c + h * hd;
		for (int j = lane; j < nk; j += 32) {
			const float* k = rkcu_key(kp, np, kbase, j, c3);
			float p = expf(rkcu_dot(q, k, hd) * scale - l);
			ds[j] = p * (rkcu_dot(dy, k + c, hd) - d);
		}
		__syncwarp();
		float* dq = dqkv + row * c3 + h * hd;
		for (int e = lane; e < hd; e += 32) {
			float acc = 0.0f;
			for (int j = 0; j < nk; j++) acc += ds[j] * rkcu_key(kp, np, kbase, j, c3)[e];
			dq[e] = acc * scale;
		}
		__syncwarp(); // the next item overwrites q, dy and ds
	}
}

// Backward, pass 2 (key rows): for key j and every query r that sees it — the later rows of
// its sequence, then, for a prefix's row, every row of its continuations —
// dv_j = Σ_r P_rj dy_r and dk_j = scale·Σ_r dS_rj q_r, in query order. Needs dd from pass 1.
// Shared per warp: 2hd + 2tmax floats.
extern "C" __global__ void rkcu_attention_backward_dkv(float* dqkv, const float* dd, const float* dout, const float* lse,
                                                       const float* qkv, const int* bounds, int n, int nh, int c,
                                                       int tmax) {
	int lane = rkcu_lane(), hd = c / nh;
	float scale = 1.0f / sqrtf((float)hd);
	float* k = dynamic_smem<float>() + (long long)rkcu_warp() * (2 * hd + 2 * tmax);
	float* v = k + hd;
	float* p = v + hd;
	float* ds = p + tmax;
	long long c3 = 3LL * c;
	RKCU_WARP_LOOP(item, (long long)n * nh) {
		int row = (int)(item / nh), h = (int)(item % nh);
		const int* bd = bounds + 6LL * row;
		int end = bd[1], cs = bd[4], nown = end - row;
		if (bd[0] < 0) continue;
		const float* krow = qkv + row * c3 + c + h * hd;
		for (int e = lane; e < hd; e += 32) {
			k[e] = krow[e];
			v[e] = krow[c + e];
		}
		__syncwarp();
		// Query i is row row + i for i < nown, then row cs + i − nown.
		int nq = nown + bd[5] - cs;
		for (int i = lane; i < nq; i += 32) {
			long long r = i < nown ? row + i : cs + (i - nown);
			float pr = expf(rkcu_dot(qkv + r * c3 + h * hd, k, hd) * scale - lse[r * nh + h]);
			p[i] = pr;
			ds[i] = pr * (rkcu_dot(dout + r * c + h * hd, v, hd) - dd[r * nh + h]);
		}
		__syncwarp();
		float* dk = dqkv + row * c3 + c + h * hd;
		for (int e = lane; e < hd; e += 32) {
			float av = 0.0f, ak = 0.0f;
			for (int i = 0; i < nq; i++) {
				long long r = i < nown ? row + i : cs + (i - nown);
				av += p[i] * dout[r * c + h * hd + e];
				ak += ds[i] * qkv[r * c3 + h * hd + e];
			}
			dk[c + e] = av;
			dk[e] = ak * scale;
		}
		__syncwarp(); // the next item overwrites k, v, p and ds
	}
}

// Stores the k and v parts of qkv row i at position pos[i] of cache slot slot[i]. Rows whose
// slot or position is outside the cache are skipped (the model validates them on the host).
extern "C" __global__ void rkcu_kv_write(float* kc, float* vc, const float* qkv, const int* slot, const int* pos, int n,
                                         int c, int cap, int slots) {
	RKCU_GRID_LOOP(i, (long long)n * c) {
		long long r = i / c, e = i - r * c;
		int s = slot[r], p = pos[r];
		if (s < 0 || s >= slots || p < 0 || p >= cap) continue;
		long long dst = ((long long)s * cap + p) * c + e;
		kc[dst] = qkv[r * 3 * c + c + e];
		vc[dst] = qkv[r * 3 * c + 2 * c + e];
	}
}

// Decode: row i's k and v go into slot slot[i] at pos[i] (as rkcu_kv_write puts them, a warp
// its head's part), then the row attends with its q over positions 0..pos[i] of its slot; when
// shared is not null, a slot s reads its positions below shared[2s+1] from slot shared[2s] (a
// prompt cached once for several samples, below any position a row writes). Shared per warp:
// hd + cap floats.
extern "C" __global__ void rkcu_attention_decode(float* out, const float* qkv, float* kc, float* vc,
                                                 const int* shared, const int* slot, const int* pos, int n, int nh, int c,
                                                 int cap, int slots) {
	int lane = rkcu_lane(), hd = c / nh;
	float scale = 1.0f / sqrtf((float)hd);
	float* q = dynamic_smem<float>() + (long long)rkcu_warp() * (hd + cap);
	float* s = q + hd;
	RKCU_WARP_LOOP(item, (long long)n * nh) {
		int row = (int)(item / nh), h = (int)(item % nh);
		int sl = slot[row], ps = pos[row];
		if (sl < 0 || sl >= slots || ps < 0 || ps >= cap) continue;
		const float* qrow = qkv + (long long)row * 3 * c + h * hd;
		long long own = ((long long)sl * cap + ps) * c + h * hd;
		for (int e = lane; e < hd; e += 32) {
			q[e] = qrow[e];
			kc[own + e] = qrow[c + e];
			vc[own + e] = qrow[2 * c + e];
		}
		__syncwarp(); // the warp's writes, q's and the cache's, seen by all its lanes
		int src = sl, n1 = 0;
		if (shared) {
			src = shared[2 * sl];
			n1 = shared[2 * sl + 1];
			if (src < 0 || src >= slots || n1 < 0) src = sl, n1 = 0;
			if (n1 > ps + 1) n1 = ps + 1;
		}
		long long b1 = (long long)src * cap * c + h * hd, b2 = ((long long)sl * cap + n1) * c + h * hd;
		rkcu_attend(out + (long long)row * c + h * hd, q, s, kc + b1, vc + b1, n1, kc + b2, vc + b2, ps + 1 - n1, c, hd,
		            scale);
		__syncwarp(); // the next item overwrites q and s
	}
}
