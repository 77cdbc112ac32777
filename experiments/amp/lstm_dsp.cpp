// NAM's LSTM for real-time buffers (lstm_dsp.h).
#include "experiments/amp/lstm_dsp.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#pragma GCC diagnostic ignored "-Wpsabi"  // vectors between always-inlined helpers (wavenet_kernels.h)
#include "experiments/amp/dsp_kernels.h"
#include "experiments/amp/lstm_cell_math.h"
#include "experiments/amp/wavenet_kernels.h"

namespace wavetrain::experiments::amp {
namespace {

using kernels::load;
using kernels::store;
using kernels::Vec8;
using namespace lstm_cell;

// The 8-lane halves of a 16-lane vector.
__attribute__((always_inline)) inline Vec8 low(kernels::Vec16 v) { return __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7); }
__attribute__((always_inline)) inline Vec8 high(kernels::Vec16 v) { return __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15); }

// The P partial sums of the gates, summed as a tree: log2(P) adds deep.
template <typename V, int Z, int P>
__attribute__((always_inline)) inline void sum_parts(V (&acc)[Z], const V (&part)[P][Z]) {
  static_assert(P == 1 || P == 2 || P == 4, "the partial sums are added as a tree of 1, 2 or 4");
  for (int z = 0; z < Z; ++z) {
    if constexpr (P == 4) acc[z] = (part[0][z] + part[1][z]) + (part[2][z] + part[3][z]);
    else if constexpr (P == 2) acc[z] = part[0][z] + part[1][z];
    else acc[z] = part[0][z];
  }
}

// gates = bias + W [x; h] into Z vectors of V, with P partial sums over the columns: the next step
// waits on this sum, so P chains of (columns / P) multiply-adds instead of one long chain, where
// registers allow (AVX2 has 16, AVX-512 32).
template <typename V, int Z, int P>
__attribute__((always_inline)) inline void gates(V (&acc)[Z], const float* w, const float* bias, const float* x, int64_t inputs, const float* h,
                                                 int64_t hidden) {
  constexpr int L = sizeof(V) / sizeof(float);
  V part[P][Z];
  for (int z = 0; z < Z; ++z) part[0][z] = load<V>(bias + L * z);
  for (int p = 1; p < P; ++p)
    for (int z = 0; z < Z; ++z) part[p][z] = V{};
  // Columns [x; h]: P at a time, one into each partial sum; the rest into the first ones.
  auto columns = [&](const float* v, int64_t count) __attribute__((always_inline)) {
    int64_t j = 0;
    for (; j + P <= count; j += P, w += L * Z * P)
      for (int p = 0; p < P; ++p)
        for (int z = 0; z < Z; ++z) part[p][z] += load<V>(w + L * (Z * p + z)) * v[j + p];
    for (int p = 0; p + 1 < P; ++p)  // fewer than P left: p is a constant once unrolled
      if (j + p < count)
        for (int z = 0; z < Z; ++z) part[p][z] += load<V>(w + L * (Z * p + z)) * v[j + p];
    w += L * Z * (count - j);
  };
  columns(x, inputs);
  columns(h, hidden);
  sum_parts(acc, part);
}

