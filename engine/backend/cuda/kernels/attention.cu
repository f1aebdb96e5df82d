// Causal multi-head attention over a packed batch, and its KV-cache decode form.
//
// Work items are (query row, head) pairs — (key row, head) for dK, dV — one warp each, taken
// in a grid-stride loop. Lanes split the keys for scores (each lane a full dot product), then
// split the head's channels for the weighted sums over keys, which run in key order: every sum
// has a fixed order, there are no atomics, and the backward never needs the (T, T)
// probability matrix: it recomputes probabilities from the forward's per-row log-sum-exp.
//
// bounds (2n ints) gives each row's sequence as [start, end) rows of the packed batch, or
// (-1, -1) for a row outside every sequence. qkv rows are (3c): q, k, v, head h at h·hd.
// Dynamic shared memory is per warp; the host sizes it from the longest sequence (tmax).
#include "common.cuh"

// q·k over hd channels, in channel order.
__device__ __forceinline__ float rkcu_dot(const float* a, const float* b, int hd) {
	float d = 0.0f;
	for (int e = 0; e < hd; e++) d += a[e] * b[e];
	return d;
}

// Shared by the packed forward and the decode: given the warp's query q (shared), keys and
// values at key_base + j·stride for j < nk, writes the head's output and returns the
// log-sum-exp of the scaled scores. s is the warp's shared score buffer (nk floats).
__device__ float rkcu_attend(float* outp, const float* q, float* s, const float* kbase, const float* vbase,
                             long long stride, int nk, int hd, float scale) {
	int lane = rkcu_lane();
	float mx = -INFINITY;
	for (int j = lane; j < nk; j += 32) {
		float d = rkcu_dot(q, kbase + j * stride, hd) * scale;
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
		for (int j = 0; j < nk; j++) acc += s[j] * vbase[j * stride + e];
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
		int start = bounds[2 * row];
		if (start < 0) continue;
		const float* qrow = qkv + row * c3 + h * hd;
		for (int e = lane; e < hd; e += 32) q[e] = qrow[e];
		__syncwarp();
		const float* kbase = qkv + start * c3 + c + h * hd;
		float l = rkcu_attend(out + (long long)row * c + h * hd, q, s, kbase, kbase + c, c3, row - start + 1, hd, scale);
		if (lane == 0) lse[(long long)row * nh + h] = l;
		__syncwarp(); // the next item overwrites q and s
	}
}

// Backward, pass 1 (query rows): D_r = dy_r·y_r (saved in dd (n, nh) for pass 2), then with
// P_rj = exp(scale·q_r·k_j − lse_r) recomputed and dS_rj = P_rj(dy_r·v_j − D_r),
// dq_r = scale·Σ_j dS_rj k_j. Shared per warp: 2hd + tmax floats.
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
		int start = bounds[2 * row];
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
		int nk = row - start + 1;
		const float* kbase = qkv + start * c3 + c + h * hd;
		for (int j = lane; j < nk; j += 32) {
			const float* k = kbase + j * c3;
			float p = expf(rkcu_dot(q, k, hd) * scale - l);
			ds[j] = p * (rkcu_dot(dy, k + c, hd) - d);
		}
		__syncwarp();
		float* dq = dqkv + row * c3 + h * hd;
		for (int e = lane; e < hd; e += 32) {
			float acc = 0.0f;
			for (int j = 0; j < nk; j++) acc += ds[j] * kbase[j * c3 + e];
			dq[e] = acc * scale;
		}
		__syncwarp(); // the next item overwrites q, dy and ds
	}
}

// Backward, pass 2 (key rows): for key j and every later query r of its sequence,
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
		int end = bounds[2 * row + 1];
		if (end < 0) continue;
		const float* krow = qkv + row * c3 + c + h * hd;
		for (int e = lane; e < hd; e += 32) {
			k[e] = krow[e];
			v[e] = krow[c + e];
		}
		__syncwarp();
		int nq = end - row;
		const float* qbase = qkv + row * c3 + h * hd;
		const float* dybase = dout + (long long)row * c + h * hd;
		for (int i = lane; i < nq; i += 32) {
			long long r = row + i;
			float pr = expf(rkcu_dot(qbase + i * c3, k, hd) * scale - lse[r * nh + h]);
			p[i] = pr;
			ds[i] = pr * (rkcu_dot(dybase + (long long)i * c, v, hd) - dd[r * nh + h]);
		}
		__syncwarp();
		float* dk = dqkv + row * c3 + c + h * hd;
		for (int e = lane; e < hd; e += 32) {
			float av = 0.0f, ak = 0.0f;
			for (int i = 0; i < nq; i++) {
				av += p[i] * dybase[(long long)i * c + e];
				ak += ds[i] * qbase[i * c3 + e];
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

// Decode: row i attends with its q over positions 0..pos[i] of slot slot[i] (which already
// holds its own k, v). Shared per warp: hd + cap floats.
extern "C" __global__ void rkcu_attention_decode(float* out, const float* qkv, const float* kc, const float* vc,
                                                 const int* slot, const int* pos, int n, int nh, int c, int cap, int slots) {
	int lane = rkcu_lane(), hd = c / nh;
	float scale = 1.0f / sqrtf((float)hd);
	float* q = dynamic_smem<float>() + (long long)rkcu_warp() * (hd + cap);
	float* s = q + hd;
	RKCU_WARP_LOOP(item, (long long)n * nh) {
		int row = (int)(item / nh), h = (int)(item % nh);
		int sl = slot[row], ps = pos[row];
		if (sl < 0 || sl >= slots || ps < 0 || ps >= cap) continue;
		const float* qrow = qkv + (long long)row * 3 * c + h * hd;
		for (int e = lane; e < hd; e += 32) q[e] = qrow[e];
		__syncwarp();
		long long base = (long long)sl * cap * c + h * hd;
		rkcu_attend(out + (long long)row * c + h * hd, q, s, kc + base, vc + base, c, ps + 1, hd, scale);
		__syncwarp(); // the next item overwrites q and s
	}
}
