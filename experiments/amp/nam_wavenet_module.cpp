// Any .nam WaveNet as a trainable LibTorch module (nam_wavenet_module.h).
#include "experiments/amp/nam_wavenet_module.h"

#include <torch/nn/init.h>

#include <cmath>
#include <regex>
#include <stdexcept>

#include "experiments/amp/nam_file.h"

namespace wavetrain::experiments::amp {
namespace {

// The last n samples (signals are aligned at their end).
at::Tensor last(const at::Tensor& t, int64_t n) { return t.narrow(2, t.size(2) - n, n); }

}  // namespace

at::Tensor activate(const ActivationSpec& a, const at::Tensor& x) {
  const std::string& t = a.type;
  if (t == "Tanh") return at::tanh(x);
  if (t == "Fasttanh") {
    const at::Tensor ax = x.abs(), x2 = x * x;
    return x * (2.45550750702956 + 2.45550750702956 * ax + (0.893229853513558 + 0.821226666969744 * ax) * x2) /
           (2.44506634652299 + (2.44506634652299 + x2) * (x + 0.814642734961073 * x * ax).abs());
  }
  if (t == "Hardtanh") return at::clamp(x, -1.0, 1.0);
  if (t == "LeakyHardtanh") {
    const double lo = a.params[0], hi = a.params[1], lo_slope = a.params[2], hi_slope = a.params[3];
    return at::where(x < lo, lo + (x - lo) * lo_slope, at::where(x > hi, hi + (x - hi) * hi_slope, x));
  }
  if (t == "ReLU") return at::relu(x);
  if (t == "LeakyReLU") return at::where(x > 0, x, x * a.params[0]);
  if (t == "PReLU") {
    at::Tensor slopes = at::tensor(a.params, x.options().dtype(at::kDouble)).to(x.dtype());
    slopes = a.params.size() == 1 ? slopes.view({1, 1, 1}) : slopes.view({1, -1, 1});
    return at::where(x > 0, x, x * slopes);
  }
  if (t == "Sigmoid") return at::sigmoid(x);
  if (t == "SiLU") return x * at::sigmoid(x);
  if (t == "Hardswish") return x * at::clamp(x + 3.0, 0.0, 6.0) / 6.0;
  if (t == "Softsign") return x / (1 + x.abs());
  throw std::invalid_argument("activation '" + t + "' has no LibTorch form");
}

NamWaveNetImpl::Conv NamWaveNetImpl::make_conv(const std::string& name, int64_t in, int64_t out, int64_t kernel, int64_t dilation,
                                               int64_t groups, bool bias) {
  Conv c;
  c.dilation = dilation;
  c.groups = groups;
  const double bound = 1.0 / std::sqrt(static_cast<double>((in / groups) * kernel));
  c.weight = register_parameter(name + "_weight", torch::empty({out, in / groups, kernel}).uniform_(-bound, bound));
  order_.push_back(c.weight);
  if (bias) {
    c.bias = register_parameter(name + "_bias", torch::empty({out}).uniform_(-bound, bound));
    order_.push_back(c.bias);
  }
  return c;
}

NamWaveNetImpl::NamWaveNetImpl(NamWaveNetSpec spec) : spec_(std::move(spec)) {
  head_scale_ = register_buffer("head_scale", torch::full({}, spec_.head_scale, torch::kFloat));
  if (spec_.condition_dsp) {
    const NamFileModel& f = *spec_.condition_dsp;
    if (f.architecture != "WaveNet") throw std::invalid_argument("WaveNet: a condition_dsp must be a WaveNet, found " + f.architecture);
    condition_ = register_module("condition_dsp", std::make_shared<NamWaveNetImpl>(f.wavenet));
    condition_->import_weights(f.weights);
  }
  for (size_t ai = 0; ai < spec_.arrays.size(); ++ai) {
    const NamLayerArraySpec& s = spec_.arrays[ai];
    const std::string a = "array" + std::to_string(ai) + "_";
    Array A;
    A.rechannel = make_conv(a + "rechannel", s.input_size, s.channels, 1, 1, 1, false);
    for (size_t li = 0; li < s.layers.size(); ++li) {
      const NamLayerSpec& ls = s.layers[li];
      const std::string l = a + "layer" + std::to_string(li) + "_";
      // A spec made in code skips the file reader's checks; the CPU kernels index with these.
      const std::string where = "WaveNet: layer array " + std::to_string(ai) + ", layer " + std::to_string(li);
      if (ls.dilation < 1) throw std::invalid_argument(where + " has dilation " + std::to_string(ls.dilation) + "; dilations must be >= 1");
      if (ls.kernel_size < 1) throw std::invalid_argument(where + " has kernel size " + std::to_string(ls.kernel_size) + "; kernel sizes must be >= 1");
      const int64_t m = ls.gating == Gating::None ? s.bottleneck : 2 * s.bottleneck;
      Layer L;
      L.conv = make_conv(l + "conv", s.channels, m, ls.kernel_size, ls.dilation, s.groups_input, true);
      L.mixer = make_conv(l + "mixer", s.condition_size, m, 1, 1, s.groups_input_mixin, false);
      if (s.layer1x1) L.layer1x1 = make_conv(l + "layer1x1", s.bottleneck, s.channels, 1, 1, s.layer1x1_groups, true);
      if (s.head1x1) L.head1x1 = make_conv(l + "head1x1", s.bottleneck, s.head1x1_out, 1, 1, s.head1x1_groups, true);
      const int64_t dims[kFilmSites] = {s.channels, m, s.condition_size, m, m, s.bottleneck, s.channels, s.head1x1_out};
      for (int f = 0; f < kFilmSites; ++f) {
        const FilmSpec& fs = s.film[static_cast<size_t>(f)];
        Film& F = L.film[static_cast<size_t>(f)];
        F.active = fs.active;
        F.shift = fs.shift;
        if (fs.active) F.conv = make_conv(l + film_key(f), s.condition_size, (fs.shift ? 2 : 1) * dims[f], 1, 1, fs.groups, true);
      }
      A.layers.push_back(std::move(L));
    }
    A.head_rechannel = make_conv(a + "head_rechannel", s.head_in(), s.head_size, s.head_kernel, s.head_dilation, 1, s.head_bias);
    arrays_.push_back(std::move(A));
  }
  if (spec_.post_head) {
    int64_t in = spec_.arrays.back().head_size;
    const auto& ks = spec_.post_head->kernel_sizes;
    for (size_t i = 0; i < ks.size(); ++i) {
      const int64_t out = i + 1 == ks.size() ? spec_.post_head->out_channels : spec_.post_head->channels;
      post_head_.push_back(make_conv("post_head" + std::to_string(i), in, out, ks[i], 1, 1, true));
      in = out;
    }
  }
  kernels_ = kernel_net_of(spec_);
}

at::Tensor NamWaveNetImpl::run(const Conv& c, const at::Tensor& x) const {
  const c10::optional<at::Tensor> bias = c.bias.defined() ? c10::optional<at::Tensor>(c.bias.to(x.dtype())) : c10::nullopt;
  return at::conv1d(x, c.weight.to(x.dtype()), bias, at::IntArrayRef{1}, at::IntArrayRef{0}, at::IntArrayRef{c.dilation}, c.groups);
}

at::Tensor NamWaveNetImpl::film(const Film& f, const at::Tensor& x, const at::Tensor& c) const {
  if (!f.active) return x;
  const at::Tensor g = run(f.conv, last(c, x.size(2)));
  const int64_t dim = x.size(1);
  return f.shift ? x * g.narrow(1, 0, dim) + g.narrow(1, dim, dim) : x * g;
}

at::Tensor NamWaveNetImpl::forward(const at::Tensor& input) {
  if (input.dim() != 3 || input.size(1) != 1) throw std::invalid_argument("WaveNet: input must be [batch][1][samples], got " + c10::str(input.sizes()));
  if (cpu_kernels_ && kernels_ && wavenet_cpu_supported(order_, input)) {
    KernelNet net = *kernels_;
    net.head_scale = head_scale_.item<float>();  // import_weights and checkpoints set it
    return wavenet_cpu_forward(net, order_, input);
  }
  const at::Tensor c_full = condition_ ? condition_->forward(input) : input;
  at::Tensor y = input, head;
  for (size_t ai = 0; ai < arrays_.size(); ++ai) {
    const Array& A = arrays_[ai];
    const NamLayerArraySpec& s = spec_.arrays[ai];
    at::Tensor z = run(A.rechannel, y);
    at::Tensor sum = head;  // the previous array's head output starts this one's sum
    for (size_t li = 0; li < A.layers.size(); ++li) {
      const Layer& L = A.layers[li];
      const NamLayerSpec& ls = s.layers[li];
      // Everything is aligned at its end; the condition may be shorter than z (a condition_dsp
      // uses up its own receptive field): what it cannot condition is cut.
      const int64_t history = (ls.kernel_size - 1) * ls.dilation;
      if (z.size(2) <= history || c_full.size(2) < 1)
        throw std::invalid_argument("WaveNet: the input is shorter than the receptive field (" + std::to_string(receptive_field()) + " samples)");
      at::Tensor zin = z;
      if (L.film[kConvPre].active) zin = film(L.film[kConvPre], last(z, std::min(z.size(2), c_full.size(2))), c_full);
      at::Tensor a = run(L.conv, zin);
      const int64_t n = std::min(a.size(2), c_full.size(2));
      if (n < 1) throw std::invalid_argument("WaveNet: the input is shorter than the receptive field (" + std::to_string(receptive_field()) + " samples)");
      a = last(a, n);
      const at::Tensor c = last(c_full, n);
      a = film(L.film[kConvPost], a, c);
      at::Tensor mix_in = film(L.film[kMixinPre], c, c);
      a = a + film(L.film[kMixinPost], run(L.mixer, mix_in), c);
      a = film(L.film[kActivationPre], a, c);
      const int64_t B = s.bottleneck;
      at::Tensor p;
      if (ls.gating == Gating::None) {
        p = activate(ls.activation, a);
      } else {
        const at::Tensor a1 = a.narrow(1, 0, B), g = activate(ls.secondary, a.narrow(1, B, B));
        const at::Tensor f = activate(ls.activation, a1);
        p = ls.gating == Gating::Gated ? f * g : g * f + (1 - g) * a1;
      }
      p = film(L.film[kActivationPost], p, c);
      const at::Tensor residual = last(z, n);
      if (s.layer1x1) {
        at::Tensor u = run(L.layer1x1, p);
        if (ls.gating == Gating::Blended) u = film(L.film[kLayer1x1Post], u, c);  // the core's behaviour
        z = residual + u;
      } else {
        z = residual;
      }
      const at::Tensor term = s.head1x1 ? film(L.film[kHead1x1Post], run(L.head1x1, p), c) : p;
      sum = sum.defined() ? last(sum, n) + term : term;
    }
    head = run(A.head_rechannel, sum);
    y = last(z, head.size(2));
  }
  at::Tensor out = head_scale_.to(head.dtype()) * head;
  for (size_t i = 0; i < post_head_.size(); ++i) out = run(post_head_[i], activate(spec_.post_head->activation, out));
  // A condition_dsp shortens only what the first layers can condition, not the model's history:
  // the output is what the whole receptive field determines.
  return last(out, input.size(2) - receptive_field() + 1);
}

std::vector<float> NamWaveNetImpl::export_weights() const {
  std::vector<float> w;
  for (const at::Tensor& t : order_) {
    const at::Tensor flat = t.detach().to(at::kFloat).cpu().contiguous().view({-1});
    w.insert(w.end(), flat.data_ptr<float>(), flat.data_ptr<float>() + flat.numel());
  }
  w.push_back(head_scale_.to(at::kFloat).item<float>());
  return w;
}

void NamWaveNetImpl::import_weights(const std::vector<float>& w) {
  const int64_t expected = nam_wavenet_weight_count(spec_);
  if (static_cast<int64_t>(w.size()) != expected)
    throw std::invalid_argument("WaveNet: " + std::to_string(w.size()) + " weights given, this architecture has " + std::to_string(expected));
  torch::NoGradGuard no_grad;
  size_t at = 0;
  for (at::Tensor& t : order_) {
    const at::Tensor src = at::from_blob(const_cast<float*>(w.data() + at), t.sizes(), at::kFloat);
    t.copy_(src);
    at += static_cast<size_t>(t.numel());
  }
  head_scale_.fill_(w.back());  // the plugin reads the last weight, not the config's value
}

NamWaveNetSpec NamWaveNetImpl::exported_spec() const {
  NamWaveNetSpec s = spec_;
  if (condition_) {
    auto f = std::make_shared<NamFileModel>(*spec_.condition_dsp);
    f->wavenet = condition_->exported_spec();
    f->weights = condition_->export_weights();
    s.condition_dsp = f;
  }
  return s;
}

double NamWaveNetImpl::head_scale() const { return static_cast<double>(head_scale_.to(at::kFloat).item<float>()); }

std::optional<WaveNetConfig> NamWaveNetImpl::classic_config() const {
  std::optional<WaveNetConfig> c = classic_of(spec_);
  if (c) c->head_scale = head_scale();
  return c;
}

StateDict NamWaveNetImpl::renamed_old_state(const StateDict& state) const {
  // layers{i}_rechannel.weight, layers{i}_layer{j}_{conv,input_mixer,1x1}.{weight,bias},
  // layers{i}_head_rechannel.{weight,bias}, each maybe behind DataParallel's "module.".
  static const std::regex old_name(R"(^(module\.)?layers(\d+)_(layer(\d+)_)?(rechannel|head_rechannel|conv|input_mixer|1x1)\.(weight|bias)$)");
  StateDict out;
  std::string prefix;
  bool renamed = false, has_head_scale = false;
  for (const auto& [name, tensor] : state) {
    std::smatch m;
    if (!std::regex_match(name, m, old_name)) {
      has_head_scale = has_head_scale || name == "head_scale" || name == "module.head_scale";
      out.emplace_back(name, tensor);
      continue;
    }
    std::string part = m[5].str();
    if (part == "input_mixer") part = "mixer";
    if (part == "1x1") part = "layer1x1";
    prefix = m[1].str();
    out.emplace_back(prefix + "array" + m[2].str() + "_" + (m[4].matched ? "layer" + m[4].str() + "_" : "") + part + "_" + m[6].str(), tensor);
    renamed = true;
  }
  if (renamed && !has_head_scale) out.emplace_back(prefix + "head_scale", head_scale_.detach().clone());
  return out;
}

std::vector<std::string> nam_wavenet_preset_names() { return {"a2", "a2_small"}; }

NamWaveNetSpec nam_wavenet_preset(const std::string& name) {
  if (name != "a2" && name != "a2_small")
    throw std::invalid_argument("WaveNet preset '" + name + "' is not one of standard, lite, feather, nano, a2, a2_small");
  NamWaveNetSpec spec;
  spec.new_style = true;
  spec.head_scale = 0.01;
  NamLayerArraySpec a;
  a.channels = a.bottleneck = name == "a2" ? 8 : 3;
  a.head_size = 1;
  a.head_kernel = 16;
  a.head_bias = true;
  const std::vector<int64_t> dilations = {1, 3, 7, 17, 41, 101, 239, 1, 3, 7, 17, 41, 101, 239, 1, 13, 1, 3, 7, 17, 41, 101, 239};
  for (size_t i = 0; i < dilations.size(); ++i) {
    NamLayerSpec l;
    l.dilation = dilations[i];
    l.kernel_size = i == 14 || i == 15 ? 15 : 6;
    l.activation = ActivationSpec{"LeakyReLU", {0.01}};
    a.layers.push_back(l);
  }
  spec.arrays = {a};
  return spec;
}

void set_activation(NamWaveNetSpec& spec, const std::string& activation, const std::string& gating) {
  if (!activation.empty() || !gating.empty()) spec.source = nullptr;  // no longer the file's config
  for (NamLayerArraySpec& a : spec.arrays)
    for (NamLayerSpec& l : a.layers) {
      if (!activation.empty()) l.activation = activation_from_json(activation, "model.activation");
      if (!gating.empty()) {
        if (gating == "none") l.gating = Gating::None;
        else if (gating == "gated") l.gating = Gating::Gated;
        else if (gating == "blended") l.gating = Gating::Blended;
        else throw std::invalid_argument("model.gating: '" + gating + "' is not one of none, gated, blended");
      }
    }
}

}  // namespace wavetrain::experiments::amp