// The cell update of U chunks from their gates (cell_blocked()'s layout, below).
template <typename V, int U, bool Fast>
__attribute__((always_inline)) inline void update_chunks(V (&acc)[32 * U / (sizeof(V) / sizeof(float))], float* h, float* c,
                                                         Vec8* hv = nullptr) {
  constexpr int L = sizeof(V) / sizeof(float);
  // Unrolled, so acc[] stays in registers (indexed by a loop counter, GCC keeps it on the stack).
#pragma GCC unroll 4
  for (int u = 0; u < U; ++u) {
    if constexpr (L == 4) {  // gate q's halves are acc[8u + 2q] and acc[8u + 2q + 1]
      units<Fast>(acc[8 * u], acc[8 * u + 2], acc[8 * u + 4], acc[8 * u + 6], c + 8 * u, h + 8 * u);
      units<Fast>(acc[8 * u + 1], acc[8 * u + 3], acc[8 * u + 5], acc[8 * u + 7], c + 8 * u + 4, h + 8 * u + 4);
    } else if constexpr (L == 8) {
      const Vec8 hn = units<Fast>(acc[4 * u], acc[4 * u + 1], acc[4 * u + 2], acc[4 * u + 3], c + 8 * u, h + 8 * u);
      if (hv) hv[u] = hn;
    } else if constexpr (Fast) {
      // [i|f] and [g|o] through the activations 16 lanes at a time, then split into 8-unit halves.
      const V sa = fast_sigmoid_of_half(acc[2 * u]);
      const Fraction<V> b = fast_tanh_parts(acc[2 * u + 1]);
      const V tb = b.n / b.d, sb = half_past_one(b);
      const Vec8 hn = update_fast(low(sa), high(sa), low(tb), high(sb), c + 8 * u, h + 8 * u);
      if (hv) hv[u] = hn;
    } else {
      const TanhParts<V> a = tanh_parts(acc[2 * u]), b = tanh_parts(acc[2 * u + 1]);
      const Fraction<V> sa = sigmoid_of_half(a), sb = sigmoid_of_half(b);
      const Vec8 hn = update<Vec8>({low(sa.n), low(sa.d)}, {high(sa.n), high(sa.d)}, {low(b.x), low(b.p), low(b.q)}, {high(sb.n), high(sb.d)},
                                   c + 8 * u, h + 8 * u);
      if (hv) hv[u] = hn;
    }
  }
}

// Lane K of an 8-lane vector in every lane of V.
template <typename V, int K>
__attribute__((always_inline)) inline V lane(Vec8 v) {
  if constexpr (sizeof(V) == 64) return __builtin_shufflevector(v, v, K, K, K, K, K, K, K, K, K, K, K, K, K, K, K, K);
  else return __builtin_shufflevector(v, v, K, K, K, K, K, K, K, K);
}

// h's column J (unit J: lane J % 8 of chunk J / 8) into partial sum J % P, from registers.
template <typename V, int Z, int P, int J>
__attribute__((always_inline)) inline void h_column(V (&part)[P][Z], const float* w, const Vec8* hv, int64_t hidden) {
  constexpr int L = sizeof(V) / sizeof(float);
  if (J >= hidden) return;  // a padded unit: no column in w
  const V b = lane<V, J % 8>(hv[J / 8]);
  for (int z = 0; z < Z; ++z) part[J % P][z] += load<V>(w + J * L * Z + L * z) * b;
}
template <typename V, int Z, int P, int... J>
__attribute__((always_inline)) inline void h_columns(V (&part)[P][Z], const float* w, const Vec8* hv, int64_t hidden,
                                                     std::integer_sequence<int, J...>) {
  (h_column<V, Z, P, J>(part, w, hv, hidden), ...);
}

// One layer's step with U chunks of 8 units, gates chunk-major: chunk u's 32 gates are i, f, g, o of
// its 8 units (the i, f and o rows halved). They stay in registers through the matrix-vector product
// and the cell update. Vec8: 4U vectors; Vec16 (AVX-512): 2U vectors, [i|f] and [g|o].
template <typename V, int U, int P, bool Fast>
__attribute__((always_inline)) inline void cell_blocked(const float* w, const float* bias, const float* x, int64_t inputs, float* h, float* c,
                                                        int64_t hidden, Vec8* hv = nullptr) {
  constexpr int L = sizeof(V) / sizeof(float), Z = 32 * U / L;
  V acc[Z];
  if constexpr (L == 4 && U > 1) {
    // 128-bit vectors (the baseline variant): 8 per chunk, and the baseline ISA's 16 registers
    // hold one chunk's accumulators, not all of them. So the product runs a chunk at a time, each
    // in registers, and h changes only after every chunk has read it.
#pragma GCC unroll 3
    for (int u = 0; u < U; ++u) {
      V part[8];
      for (int z = 0; z < 8; ++z) part[z] = load<V>(bias + 32 * u + L * z);
      const float* wu = w + 32 * u;
      for (int64_t j = 0; j < inputs + hidden; ++j, wu += 32 * U) {
        const float v = j < inputs ? x[j] : h[j - inputs];
        for (int z = 0; z < 8; ++z) part[z] += load<V>(wu + L * z) * v;
      }
      for (int z = 0; z < 8; ++z) acc[8 * u + z] = part[z];
    }
  } else if constexpr (L >= 8) {
    if (!hv) {
      gates<V, Z, P>(acc, w, bias, x, inputs, h, hidden);
      return update_chunks<V, U, Fast>(acc, h, c);
    }
    // h from the registers the last step left it in (hv), not through memory: a store and a
    // load fewer on the chain each sample waits on. One layer of one input.
    V part[P][Z];
    for (int z = 0; z < Z; ++z) part[0][z] = load<V>(bias + L * z);
    for (int p = 1; p < P; ++p)
      for (int z = 0; z < Z; ++z) part[p][z] = V{};
    for (int z = 0; z < Z; ++z) part[P - 1][z] += load<V>(w + L * z) * x[0];
    h_columns<V, Z, P>(part, w + L * Z, hv, hidden, std::make_integer_sequence<int, 8 * U>{});
    sum_parts(acc, part);
  } else {
    gates<V, Z, P>(acc, w, bias, x, inputs, h, hidden);
  }
  update_chunks<V, U, Fast>(acc, h, c, hv);
}

