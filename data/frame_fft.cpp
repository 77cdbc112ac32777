// Real FFTs of 8 frames at once (frame_fft.h).
#include "data/frame_fft.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace wavetrain::data {
namespace {

constexpr int64_t L = kFrameFftLanes;

// The tables and work arrays one transform reads and writes (a FrameFft's members).
template <typename T>
struct Plan {
  int64_t m;
  const int64_t* reverse;
  const T *twiddle_re, *twiddle_im, *post_re, *post_im;
  T *re, *im;               // the transform's work arrays, [m][8]
  T *packed_re, *packed_im;  // the inverse's packed input, [m][8]
};

// 8 lanes as one value: GCC's vector extension makes each operation on it one AVX instruction
// (two on SSE2; for double two and four). Plain loops over the lanes were left scalar: GCC does not
// trust __restrict on pointers into one array. The arrays are only as aligned as T, so they are
// read and written through Unaligned, the same vector at T's alignment (and allowed to alias T).
template <typename T>
struct LanesOf;
template <>
struct LanesOf<float> {
  typedef float type __attribute__((vector_size(sizeof(float) * L)));
  typedef float unaligned __attribute__((vector_size(sizeof(float) * L), aligned(alignof(float)), may_alias));
};
template <>
struct LanesOf<double> {
  typedef double type __attribute__((vector_size(sizeof(double) * L)));
  typedef double unaligned __attribute__((vector_size(sizeof(double) * L), aligned(alignof(double)), may_alias));
};
template <typename T>
using Lanes = typename LanesOf<T>::type;
template <typename T>
using Unaligned = typename LanesOf<T>::unaligned;
#define WT_LOAD(T, p) (*reinterpret_cast<const Unaligned<T>*>(p))
#define WT_STORE(T, p, v) (*reinterpret_cast<Unaligned<T>*>(p) = (v))

// The lanes' complex input z[t] = rows[l][2t] + i rows[l][2t+1], each sample times window[j] when
// there is a window (the product rounded first, as at::stft's frames are).
template <typename T>
struct RowGather {
  const T* const* rows;
  const T* window;  // n values, or null
  inline __attribute__((always_inline)) void operator()(int64_t t, Lanes<T>& r, Lanes<T>& i) const {
    for (int64_t l = 0; l < L; ++l) {
      r[l] = rows[l][2 * t];
      i[l] = rows[l][2 * t + 1];
    }
    if (window) {
      r *= window[2 * t];
      i *= window[2 * t + 1];
    }
  }
};

// z[t] already in lanes, [m][8] each (the inverse transform's packed input).
template <typename T>
struct LaneGather {
  const T *re, *im;
  inline __attribute__((always_inline)) void operator()(int64_t t, Lanes<T>& r, Lanes<T>& i) const {
    r = WT_LOAD(T, re + t * L);
    i = WT_LOAD(T, im + t * L);
  }
};

// Z = the m-point DFT of z (gather(t, re, im) gives z[t] of the 8 lanes), into plan.re / plan.im
// [m][8].
template <typename T, typename Gather>
inline __attribute__((always_inline)) void complex_fft(const Plan<T>& p, const Gather& gather) {
  using V = Lanes<T>;
  const int64_t m = p.m;
  T* re = p.re;
  T* im = p.im;
  // Passes over the [m][8] arrays are bound by their stores (a 256-bit store takes two cycles on
  // this 2-core EPYC), so each pass does two radix-2 stages: a load pass, then pairs of stages.
  int64_t len = 4;  // the next stage's length
  if (m == 2) {
    V r0, i0, r1, i1;
    gather(0, r0, i0);
    gather(1, r1, i1);
    WT_STORE(T, re, r0 + r1);
    WT_STORE(T, im, i0 + i1);
    WT_STORE(T, re + L, r0 - r1);
    WT_STORE(T, im + L, i0 - i1);
  } else {
    // Load in bit-reversed order with the stages of length 2 and 4 (twiddles 1 and -i) on the way:
    // positions 4s .. 4s+3 of the reordered input are z[t], z[t + m/2], z[t + m/4], z[t + 3m/4]
    // for t = reverse[4s].
    for (int64_t s = 0; s < m / 4; ++s) {
      const int64_t t = p.reverse[4 * s];
      V r0, i0, r1, i1, r2, i2, r3, i3;
      gather(t, r0, i0);
      gather(t + m / 2, r1, i1);
      gather(t + m / 4, r2, i2);
      gather(t + 3 * m / 4, r3, i3);
      const V sr0 = r0 + r1, si0 = i0 + i1, dr0 = r0 - r1, di0 = i0 - i1;  // length 2
      const V sr1 = r2 + r3, si1 = i2 + i3, dr1 = r2 - r3, di1 = i2 - i3;
      T* out_re = re + 4 * s * L;
      T* out_im = im + 4 * s * L;
      WT_STORE(T, out_re, sr0 + sr1);  // length 4: (0, 2) with 1, (1, 3) with -i: -i (a + ib) = b - ia
      WT_STORE(T, out_im, si0 + si1);
      WT_STORE(T, out_re + 2 * L, sr0 - sr1);
      WT_STORE(T, out_im + 2 * L, si0 - si1);
      WT_STORE(T, out_re + L, dr0 + di1);
      WT_STORE(T, out_im + L, di0 - dr1);
      WT_STORE(T, out_re + 3 * L, dr0 - di1);
      WT_STORE(T, out_im + 3 * L, di0 + dr1);
    }
    len = 8;
  }
  // Stages of lengths len and 2 len in one pass. With q = len / 2, the points j, j+q, j+2q, j+3q of
  // a 2len block are closed under both: the first stage pairs (j, j+q) and (j+2q, j+3q) with
  // wa = w_len^j, the second (j, j+2q) with wb = w_2len^j and (j+q, j+3q) with w_2len^(j+q) = -i wb.
  for (; 2 * len <= m; len *= 4) {
    const int64_t q = len / 2, step_a = m / len, step_b = m / (2 * len);
    for (int64_t block = 0; block < m; block += 2 * len) {
      for (int64_t j = 0; j < q; ++j) {
        const T war = p.twiddle_re[j * step_a], wai = p.twiddle_im[j * step_a];
        const T wbr = p.twiddle_re[j * step_b], wbi = p.twiddle_im[j * step_b];
        T* r = re + (block + j) * L;
        T* i = im + (block + j) * L;
        const V r0 = WT_LOAD(T, r), i0 = WT_LOAD(T, i);
        const V r1 = WT_LOAD(T, r + q * L), i1 = WT_LOAD(T, i + q * L);
        const V r2 = WT_LOAD(T, r + 2 * q * L), i2 = WT_LOAD(T, i + 2 * q * L);
        const V r3 = WT_LOAD(T, r + 3 * q * L), i3 = WT_LOAD(T, i + 3 * q * L);
        V tr = war * r1 - wai * i1, ti = war * i1 + wai * r1;
        const V ar0 = r0 + tr, ai0 = i0 + ti, ar1 = r0 - tr, ai1 = i0 - ti;
        tr = war * r3 - wai * i3;
        ti = war * i3 + wai * r3;
        const V ar2 = r2 + tr, ai2 = i2 + ti, ar3 = r2 - tr, ai3 = i2 - ti;
        tr = wbr * ar2 - wbi * ai2;
        ti = wbr * ai2 + wbi * ar2;
        WT_STORE(T, r, ar0 + tr);
        WT_STORE(T, i, ai0 + ti);
        WT_STORE(T, r + 2 * q * L, ar0 - tr);
        WT_STORE(T, i + 2 * q * L, ai0 - ti);
        const V ur = wbr * ar3 - wbi * ai3, ui = wbr * ai3 + wbi * ar3;  // then -i u = (ui, -ur)
        WT_STORE(T, r + q * L, ar1 + ui);
        WT_STORE(T, i + q * L, ai1 - ur);
        WT_STORE(T, r + 3 * q * L, ar1 - ui);
        WT_STORE(T, i + 3 * q * L, ai1 + ur);
      }
    }
  }
  // A last single stage (length m) when the count of stages left was odd.
  if (len == m) {
    const int64_t half = m / 2;
    for (int64_t j = 0; j < half; ++j) {
      const T wr = p.twiddle_re[j], wi = p.twiddle_im[j];
      T* a_re = re + j * L;
      T* a_im = im + j * L;
      T* b_re = re + (j + half) * L;
      T* b_im = im + (j + half) * L;
      const V ar = WT_LOAD(T, a_re), ai = WT_LOAD(T, a_im), br = WT_LOAD(T, b_re), bi = WT_LOAD(T, b_im);
      const V tr = wr * br - wi * bi, ti = wr * bi + wi * br;
      WT_STORE(T, b_re, ar - tr);
      WT_STORE(T, b_im, ai - ti);
      WT_STORE(T, a_re, ar + tr);
      WT_STORE(T, a_im, ai + ti);
    }
  }
}

// For 0 < k < m/2, with a = Z[k] and b = Z[m-k]: E = (a + conj b) / 2, O = (a - conj b) / 2i,
// W = e^{-2 pi i k / n}; X[k] = E + W O and X[m-k] = conj(E - W O) (E and O at m-k are the
// conjugates of E and O at k, and W^(m-k) = -conj W^k). out(k, re, im) takes each X[k].
template <typename T, typename Out>
inline __attribute__((always_inline)) void untangle(const Plan<T>& p, Out&& out) {
  using V = Lanes<T>;
  const int64_t m = p.m;
  const T* re = p.re;
  const T* im = p.im;
  {  // k = 0 and k = m: X[0] = Re Z[0] + Im Z[0], X[m] = Re Z[0] - Im Z[0], both real
    const V r = WT_LOAD(T, re), i = WT_LOAD(T, im), zero = r - r;
    out(0, r + i, zero);
    out(m, r - i, zero);
  }
  const T half = T(0.5);
  for (int64_t k = 1; k < m / 2; ++k) {
    const T wr = p.post_re[k], wi = p.post_im[k];
    const V ar = WT_LOAD(T, re + k * L), ai = WT_LOAD(T, im + k * L), br = WT_LOAD(T, re + (m - k) * L), bi = WT_LOAD(T, im + (m - k) * L);
    const V er = half * (ar + br), ei = half * (ai - bi);
    const V or_ = half * (ai + bi), oi = half * (br - ar);
    const V wor = wr * or_ - wi * oi, woi = wr * oi + wi * or_;
    out(k, er + wor, ei + woi);
    out(m - k, er - wor, woi - ei);  // conj(E - W O)
  }
  {  // k = m/2: Z[k] is its own partner, W = -i, so X = (Re Z, -Im Z)
    const V r = WT_LOAD(T, re + (m / 2) * L), i = WT_LOAD(T, im + (m / 2) * L);
    out(m / 2, r, -i);
  }
}

template <typename T>
inline __attribute__((always_inline)) void power_impl(const Plan<T>& p, const T* const* rows, T* power) {
  complex_fft(p, RowGather<T>{rows, nullptr});
  untangle(p, [&](int64_t k, const Lanes<T>& xr, const Lanes<T>& xi) __attribute__((always_inline)) {
    WT_STORE(T, power + k * L, xr * xr + xi * xi);
  });
}

template <typename T>
inline __attribute__((always_inline)) void spectrum_impl(const Plan<T>& p, const T* const* rows, const T* window, T* re,
                                                         T* im) {
  complex_fft(p, RowGather<T>{rows, window});
  untangle(p, [&](int64_t k, const Lanes<T>& xr, const Lanes<T>& xi) __attribute__((always_inline)) {
    WT_STORE(T, re + k * L, xr);
    WT_STORE(T, im + k * L, xi);
  });
}

// The inverse, x[j] = sum over all n bins of X[k] e^{2 pi i j k / n}, run backwards through the
// forward's steps. With A = X[k], B = X[m-k] and W = e^{-2 pi i k / n} as in untangle,
// 2E = A + conj B and 2 W O = A - conj B, so Z'[k] = 2 (E + i O) = P + i Q with P = A + conj B and
// Q = (A - conj B) conj W; at m-k the same values give Z'[m-k] = conj P + i conj Q. Then
// z[t] = sum_k Z'[k] e^{2 pi i t k / m} (the unscaled inverse; 2 = n / m) is x[2t] + i x[2t+1].
// The inverse DFT is taken as the conjugate of the forward DFT of conj Z', so Z' is stored
// conjugated, and the result's imaginary part negated. Edges: at k = 0, with only the real parts
// a0 of X[0] and am of X[m] (the imaginary parts of a real signal's edge bins are 0, and irfft
// ignores them too), Z'[0] = (a0 + am) + i (a0 - am); at k = m/2, A = B and conj W = i, so
// Z'[m/2] = 2 conj A.
template <typename T>
inline __attribute__((always_inline)) void inverse_impl(const Plan<T>& p, const T* re_in, const T* im_in, T* out) {
  using V = Lanes<T>;
  const int64_t m = p.m;
  T* zr = p.packed_re;  // conj Z', [m][8]
  T* zi = p.packed_im;
  {
    const V a0 = WT_LOAD(T, re_in), am = WT_LOAD(T, re_in + m * L);
    WT_STORE(T, zr, a0 + am);
    WT_STORE(T, zi, am - a0);
  }
  for (int64_t k = 1; k < m / 2; ++k) {
    const T wr = p.post_re[k], wi = p.post_im[k];
    const V ar = WT_LOAD(T, re_in + k * L), ai = WT_LOAD(T, im_in + k * L);
    const V br = WT_LOAD(T, re_in + (m - k) * L), bi = WT_LOAD(T, im_in + (m - k) * L);
    const V pr = ar + br, pi = ai - bi, dr = ar - br, di = ai + bi;
    const V qr = dr * wr + di * wi, qi = di * wr - dr * wi;  // (A - conj B) conj W
    WT_STORE(T, zr + k * L, pr - qi);
    WT_STORE(T, zi + k * L, -(pi + qr));
    WT_STORE(T, zr + (m - k) * L, pr + qi);
    WT_STORE(T, zi + (m - k) * L, pi - qr);
  }
  {
    const V ar = WT_LOAD(T, re_in + (m / 2) * L), ai = WT_LOAD(T, im_in + (m / 2) * L);
    WT_STORE(T, zr + (m / 2) * L, ar + ar);
    WT_STORE(T, zi + (m / 2) * L, ai + ai);
  }
  complex_fft(p, LaneGather<T>{zr, zi});
  for (int64_t t = 0; t < m; ++t) {
    WT_STORE(T, out + 2 * t * L, WT_LOAD(T, p.re + t * L));
    WT_STORE(T, out + (2 * t + 1) * L, -WT_LOAD(T, p.im + t * L));
  }
}

bool forced_baseline = false;

// The float transforms compiled for the baseline ISA and for AVX2 + FMA (as losses/vector_math.h
// does for its kernels); each call takes the one the CPU has.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define WT_AVX2 __attribute__((target("avx2,fma")))
WT_AVX2 void power_avx2_fma(const Plan<float>& p, const float* const* rows, float* power) { power_impl(p, rows, power); }
WT_AVX2 void spectrum_avx2_fma(const Plan<float>& p, const float* const* rows, const float* window, float* re, float* im) {
  spectrum_impl(p, rows, window, re, im);
}
WT_AVX2 void inverse_avx2_fma(const Plan<float>& p, const float* re, const float* im, float* out) {
  inverse_impl(p, re, im, out);
}
#undef WT_AVX2
bool use_avx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has && !forced_baseline;
}
#define WT_IF_AVX2(call) \
  if (use_avx2()) return call
