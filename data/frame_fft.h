// Real FFTs of 8 frames at once, forward and inverse: fbank's power spectra (data/fbank.cpp) and
// the STFT losses' spectra and gradients (losses/stft_loss.cpp).
//
// Each step of the transform is taken for 8 frames side by side: the work arrays are [index][8],
// lane l holding frame l, so a butterfly is one 8-lane vector operation (two on SSE2) and no lane
// ever reads another. Frames' FFTs are independent, so fbank fills the lanes with 8 frames; no
// shuffles, no transposes inside the transform. LibTorch's FFT (pocketfft in 1.13, MKL in the 2.x
// wheels) does one frame at a time, and on 10 s of audio it was 40% of fbank's time in the Debian
// build.
//
// The transform: a real input x of length n (a power of two, >= 4) is packed as m = n/2 complex
// points z[t] = x[2t] + i x[2t+1]; Z = the m-point DFT of z (iterative radix-2, decimation in time,
// input in bit-reversed order); then X[k] = E[k] + e^{-2 pi i k / n} O[k] for k = 0..m, with
// E[k] = (Z[k] + conj Z[m-k]) / 2 and O[k] = (Z[k] - conj Z[m-k]) / 2i (Z[m] = Z[0]).
// X is the DFT of x, sum_j x[j] e^{-2 pi i j k / n}, as at::fft_rfft gives it (no scaling). The
// inverse runs the same steps backwards (frame_fft.cpp, inverse_impl).
#pragma once

#include <cstdint>
#include <vector>

namespace wavetrain::data {

constexpr int64_t kFrameFftLanes = 8;

template <typename T>  // float (fbank) or double (tests)
class FrameFft {
 public:
  // n: the real length; a power of two >= 4, else std::invalid_argument.
  explicit FrameFft(int64_t n);
  static bool supports(int64_t n) { return n >= 4 && (n & (n - 1)) == 0; }
  int64_t size() const { return n_; }
  int64_t bins() const { return n_ / 2 + 1; }

  // rows[l]: lane l's n samples (any rows may repeat; a repeated lane's result is simply unused).
  // power: [bins()][8], |X[k]|^2 of lane l at power[k * 8 + l].
  void power(const T* const* rows, T* power);
  // The spectrum X itself, re and im [bins()][8], of each row times `window` (n values; null for
  // none): at::stft's frames, the product rounded before the transform. (The STFT losses.)
  void spectrum(const T* const* rows, const T* window, T* re, T* im);
  // The inverse without scaling (at::fft_irfft with norm "forward"): out[j * 8 + l] = the sum over
  // all n bins of X[k] e^{2 pi i j k / n}, lane l's X Hermitian from its bins 0..n/2 in re, im
  // [bins()][8]; the imaginary parts of bins 0 and n/2 are ignored. out: [n][8]. (The STFT losses'
  // gradients.)
  void inverse(const T* re, const T* im, T* out);

 private:
  int64_t n_, m_;
  std::vector<int64_t> reverse_;          // bit reversal of [0, m)
  std::vector<T> twiddle_re_, twiddle_im_;  // e^{-2 pi i t / m}, t < m/2
  std::vector<T> post_re_, post_im_;        // e^{-2 pi i k / n}, k <= m/2 (the rest by symmetry)
  std::vector<T> re_, im_;                  // Z, [m][8]
  std::vector<T> packed_re_, packed_im_;    // the inverse's input, [m][8] (allocated by its first call)
};

extern template class FrameFft<float>;
extern template class FrameFft<double>;

// Whether the float transform runs its AVX2 + FMA build here (an x86-64 CPU with both, and the
// baseline not forced). Only then is it faster than LibTorch's FFT, and fbank takes it. The
// baseline build (SSE2) gathers its 8 lanes through the stack and was 2.5x slower than pocketfft;
// elsewhere (ARM) its speed is unmeasured. Either still computes the same transform (tests).
bool frame_fft_vectorised();

namespace detail {
// Tests: run the baseline-ISA build of the transform even where the CPU has AVX2 and FMA.
void force_baseline_frame_fft(bool on);
}  // namespace detail

}  // namespace wavetrain::data