// A wavefront step's column J of h (layer J / 8's unit J % 8) from registers into chunks J / 8 and
// J / 8 + 1, partial sum J % P (cell_wavefront()).
template <typename V, int U, int P, int J>
__attribute__((always_inline)) inline void band_column(V (&part)[P][32 * U / (sizeof(V) / sizeof(float))], const float* w, const Vec8* hv) {
  constexpr int L = sizeof(V) / sizeof(float), C = 32 / L, G = 32 * U, l = J / 8, z_end = C * (l + 2 < U ? l + 2 : U);
  const V b = lane<V, J % 8>(hv[l]);
  for (int z = C * l; z < z_end; ++z) part[J % P][z] += load<V>(w + (1 + J) * G + L * z) * b;
}
template <typename V, int U, int P, int... J>
__attribute__((always_inline)) inline void band_columns(V (&part)[P][32 * U / (sizeof(V) / sizeof(float))], const float* w, const Vec8* hv,
                                                        std::integer_sequence<int, J...>) {
  (band_column<V, U, P, J>(part, w, hv), ...);
}

// A wavefront step (run_wavefront()): U layers of one chunk each, columns [x; h of layer 0; ...].
// Chunk l's gates take only x (l = 0) or layer l - 1's h, and layer l's own h: the product skips
// the zero weights elsewhere, so each chunk does a layer's work and no more.
template <typename V, int U, int P, bool Fast>
__attribute__((always_inline)) inline void cell_wavefront(const float* w, const float* bias, const float* x, float* h, float* c,
                                                          Vec8* hv = nullptr) {
  constexpr int L = sizeof(V) / sizeof(float), Z = 32 * U / L, C = Z / U, G = 32 * U;  // C: vectors per chunk
  V acc[Z];
  if constexpr (L == 4) {
    // As in cell_blocked(): a chunk at a time in the baseline ISA's 16 registers.
#pragma GCC unroll 3
    for (int u = 0; u < U; ++u) {
      V part[8];
      for (int z = 0; z < 8; ++z) part[z] = load<V>(bias + 32 * u + L * z);
      const int first = u == 0 ? 0 : 1 + 8 * (u - 1);  // x and layer 0's h, or layer u - 1's and u's
      const float* wu = w + first * G + 32 * u;
      for (int j = first; j < 9 + 8 * u; ++j, wu += G) {
        const float v = j == 0 ? x[0] : h[j - 1];
        for (int z = 0; z < 8; ++z) part[z] += load<V>(wu + L * z) * v;
      }
      for (int z = 0; z < 8; ++z) acc[8 * u + z] = part[z];
    }
  } else {
    V part[P][Z];
    for (int z = 0; z < Z; ++z) part[0][z] = load<V>(bias + L * z);
    for (int p = 1; p < P; ++p)
      for (int z = 0; z < Z; ++z) part[p][z] = V{};
    for (int z = 0; z < C; ++z) part[P - 1][z] += load<V>(w + L * z) * x[0];
    // Layer l's h (columns 1 + 8l ...) into chunks l and l + 1, in P partial sums: from the
    // registers hv where given (the same sums in the same order), else from memory.
    if (hv) {
      band_columns<V, U, P>(part, w, hv, std::make_integer_sequence<int, 8 * U>{});
    } else {
      // Unrolled whole (part[][] in registers).
#pragma GCC unroll 3
      for (int l = 0; l < U; ++l) {
        const int z_end = C * (l + 2 < U ? l + 2 : U);
#pragma GCC unroll 8
        for (int j = 0; j < 8; j += P)
#pragma GCC unroll 4
          for (int p = 0; p < P; ++p)
#pragma GCC unroll 12
            for (int z = C * l; z < z_end; ++z) part[p][z] += load<V>(w + (1 + 8 * l + j + p) * G + L * z) * h[8 * l + j + p];
      }
    }
    sum_parts(acc, part);
  }
  update_chunks<V, U, Fast>(acc, h, c, hv);
}