#else
bool use_avx2() { return false; }
#define WT_IF_AVX2(call)
#endif

void power_dispatch(const Plan<float>& p, const float* const* rows, float* power) {
  WT_IF_AVX2(power_avx2_fma(p, rows, power));
  power_impl(p, rows, power);
}
void spectrum_dispatch(const Plan<float>& p, const float* const* rows, const float* window, float* re, float* im) {
  WT_IF_AVX2(spectrum_avx2_fma(p, rows, window, re, im));
  spectrum_impl(p, rows, window, re, im);
}
void inverse_dispatch(const Plan<float>& p, const float* re, const float* im, float* out) {
  WT_IF_AVX2(inverse_avx2_fma(p, re, im, out));
  inverse_impl(p, re, im, out);
}
#undef WT_IF_AVX2
void power_dispatch(const Plan<double>& p, const double* const* rows, double* power) { power_impl(p, rows, power); }
void spectrum_dispatch(const Plan<double>& p, const double* const* rows, const double* window, double* re, double* im) {
  spectrum_impl(p, rows, window, re, im);
}
void inverse_dispatch(const Plan<double>& p, const double* re, const double* im, double* out) {
  inverse_impl(p, re, im, out);
}

}  // namespace

template <typename T>
FrameFft<T>::FrameFft(int64_t n) : n_(n), m_(n / 2) {
  if (!supports(n)) throw std::invalid_argument("FrameFft: the length must be a power of two >= 4, got " + std::to_string(n));
  const double pi = 3.14159265358979323846;
  int64_t bits = 0;
  while ((int64_t{1} << bits) < m_) ++bits;
  reverse_.resize(static_cast<size_t>(m_));
  for (int64_t t = 0; t < m_; ++t) {
    int64_t r = 0;
    for (int64_t b = 0; b < bits; ++b)
      if (t & (int64_t{1} << b)) r |= int64_t{1} << (bits - 1 - b);
    reverse_[static_cast<size_t>(t)] = r;
  }
  // The twiddles in double, rounded once to T.
  for (int64_t t = 0; t < m_ / 2; ++t) {
    twiddle_re_.push_back(static_cast<T>(std::cos(2 * pi * static_cast<double>(t) / static_cast<double>(m_))));
    twiddle_im_.push_back(static_cast<T>(-std::sin(2 * pi * static_cast<double>(t) / static_cast<double>(m_))));
  }
  for (int64_t k = 0; k <= m_ / 2; ++k) {
    post_re_.push_back(static_cast<T>(std::cos(2 * pi * static_cast<double>(k) / static_cast<double>(n_))));
    post_im_.push_back(static_cast<T>(-std::sin(2 * pi * static_cast<double>(k) / static_cast<double>(n_))));
  }
  re_.resize(static_cast<size_t>(m_ * L));
  im_.resize(static_cast<size_t>(m_ * L));
}

