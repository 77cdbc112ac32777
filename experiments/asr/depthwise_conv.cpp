// The depthwise convolution over time (depthwise_conv.h).
#include "experiments/asr/depthwise_conv.h"

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <stdexcept>
#include <string>

namespace wavetrain::experiments::asr {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// taps [K][C] from Conv1d's weight [C][1][K]: the inner loops read one tap's C weights in a row.
at::Tensor taps_of(const at::Tensor& weight) { return weight.view({weight.size(0), weight.size(2)}).t().contiguous(); }

struct DepthwiseConvTime : public torch::autograd::Function<DepthwiseConvTime> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) {
    const at::Tensor x = input.contiguous(), taps = taps_of(weight), b = bias.contiguous();
    const int64_t B = x.size(0), T = x.size(1), C = x.size(2), K = taps.size(0), P = (K - 1) / 2;
    at::Tensor y = at::empty({B, T, C}, x.options());
    const float *xp = x.data_ptr<float>(), *wp = taps.data_ptr<float>(), *bp = b.data_ptr<float>();
    float* yp = y.data_ptr<float>();
    at::parallel_for(0, B * T, 16, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t n = row / T, t = row % T;
        float* out = yp + row * C;
        for (int64_t c = 0; c < C; ++c) out[c] = bp[c];
        for (int64_t k = 0; k < K; ++k) {
          const int64_t s = t + k - P;
          if (s < 0 || s >= T) continue;
          const float* in = xp + (n * T + s) * C;
          const float* w = wp + k * C;
          for (int64_t c = 0; c < C; ++c) out[c] += w[c] * in[c];
        }
      }
    });
    ctx->save_for_backward({x, taps});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &taps = saved[1];
    const at::Tensor dy = grads[0].contiguous();
    const int64_t B = x.size(0), T = x.size(1), C = x.size(2), K = taps.size(0), P = (K - 1) / 2;
    const float *xp = x.data_ptr<float>(), *wp = taps.data_ptr<float>(), *gp = dy.data_ptr<float>();
    // dx[b][s][c] = sum_k w[k][c] dy[b][s - k + P][c]
    at::Tensor dx = at::empty_like(x);
    float* dxp = dx.data_ptr<float>();
    at::parallel_for(0, B * T, 16, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t n = row / T, s = row % T;
        float* out = dxp + row * C;
        for (int64_t c = 0; c < C; ++c) out[c] = 0;
        for (int64_t k = 0; k < K; ++k) {
          const int64_t t = s - k + P;
          if (t < 0 || t >= T) continue;
          const float* g = gp + (n * T + t) * C;
          const float* w = wp + k * C;
          for (int64_t c = 0; c < C; ++c) out[c] += w[c] * g[c];
        }
      }
    });
    // dw[k][c] = sum over (b, t) of dy[b][t][c] x[b][t + k - P][c], in (b, t) order, a tap per task;
    // dbias[c] = sum over (b, t) of dy[b][t][c] (task K).
    at::Tensor dtaps = at::zeros({K, C}, x.options()), dbias = at::zeros({C}, x.options());
    float *dwp = dtaps.data_ptr<float>(), *dbp = dbias.data_ptr<float>();
    at::parallel_for(0, K + 1, 1, [&](int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k) {
        float* acc = k < K ? dwp + k * C : dbp;
        for (int64_t n = 0; n < B; ++n)
          for (int64_t t = 0; t < T; ++t) {
            const float* g = gp + (n * T + t) * C;
            if (k == K) {
              for (int64_t c = 0; c < C; ++c) acc[c] += g[c];
              continue;
            }
            const int64_t s = t + k - P;
            if (s < 0 || s >= T) continue;
            const float* in = xp + (n * T + s) * C;
            for (int64_t c = 0; c < C; ++c) acc[c] += g[c] * in[c];
          }
      }
    });
    return {dx, dtaps.t().contiguous().view({C, 1, K}), dbias};
  }
};

}  // namespace

at::Tensor depthwise_conv_time(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (x.dim() != 3 || weight.dim() != 3 || weight.size(1) != 1 || weight.size(0) != x.size(2) || weight.size(2) % 2 == 0 ||
      !bias.defined() || bias.numel() != x.size(2))
    throw std::invalid_argument("depthwise_conv_time: expected x [B][T][C], weight [C][1][K odd], bias [C]; got x of " +
                                std::to_string(x.dim()) + " dimensions and weight of " + std::to_string(weight.dim()));
  const bool own = x.device().is_cpu() && x.scalar_type() == at::kFloat && weight.scalar_type() == at::kFloat &&
                   bias.scalar_type() == at::kFloat;
  if (!own)
    return at::conv1d(x.transpose(1, 2), weight.to(x.scalar_type()), bias.to(x.scalar_type()), 1, (weight.size(2) - 1) / 2, 1,
                      x.size(2))
        .transpose(1, 2);
  return DepthwiseConvTime::apply(x, weight, bias);
}

}  // namespace wavetrain::experiments::asr