// Any hidden size: the gates through memory.
template <bool Fast>
__attribute__((always_inline)) inline void cell_any(const float* w, const float* bias, const float* x, int64_t inputs, float* h, float* c,
                                                    int64_t hidden, float* gates, int64_t chunks) {
  const int64_t G = 32 * chunks;
  std::copy(bias, bias + G, gates);
  for (int64_t j = 0; j < inputs; ++j, w += G)
    for (int64_t g = 0; g < G; ++g) gates[g] += w[g] * x[j];
  for (int64_t j = 0; j < hidden; ++j, w += G)
    for (int64_t g = 0; g < G; ++g) gates[g] += w[g] * h[j];
  for (int64_t u = 0; u < chunks; ++u) {
    const float* q = gates + 32 * u;
    units<Fast>(load<Vec8>(q), load<Vec8>(q + 8), load<Vec8>(q + 16), load<Vec8>(q + 24), c + 8 * u, h + 8 * u);
  }
}

// The head: y = bias + head . h over the padded units (the padding's weights are zero).
__attribute__((always_inline)) inline float head_dot(const float* head, const float* h, int64_t chunks, float bias) {
  Vec8 acc = Vec8{};
  for (int64_t u = 0; u < chunks; ++u) acc += load<Vec8>(head + 8 * u) * load<Vec8>(h + 8 * u);
  float y = bias;
  for (int l = 0; l < 8; ++l) y += acc[l];
  return y;
}

struct Args {
  const float* const* w;
  const float* const* bias;
  const int64_t* inputs;
  float* const* h;
  float* const* c;
  int64_t layers, hidden, chunks;
  float* gates;
  const float* head;
  float head_bias;
  bool fast_tanh;
  // The layers as one cell (LstmDsp::wavefront_): w[0] and bias[0] are its weights, h[0] and c[0]
  // every layer's state (layer l's at 8 chunks l), `saved` room for a copy of both.
  bool wavefront;
  float* saved;
};

// The whole buffer, sample by sample, with U chunks of 8 units known at compile time (0: any):
// the loop over time is inside, so nothing is called per sample. Wide (AVX-512, 32 registers):
// 16-lane gates, [i|f] and [g|o] per chunk, through the product and the activations (half the
// instructions of 8 lanes), and more partial sums. Measured best of the variants tried (docs/amp.md).
template <int Lanes, int U, bool Fast>
__attribute__((always_inline)) inline void run(const Args& a, const float* in, float* out, int64_t n) {
  using V = std::conditional_t<Lanes == 16, kernels::Vec16, std::conditional_t<Lanes == 8, Vec8, kernels::Vec4>>;
  constexpr int P = Lanes == 16 ? (U == 1 ? 4 : 2) : Lanes == 8 && U == 1 ? 2 : 1;
  // One layer of up to 16 units hands h to the next step in registers (cell_blocked()'s hv).
  // Measured: 3-9% faster with AVX2 and with AVX-512's fast tanh, 4-6% with AVX-512's exact tanh
  // and 8 units; 3% slower with AVX-512's exact tanh and 16 units, and 1x24 (3 chunks) at half
  // speed, its registers spilled.
  if constexpr (U > 0 && U <= 2 && (Lanes == 8 || (Lanes == 16 && (Fast || U == 1)))) {
    if (a.layers == 1) {
      Vec8 hv[U];
      for (int u = 0; u < U; ++u) hv[u] = load<Vec8>(a.h[0] + 8 * u);
      for (int64_t t = 0; t < n; ++t) {
        cell_blocked<V, U, P, Fast>(a.w[0], a.bias[0], in + t, 1, a.h[0], a.c[0], a.hidden, hv);
        out[t] = head_dot(a.head, a.h[0], a.chunks, a.head_bias);
      }
      return;
    }
  }
  for (int64_t t = 0; t < n; ++t) {
    const float* input = in + t;
    for (int64_t l = 0; l < a.layers; ++l) {
      if constexpr (U > 0) cell_blocked<V, U, P, Fast>(a.w[l], a.bias[l], input, a.inputs[l], a.h[l], a.c[l], a.hidden);
      else cell_any<Fast>(a.w[l], a.bias[l], input, a.inputs[l], a.h[l], a.c[l], a.hidden, a.gates, a.chunks);
      input = a.h[l];
    }
    out[t] = head_dot(a.head, input, a.chunks, a.head_bias);
  }
}