// The members as the transforms take them.
#define WT_PLAN                                                                                             \
  Plan<T> {                                                                                                 \
    m_, reverse_.data(), twiddle_re_.data(), twiddle_im_.data(), post_re_.data(), post_im_.data(), re_.data(), \
        im_.data(), packed_re_.data(), packed_im_.data()                                                    \
  }

template <typename T>
void FrameFft<T>::power(const T* const* rows, T* power) {
  power_dispatch(WT_PLAN, rows, power);
}

template <typename T>
void FrameFft<T>::spectrum(const T* const* rows, const T* window, T* re, T* im) {
  spectrum_dispatch(WT_PLAN, rows, window, re, im);
}

template <typename T>
void FrameFft<T>::inverse(const T* re, const T* im, T* out) {
  if (packed_re_.empty()) {  // only transforms that run the inverse need its buffers
    packed_re_.resize(static_cast<size_t>(m_ * L));
    packed_im_.resize(static_cast<size_t>(m_ * L));
  }
  inverse_dispatch(WT_PLAN, re, im, out);
}

#undef WT_PLAN
#undef WT_LOAD
#undef WT_STORE

template class FrameFft<float>;
template class FrameFft<double>;

bool frame_fft_vectorised() { return use_avx2(); }

namespace detail {
void force_baseline_frame_fft(bool on) { forced_baseline = on; }
}  // namespace detail

}  // namespace wavetrain::data
