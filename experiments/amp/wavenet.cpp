// NAM's WaveNet (wavenet.h).
#include "experiments/amp/wavenet.h"

#include <torch/nn/functional/activation.h>

#include "experiments/amp/nam_json.h"
#include "experiments/amp/wavenet_cpu.h"

#include <stdexcept>

namespace wavetrain::experiments::amp {

WaveNetImpl::WaveNetImpl(WaveNetConfig config) : config_(std::move(config)) {
  namespace nn = torch::nn;
  for (size_t i = 0; i < config_.layers.size(); ++i) {
    const LayerArrayConfig& c = config_.layers[i];
    if (c.dilations.empty() || c.channels < 1 || c.kernel_size < 1)
      throw std::invalid_argument("WaveNet: layer array " + std::to_string(i) + " needs dilations, channels >= 1 and kernel_size >= 1");
    for (int64_t d : c.dilations)
      if (d < 1) throw std::invalid_argument("WaveNet: layer array " + std::to_string(i) + " has dilation " + std::to_string(d) + "; dilations must be >= 1");
    if (i > 0 && c.input_size != config_.layers[i - 1].channels)
      throw std::invalid_argument("WaveNet: layer array " + std::to_string(i) + " takes input_size " + std::to_string(c.input_size) +
                                  " but the previous array has " + std::to_string(config_.layers[i - 1].channels) + " channels");
    if (i > 0 && config_.layers[i - 1].head_size != c.channels)
      throw std::invalid_argument("WaveNet: layer array " + std::to_string(i - 1) + "'s head_size must equal array " +
                                  std::to_string(i) + "'s channels (its head is summed into it)");
    const int64_t mid = c.gated ? 2 * c.channels : c.channels;
    const std::string p = "layers" + std::to_string(i) + "_";
    Array a;
    a.rechannel = register_module(p + "rechannel", nn::Conv1d(nn::Conv1dOptions(c.input_size, c.channels, 1).bias(false)));
    for (size_t k = 0; k < c.dilations.size(); ++k) {
      const std::string q = p + "layer" + std::to_string(k) + "_";
      Layer l;
      l.conv = register_module(q + "conv", nn::Conv1d(nn::Conv1dOptions(c.channels, mid, c.kernel_size).dilation(c.dilations[k])));
      l.input_mixer = register_module(q + "input_mixer", nn::Conv1d(nn::Conv1dOptions(c.condition_size, mid, 1).bias(false)));
      l.one_by_one = register_module(q + "1x1", nn::Conv1d(nn::Conv1dOptions(c.channels, c.channels, 1)));
      a.layers.push_back(l);
    }
    a.head_rechannel = register_module(p + "head_rechannel", nn::Conv1d(nn::Conv1dOptions(c.channels, c.head_size, 1).bias(c.head_bias)));
    arrays_.push_back(a);
  }
}

int64_t WaveNetImpl::receptive_field() const { return receptive_field_of(config_); }

at::Tensor WaveNetImpl::activate(const LayerArrayConfig& c, const at::Tensor& z) const {
  auto f = [&](const at::Tensor& v) {
    if (c.activation == "Tanh") return at::tanh(v);
    if (c.activation == "ReLU") return at::relu(v);
    if (c.activation == "Sigmoid") return at::sigmoid(v);
    if (c.activation == "Hardtanh") return at::hardtanh(v);
    throw std::invalid_argument("WaveNet: activation '" + c.activation + "' is not one of Tanh, ReLU, Sigmoid, Hardtanh");
  };
  if (!c.gated) return f(z);
  return f(z.narrow(1, 0, c.channels)) * at::sigmoid(z.narrow(1, c.channels, c.channels));
}

at::Tensor WaveNetImpl::forward(const at::Tensor& x) {
  const int64_t rf = receptive_field();
  if (x.dim() != 3 || x.size(1) != 1)
    throw std::invalid_argument("WaveNet: input must be [batch][1][samples], got " + c10::str(x.sizes()));
  if (x.size(2) < rf)
    throw std::invalid_argument("WaveNet: " + std::to_string(x.size(2)) + " input samples are fewer than the receptive field (" +
                                std::to_string(rf) + ")");
  if (cpu_kernels_ && wavenet_cpu_supported(*this, x)) return wavenet_cpu_forward(*this, x);
  at::Tensor y = x, head;
  for (size_t i = 0; i < arrays_.size(); ++i) {
    const LayerArrayConfig& c = config_.layers[i];
    int64_t array_rf = 1;
    for (int64_t d : c.dilations) array_rf += (c.kernel_size - 1) * d;
    const int64_t out_length = y.size(2) - (array_rf - 1);
    at::Tensor z = arrays_[i].rechannel->forward(y);
    at::Tensor sum;  // this array's head sum, started from the previous array's head output
    if (head.defined()) sum = head.narrow(2, head.size(2) - out_length, out_length);
    for (Layer& l : arrays_[i].layers) {
      const at::Tensor conv = l.conv->forward(z);
      const at::Tensor mixed = l.input_mixer->forward(x);
      const at::Tensor post = activate(c, conv + mixed.narrow(2, mixed.size(2) - conv.size(2), conv.size(2)));
      z = z.narrow(2, z.size(2) - post.size(2), post.size(2)) + l.one_by_one->forward(post);
      const at::Tensor term = post.narrow(2, post.size(2) - out_length, out_length);
      sum = sum.defined() ? sum + term : term;
    }
    head = arrays_[i].head_rechannel->forward(sum);
    y = z;
  }
  return config_.head_scale * head;
}

std::vector<torch::nn::Conv1d> WaveNetImpl::convs_in_order() const {
  std::vector<torch::nn::Conv1d> out;
  for (const Array& a : arrays_) {
    out.push_back(a.rechannel);
    for (const Layer& l : a.layers) {
      out.push_back(l.conv);
      out.push_back(l.input_mixer);
      out.push_back(l.one_by_one);
    }
    out.push_back(a.head_rechannel);
  }
  return out;
}

std::vector<at::Tensor> WaveNetImpl::ordered_parameters() const {
  std::vector<at::Tensor> out;
  for (const torch::nn::Conv1d& c : convs_in_order())
    for (const at::Tensor& t : {c->weight, c->bias})
      if (t.defined()) out.push_back(t);
  return out;
}

std::vector<float> WaveNetImpl::export_weights() const {
  std::vector<float> w;
  for (const torch::nn::Conv1d& c : convs_in_order()) {
    for (const at::Tensor& t : {c->weight, c->bias}) {
      if (!t.defined()) continue;
      const at::Tensor flat = t.detach().to(at::kFloat).cpu().contiguous().view({-1});  // [out][in][k] row-major
      w.insert(w.end(), flat.data_ptr<float>(), flat.data_ptr<float>() + flat.numel());
    }
  }
  w.push_back(static_cast<float>(config_.head_scale));
  return w;
}

void WaveNetImpl::import_weights(const std::vector<float>& w) {
  size_t expected = 1;
  for (const torch::nn::Conv1d& c : convs_in_order())
    expected += static_cast<size_t>(c->weight.numel()) + (c->bias.defined() ? static_cast<size_t>(c->bias.numel()) : 0);
  if (w.size() != expected)
    throw std::invalid_argument("WaveNet: " + std::to_string(w.size()) + " weights given, this architecture has " +
                                std::to_string(expected) + " (parameters and head_scale)");
  torch::NoGradGuard no_grad;
  size_t at = 0;
  for (const torch::nn::Conv1d& c : convs_in_order())
    for (at::Tensor t : {c->weight, c->bias}) {
      if (!t.defined()) continue;
      const at::Tensor src = at::from_blob(const_cast<float*>(w.data() + at), t.sizes(), at::kFloat);
      t.copy_(src);
      at += static_cast<size_t>(t.numel());
    }
  config_.head_scale = w.back();
}

}  // namespace wavetrain::experiments::amp