// The layers as a wavefront: step s moves layer l to time s - l, so every layer's inputs are the
// previous step's h (layer l - 1's at time s - l, layer l's own at s - l - 1) and the whole stack
// is one cell of layers x chunks chunks over the columns [x; h of every layer] (LstmDsp's
// constructor puts each layer's weights in its rows, zeros elsewhere). A single layer's step waits
// on its own previous h: sample after sample is one chain of latency. Layer by layer, a stack of
// two is two such chains per sample; as one cell it is one, as long as one layer's.
// A buffer of n samples takes n + layers - 1 steps: in the first layers - 1 the upper layers have
// no input yet, in the last ones the lower layers have no sample. There the cell runs all the same
// and the layers that must wait get their state back, so every step's arithmetic is the same,
// and the output does not depend on how the signal was cut into buffers.
template <int Lanes, int U, bool Fast>
__attribute__((always_inline)) inline void run_wavefront(const Args& a, const float* in, float* out, int64_t n) {
  using V = std::conditional_t<Lanes == 16, kernels::Vec16, std::conditional_t<Lanes == 8, Vec8, kernels::Vec4>>;
  constexpr int P = Lanes == 16 ? (U == 1 ? 4 : 2) : Lanes == 8 && U == 1 ? 2 : 1;
  const int64_t N = a.layers, Hp = 8 * a.chunks, state = N * Hp;
  float* h = a.h[0];
  float* c = a.c[0];
  const float no_sample = 0.0f;
  // h in registers from step to step where that measured faster (as in run()), reloaded after the
  // steps that put layers back.
  constexpr bool in_registers = U == 2 && (Lanes == 8 || (Lanes == 16 && Fast));
  Vec8 hv[U];
  if constexpr (in_registers)
    for (int u = 0; u < U; ++u) hv[u] = load<Vec8>(h + 8 * u);
  for (int64_t s = 0; s < n + N - 1; ++s) {
    const int64_t first = std::max<int64_t>(0, s - n + 1), last = std::min<int64_t>(N - 1, s);  // the layers that move
    const bool all = first == 0 && last == N - 1;
    if (!all) {
      std::copy(h, h + state, a.saved);
      std::copy(c, c + state, a.saved + state);
    }
    cell_wavefront<V, U, P, Fast>(a.w[0], a.bias[0], s < n ? in + s : &no_sample, h, c, in_registers ? hv : nullptr);
    if (!all) {
      for (int64_t l = 0; l < N; ++l)
        if (l < first || l > last) {
          std::copy(a.saved + l * Hp, a.saved + (l + 1) * Hp, h + l * Hp);
          std::copy(a.saved + state + l * Hp, a.saved + state + (l + 1) * Hp, c + l * Hp);
        }
      if constexpr (in_registers)
        for (int u = 0; u < U; ++u) hv[u] = load<Vec8>(h + 8 * u);
    }
    if (last == N - 1) out[s - N + 1] = head_dot(a.head, h + (N - 1) * Hp, a.chunks, a.head_bias);
  }
}

// LstmDsp's constructor chooses the wavefront for stacks of 2 or 3 chunks in all.
template <int Lanes, bool Fast>
__attribute__((always_inline)) inline void run_stack(const Args& a, const float* in, float* out, int64_t n) {
  if (a.layers * a.chunks == 2) run_wavefront<Lanes, 2, Fast>(a, in, out, n);
  else run_wavefront<Lanes, 3, Fast>(a, in, out, n);
}

template <int Lanes, bool Fast>
__attribute__((always_inline)) inline void run_chunks(const Args& a, const float* in, float* out, int64_t n) {
  if (a.wavefront) return run_stack<Lanes, Fast>(a, in, out, n);
  switch (a.chunks) {
    case 1: return run<Lanes, 1, Fast>(a, in, out, n);
    case 2: return run<Lanes, 2, Fast>(a, in, out, n);
    case 3: return run<Lanes, 3, Fast>(a, in, out, n);
    default: return run<Lanes, 0, Fast>(a, in, out, n);
  }
}

template <int Lanes>
__attribute__((always_inline)) inline void run_any(const Args& a, const float* in, float* out, int64_t n) {
  if (a.fast_tanh) run_chunks<Lanes, true>(a, in, out, n);
  else run_chunks<Lanes, false>(a, in, out, n);
}

void run_baseline(const Args& a, const float* in, float* out, int64_t n) { run_any<4>(a, in, out, n); }
#if WAVETRAIN_AMP_AVX2
__attribute__((target("avx2,fma"))) void run_avx2(const Args& a, const float* in, float* out, int64_t n) { run_any<8>(a, in, out, n); }
// Cells of up to 24 units (the constructor picks it for them; larger ones go through memory anyway).
__attribute__((target("avx512f,avx2,fma"))) void run_avx512(const Args& a, const float* in, float* out, int64_t n) {
  if (a.wavefront) return a.fast_tanh ? run_stack<16, true>(a, in, out, n) : run_stack<16, false>(a, in, out, n);
  switch (a.chunks) {
    case 1: return a.fast_tanh ? run<16, 1, true>(a, in, out, n) : run<16, 1, false>(a, in, out, n);
    case 2: return a.fast_tanh ? run<16, 2, true>(a, in, out, n) : run<16, 2, false>(a, in, out, n);
    default: return a.fast_tanh ? run<16, 3, true>(a, in, out, n) : run<16, 3, false>(a, in, out, n);
  }
}
#endif

}  // namespace

LstmDsp::LstmDsp(const LstmConfig& config, const std::vector<float>& weights, int64_t prewarm, bool fast_tanh)
    : hidden_(config.hidden_size), prewarm_(std::max<int64_t>(0, prewarm)), fast_tanh_(fast_tanh) {
  const int64_t H = hidden_;
  if (static_cast<int64_t>(weights.size()) != lstm_weight_count(config))
    throw std::invalid_argument("LSTM: " + std::to_string(weights.size()) + " weights given, this architecture has " +
                                std::to_string(lstm_weight_count(config)));
  // Units padded to chunks of 8, gates chunk-major: unit k's gate q (i, f, g, o) is row
  // row(q, k) = 32 (k / 8) + 8 q + k % 8. The i, f and o rows are halved (sigmoid(x) is computed
  // from tanh(x / 2); halving is exact in float).
  chunks_ = (H + 7) / 8;
  const int64_t Hp = 8 * chunks_, G = 4 * Hp;
  auto row = [](int64_t q, int64_t k) { return 32 * (k / 8) + 8 * q + k % 8; };
  auto scale = [](int64_t q) { return q == 2 ? 1.0f : 0.5f; };
  size_t at = 0;
  auto next = [&] { return weights[at++]; };
  for (int64_t l = 0; l < config.num_layers; ++l) {
    Layer layer;
    layer.inputs = l == 0 ? config.input_size : H;
    const int64_t cols = layer.inputs + H;
    // The file holds [4H][inputs + H] row-major; keep it as columns of padded gates.
    layer.w.assign(static_cast<size_t>(cols * G));
    for (int64_t q = 0; q < 4; ++q)
      for (int64_t k = 0; k < H; ++k)
        for (int64_t j = 0; j < cols; ++j) layer.w[static_cast<size_t>(j * G + row(q, k))] = scale(q) * next();
    layer.bias.assign(static_cast<size_t>(G));
    for (int64_t q = 0; q < 4; ++q)
      for (int64_t k = 0; k < H; ++k) layer.bias[static_cast<size_t>(row(q, k))] = scale(q) * next();
    layer.h0.assign(static_cast<size_t>(Hp), 0.0f);
    layer.c0.assign(static_cast<size_t>(Hp), 0.0f);
    for (int64_t k = 0; k < H; ++k) layer.h0[static_cast<size_t>(k)] = next();
    for (int64_t k = 0; k < H; ++k) layer.c0[static_cast<size_t>(k)] = next();
    layers_.push_back(std::move(layer));
  }
  head_.assign(static_cast<size_t>(Hp));
  for (int64_t k = 0; k < H; ++k) head_[static_cast<size_t>(k)] = next();
  head_bias_ = next();
  gates_.assign(static_cast<size_t>(G), 0.0f);
  const int64_t N = config.num_layers;
  state_h_.assign(static_cast<size_t>(N * Hp));
  state_c_.assign(static_cast<size_t>(N * Hp));
  for (Layer& l : layers_) {
    w_.push_back(l.w.data());
    b_.push_back(l.bias.data());
    inputs_.push_back(l.inputs);
  }
  // A stack that fits the register-blocked cell (3 chunks: 2 or 3 layers of up to 8 units, one
  // chunk each) runs as one cell (see run_wavefront()): columns [x; h of layer 0; ...; h of layer
  // N - 1], chunk l holding layer l's gates. Layer 0's rows take x and its own h; layer l's take
  // layer l - 1's h as its input and its own h; the rest are zeros.
  wavefront_ = N > 1 && N * chunks_ <= 3;
  if (wavefront_) {
    const int64_t rows = N * G, state = N * Hp;
    wave_w_.assign(static_cast<size_t>((1 + state) * rows));
    wave_bias_.assign(static_cast<size_t>(rows));
    for (int64_t l = 0; l < N; ++l) {
      const Layer& layer = layers_[static_cast<size_t>(l)];
      const int64_t input_column = l == 0 ? 0 : 1 + (l - 1) * Hp, own_column = 1 + l * Hp;
      for (int64_t r = 0; r < G; ++r) {
        float* w = wave_w_.data() + l * G + r;  // column j's entry at w[j * rows]
        wave_bias_[static_cast<size_t>(l * G + r)] = layer.bias.p[r];
        for (int64_t j = 0; j < layer.inputs; ++j) w[(input_column + j) * rows] = layer.w.p[j * G + r];
        for (int64_t j = 0; j < H; ++j) w[(own_column + j) * rows] = layer.w.p[(layer.inputs + j) * G + r];
      }
    }
    saved_.assign(static_cast<size_t>(2 * state), 0.0f);
  }
  avx2_ = dsp::using_avx2();
  avx512_ = dsp::using_avx512() && chunks_ <= 3;  // see run_avx512()
  reset();
}

void LstmDsp::reset() {
  h_.clear();
  c_.clear();
  const int64_t Hp = 8 * chunks_;
  for (size_t l = 0; l < layers_.size(); ++l) {
    float* h = state_h_.data() + static_cast<int64_t>(l) * Hp;
    float* c = state_c_.data() + static_cast<int64_t>(l) * Hp;
    std::copy(layers_[l].h0.begin(), layers_[l].h0.end(), h);
    std::copy(layers_[l].c0.begin(), layers_[l].c0.end(), c);
    h_.push_back(h);
    c_.push_back(c);
  }
  std::vector<float> zeros(static_cast<size_t>(std::min<int64_t>(prewarm_, 4096)), 0.0f), ignored(zeros.size());
  for (int64_t left = prewarm_; left > 0;) {
    const int64_t n = std::min<int64_t>(left, static_cast<int64_t>(zeros.size()));
    process(zeros.data(), ignored.data(), n);
    left -= n;
  }
}

void LstmDsp::process(const float* in, float* out, int64_t n) {
  if (n <= 0) return;  // (a wavefront would still take its layers - 1 steps)
  const float* wave_w = wave_w_.data();
  const float* wave_bias = wave_bias_.data();
  const Args a{wavefront_ ? &wave_w : w_.data(),
               wavefront_ ? &wave_bias : b_.data(),
               inputs_.data(),
               h_.data(),
               c_.data(),
               static_cast<int64_t>(layers_.size()),
               hidden_,
               chunks_,
               gates_.data(),
               head_.data(),
               head_bias_,
               fast_tanh_,
               wavefront_,
               saved_.data()};
#if WAVETRAIN_AMP_AVX2
  if (avx512_) return run_avx512(a, in, out, n);
  if (avx2_) return run_avx2(a, in, out, n);
#endif
  run_baseline(a, in, out, n);
}

}  // namespace wavetrain::experiments::amp
