// NAM's WaveNet forward and backward on the CPU (wavenet_cpu.h).
#include "experiments/amp/wavenet_cpu.h"

#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "trainer/torch_compat.h"

namespace wavetrain::experiments::amp {
namespace {

using kernels::KernelSet;
using kernels::kernels_now;
using kernels::Gate;
using kernels::Outer;
using kernels::Rows;

// ---- The model in kernel layouts ------------------------------------------------------------------

// A weight [out][in][k] (PyTorch's Conv1d) in the kernels' layouts: [k][in][out] for the forward
// pass and [k][out][in] for the backward pass's data gradient.
at::Tensor forward_layout(const at::Tensor& w) { return w.detach().permute({2, 1, 0}).contiguous(); }
at::Tensor backward_layout(const at::Tensor& w) { return w.detach().permute({2, 0, 1}).contiguous(); }

struct NetLayer {
  int64_t K, dilation;
  kernels::Act act;
  float slope;
  kernels::GateMode mode;
  int64_t M;       // conv outputs: C, or 2C gated and blended
  bool keep_pre;   // the conv outputs kept (Gate), as gating and SiLU need them; else the
                   // activation is fused into the conv (Rows) and its derivative taken from p
  at::Tensor conv, conv_t, bias, mixer, one, one_t, one_bias;
};

// Lengths: the layers take z_0 .. z_J down from in_len to sum_len (len.back()); the head sum has
// sum_len rows, and the head (hk taps hd apart) leaves out_len = sum_len - (hk - 1) hd of them,
// which is also what the next array takes: the last out_len rows of z_J.
struct NetArray {
  int64_t cin, C, H, hk, hd;
  std::vector<int64_t> len;  // len[j]: the length of layer j's input z_j
  at::Tensor rechannel, rechannel_t, head, head_t, head_bias;  // head_bias undefined when none
  std::vector<NetLayer> layers;
  int64_t in_len() const { return len.front(); }
  int64_t sum_len() const { return len.back(); }
  int64_t head_back() const { return (hk - 1) * hd; }
  int64_t out_len() const { return len.back() - head_back(); }
};

// The parameters a net has, in the .nam order: per array the rechannel, per layer 5, the head's 1 or 2.
size_t parameter_count(const KernelNet& net) {
  size_t n = 0;
  for (const KernelArray& a : net.arrays) n += 2 + 5 * a.layers.size() + (a.head_bias ? 1 : 0);
  return n;
}

// The parameter list is in the .nam order (NamWaveNetImpl's).
std::vector<NetArray> make_net(const KernelNet& config, at::TensorList params, int64_t input_length) {
  std::vector<NetArray> net;
  size_t at = 0;
  int64_t length = input_length;
  for (const KernelArray& c : config.arrays) {
    NetArray a;
    a.cin = c.input_size;
    a.C = c.channels;
    a.H = c.head_size;
    a.hk = c.head_kernel;
    a.hd = c.head_dilation;
    a.rechannel = forward_layout(params[at]);
    a.rechannel_t = backward_layout(params[at++]);
    a.len.push_back(length);
    for (const KernelLayer& kl : c.layers) {
      NetLayer l;
      l.K = kl.kernel_size;
      l.dilation = kl.dilation;
      l.act = kl.activation;
      l.slope = kl.slope;
      l.mode = kl.gating;
      l.M = l.mode == kernels::GateMode::None ? c.channels : 2 * c.channels;
      l.keep_pre = l.mode != kernels::GateMode::None || l.act == kernels::Act::SiLU;
      l.conv = forward_layout(params[at]);
      l.conv_t = backward_layout(params[at++]);
      l.bias = params[at++].detach().contiguous();
      l.mixer = params[at++].detach().contiguous();
      l.one = forward_layout(params[at]);
      l.one_t = backward_layout(params[at++]);
      l.one_bias = params[at++].detach().contiguous();
      a.layers.push_back(l);
      length -= (l.K - 1) * l.dilation;
      a.len.push_back(length);
    }
    a.head = forward_layout(params[at]);
    a.head_t = backward_layout(params[at++]);
    if (c.head_bias) a.head_bias = params[at++].detach().contiguous();
    length -= a.head_back();
    net.push_back(std::move(a));
  }
  return net;
}

const float* ptr(const at::Tensor& t) { return t.defined() ? t.data_ptr<float>() : nullptr; }

// The activations the backward pass needs, per array: z[j] [B][len j][C] (z[0] is the rechannelled
// input, z.back() the array's output), post[j] [B][len j+1][C] (the activations' outputs), head_sum
// [B][sum_len][C] and head [B][out_len][H]; pre[j] [B][len j+1][M] the conv outputs of a layer
// that keeps them (undefined for the others).
struct Activations {
  std::vector<std::vector<at::Tensor>> z, post, pre;
  std::vector<at::Tensor> head_sum, head;
};

// keep_all false (inference): each array's z[j] alternate between two buffers and all post[j]
// (and pre[j]) share one, so memory stays a few rows per sample instead of two per layer.
Activations allocate(const std::vector<NetArray>& net, int64_t batch, bool keep_all) {
  Activations s;
  const auto options = at::TensorOptions().dtype(at::kFloat);
  for (const NetArray& a : net) {
    std::vector<at::Tensor> z, post, pre;
    at::Tensor even, odd, shared_post, shared_pre;
    if (!keep_all) {
      even = at::empty({batch, a.in_len(), a.C}, options);
      odd = at::empty_like(even);
      shared_post = at::empty({batch, a.len[1], a.C}, options);
      shared_pre = at::empty({batch, a.len[1] * 2 * a.C}, options);  // rows of M <= 2C
    }
    for (size_t j = 0; j < a.len.size(); ++j)
      z.push_back(keep_all ? at::empty({batch, a.len[j], a.C}, options) : (j % 2 ? odd : even).narrow(1, 0, a.len[j]));
    for (size_t j = 1; j < a.len.size(); ++j) {
      post.push_back(keep_all ? at::empty({batch, a.len[j], a.C}, options) : shared_post.narrow(1, 0, a.len[j]));
      const NetLayer& l = a.layers[j - 1];
      if (!l.keep_pre) pre.emplace_back();
      else if (keep_all) pre.push_back(at::empty({batch, a.len[j], l.M}, options));
      else pre.push_back(shared_pre.narrow(1, 0, a.len[j] * l.M).view({batch, a.len[j], l.M}));
    }
    s.z.push_back(std::move(z));
    s.post.push_back(std::move(post));
    s.pre.push_back(std::move(pre));
    s.head_sum.push_back(at::empty({batch, a.sum_len(), a.C}, options));
    s.head.push_back(at::empty({batch, a.out_len(), a.H}, options));
  }
  return s;
}

// A layer's Gate over its T kept conv outputs (without its output or gradient pointers).
Gate layer_gate(const NetLayer& l, float* pre, int64_t T, int64_t C) {
  Gate g;
  g.mode = l.mode;
  g.f = l.act;
  g.slope = l.slope;
  g.pre = pre;
  g.n = T;
  g.channels = C;
  return g;
}

// `rows`, then `gate` on what it wrote, kGateBlock rows at a time, so that Gate reads rows still in
// L1 (a layer's conv outputs are up to 1 MB an item). Forward (gate.dp null): rows writes the conv
// outputs into gate.pre, and gate writes post. Backward: rows writes dp into gate.dp, a buffer of
// kGateBlock rows that each block reuses, and gate writes da.
constexpr int64_t kGateBlock = 64;
void rows_then_gate(const KernelSet& ks, const Rows& rows, const Gate& gate) {
  const bool backward = gate.dp != nullptr;
  const int64_t M = gate.mode == kernels::GateMode::None ? gate.channels : 2 * gate.channels;
  for (int64_t t0 = 0; t0 < rows.n; t0 += kGateBlock) {
    Rows r = rows;
    Gate g = gate;
    r.n = g.n = std::min(kGateBlock, rows.n - t0);
    r.in += t0 * r.cin;
    if (r.x) r.x += t0;
    if (r.rows) r.rows += t0 * r.channels;
    g.pre += t0 * M;
    if (backward) {
      g.da += t0 * M;
    } else {
      r.out += t0 * M;
      g.post += t0 * gate.channels;
    }
    ks.rows(r);
    if (backward) ks.gate_grad(g);
    else ks.gate(g);
  }
}

// Row pointer of item b in a [B][T][C] tensor (rows contiguous; a view's items may be further apart).
float* item(const at::Tensor& t, int64_t b) { return t.data_ptr<float>() + b * t.stride(0); }

void forward_item(const KernelSet& ks, const std::vector<NetArray>& net, const float* x, int64_t length, int64_t b, const Activations& s) {
  const float* y = x;  // this array's input rows, [len 0][cin]
  for (size_t i = 0; i < net.size(); ++i) {
    const NetArray& a = net[i];
    const int64_t C = a.C, sum_len = a.sum_len();
    Rows re;
    re.in = y;
    re.cin = a.cin;
    re.w = ptr(a.rechannel);
    re.out = item(s.z[i][0], b);
    re.n = a.in_len();
    re.channels = C;
    ks.rows(re);
    // The head sum starts from the previous array's head output, aligned at the end.
    float* head_sum = item(s.head_sum[i], b);
    if (i == 0) {
      std::fill(head_sum, head_sum + sum_len * C, 0.0f);
    } else {
      const float* previous = item(s.head[i - 1], b) + (net[i - 1].out_len() - sum_len) * C;
      std::copy(previous, previous + sum_len * C, head_sum);
    }
    for (size_t j = 0; j < a.layers.size(); ++j) {
      const NetLayer& l = a.layers[j];
      const int64_t T = a.len[j + 1], back = (l.K - 1) * l.dilation;
      const float* z = item(s.z[i][j], b);
      float* post = item(s.post[i][j], b);
      Rows conv;  // post = f(bias + mixer x + sum_k Conv_k z[t + k d]), or pre = its input, then Gate
      conv.in = z;
      conv.cin = C;
      conv.step = l.dilation;
      conv.taps = l.K;
      conv.w = ptr(l.conv);
      conv.bias = ptr(l.bias);
      conv.x = x + (length - T);
      conv.mixer = ptr(l.mixer);
      conv.act = l.keep_pre ? kernels::Act::None : l.act;
      conv.slope = l.slope;
      conv.out = l.keep_pre ? item(s.pre[i][j], b) : post;
      conv.n = T;
      conv.channels = l.M;
      if (l.keep_pre) {
        Gate g = layer_gate(l, item(s.pre[i][j], b), T, C);
        g.post = post;
        rows_then_gate(ks, conv, g);
      } else {
        ks.rows(conv);
      }
      Rows one;  // z_next = z[t + (K-1) d] + one_bias + One post
      one.in = post;
      one.cin = C;
      one.w = ptr(l.one);
      one.rows = z + back * C;
      one.bias = ptr(l.one_bias);
      one.out = item(s.z[i][j + 1], b);
      one.n = T;
      one.channels = C;
      ks.rows(one);
      const float* tail = post + (T - sum_len) * C;
      for (int64_t k = 0; k < sum_len * C; ++k) head_sum[k] += tail[k];
    }
    Rows head;  // head[t] = head_bias + sum_k Head_k head_sum[t + k hd]
    head.in = head_sum;
    head.cin = C;
    head.step = a.hd;
    head.taps = a.hk;
    head.w = ptr(a.head);
    head.bias = ptr(a.head_bias);
    head.out = item(s.head[i], b);
    head.n = a.out_len();
    head.channels = a.H;
    ks.rows(head);
    y = item(s.z[i].back(), b) + a.head_back() * C;  // the next array takes the last out_len rows
  }
}

// Gradient accumulators of one thread, in the kernels' layout ([k][in][out] for weights), one
// block per parameter in the .nam order.
struct Grads {
  std::vector<float> data;
  std::vector<int64_t> offset;  // per parameter
  float* at(size_t param) { return data.data() + offset[param]; }
};

// What backward_item needs besides the activations, allocated once per thread: parameter indices
// and the per-item buffers (every one is written before it is read, so items can share them).
struct BackwardScratch {
  std::vector<size_t> first_param;  // per array, in the .nam order
  int64_t max_back = 0;             // the largest (K - 1) d: da's zero rows either side
  int64_t max_head_back = 0;        // the largest (hk - 1) hd: the head gradient's zero rows either side
  // dz of the current layer's output and input, da (with its zero rows), the head sum's gradient,
  // the head gradients of this array and the one before, this array's with its zero rows, and dp
  // (the gradient of a Gate layer's output, before Gate's derivatives: kGateBlock rows).
  std::vector<float> gz, gz_in, da_padded, head_sum_grad, head_grad_here, head_grad_previous, head_grad_padded, dp;

  explicit BackwardScratch(const std::vector<NetArray>& net) {
    size_t p = 0;
    int64_t max_len = 0, max_c = 0;
    for (const NetArray& a : net) {
      first_param.push_back(p);
      p += 2 + 5 * a.layers.size() + (a.head_bias.defined() ? 1 : 0);
      max_len = std::max(max_len, a.in_len());
      max_c = std::max({max_c, a.C, a.H, a.cin});
      for (const NetLayer& l : a.layers) {
        max_back = std::max(max_back, (l.K - 1) * l.dilation);
        max_c = std::max(max_c, l.M);
      }
      max_head_back = std::max(max_head_back, a.head_back());
    }
    gz.resize(static_cast<size_t>(max_len * max_c));
    gz_in.resize(gz.size());
    head_sum_grad.resize(gz.size());
    da_padded.resize(static_cast<size_t>((max_len + 2 * max_back) * max_c));
    head_grad_padded.resize(static_cast<size_t>((max_len + 2 * max_head_back) * max_c));
    dp.resize(static_cast<size_t>(kGateBlock * max_c));
  }
};

// head_grad: dL/d(last array's head output) [B][out_len][H].
void backward_item(const KernelSet& ks, const std::vector<NetArray>& net, const float* x, int64_t length, int64_t b, const Activations& s,
                   const at::Tensor& head_grad, Grads& g, BackwardScratch& scratch) {
  const std::vector<size_t>& first_param = scratch.first_param;
  const int64_t max_back = scratch.max_back;
  std::vector<float>& gz = scratch.gz;
  std::vector<float>& gz_in = scratch.gz_in;
  std::vector<float>& da_padded = scratch.da_padded;
  std::vector<float>& head_sum_grad = scratch.head_sum_grad;
  std::vector<float>& head_grad_here = scratch.head_grad_here;
  std::vector<float>& head_grad_previous = scratch.head_grad_previous;
  std::vector<float>& head_grad_padded = scratch.head_grad_padded;
  head_grad_here.assign(item(head_grad, b), item(head_grad, b) + head_grad.size(1) * head_grad.size(2));
  bool have_gz = false;  // the last array's output feeds nothing

  for (size_t i = net.size(); i-- > 0;) {
    const NetArray& a = net[i];
    const int64_t C = a.C, H = a.H, out_len = a.out_len(), sum_len = a.sum_len(), head_back = a.head_back();
    size_t param = first_param[i];
    const size_t rechannel_param = param++;
    // Head: head[t] = head_bias + sum_k Head_k head_sum[t + k hd], so
    // head_sum_grad[s] = sum_k Head_k^T head_grad[s - k hd] over s < sum_len, the head gradient
    // read through head_back zero rows either side.
    float* hg = head_grad_padded.data() + head_back * H;
    std::fill(hg - head_back * H, hg, 0.0f);
    std::copy(head_grad_here.begin(), head_grad_here.begin() + out_len * H, hg);
    std::fill(hg + out_len * H, hg + (out_len + head_back) * H, 0.0f);
    Rows hs;
    hs.in = hg;
    hs.cin = H;
    hs.step = -a.hd;
    hs.taps = a.hk;
    hs.w = ptr(a.head_t);
    hs.out = head_sum_grad.data();
    hs.n = sum_len;
    hs.channels = C;
    ks.rows(hs);
    const size_t head_param = param + 5 * a.layers.size();
    for (int64_t k = 0; k < a.hk; ++k) {
      Outer dh;
      dh.a = item(s.head_sum[i], b) + k * a.hd * C;
      dh.sa = C;
      dh.ca = C;
      dh.b = hg;
      dh.n = out_len;
      dh.channels = H;
      dh.dw = g.at(head_param) + k * C * H;
      dh.db = k == 0 && a.head_bias.defined() ? g.at(head_param + 1) : nullptr;
      ks.outer(dh);
    }
    if (i > 0) {  // the head sum started from the previous array's head output (its last sum_len rows)
      const int64_t previous_len = net[i - 1].out_len();
      head_grad_previous.assign(static_cast<size_t>(previous_len * C), 0.0f);
      std::copy(head_sum_grad.begin(), head_sum_grad.begin() + sum_len * C,
                head_grad_previous.begin() + (previous_len - sum_len) * C);
    }
    if (!have_gz) {
      std::fill(gz.begin(), gz.begin() + sum_len * C, 0.0f);
    } else if (head_back > 0) {  // the next array took only the last out_len rows of z_J
      std::copy_backward(gz.begin(), gz.begin() + out_len * C, gz.begin() + sum_len * C);
      std::fill(gz.begin(), gz.begin() + head_back * C, 0.0f);
    }
    for (size_t j = a.layers.size(); j-- > 0;) {
      const NetLayer& l = a.layers[j];
      const size_t lp = param + 5 * j;  // conv weight, conv bias, mixer, 1x1 weight, 1x1 bias
      const int64_t T = a.len[j + 1], back = (l.K - 1) * l.dilation, M = l.M;
      float* da = da_padded.data() + max_back * M;  // [T][M], zero rows either side
      const float* post = item(s.post[i][j], b);
      const float* z = item(s.z[i][j], b);
      // dp = One gz + head_sum_grad on the last sum_len steps; da = dp f'(a), from post = f(a), or
      // through Gate from the kept conv outputs, a block at a time.
      Rows d;
      d.in = gz.data();
      d.cin = C;
      d.w = ptr(l.one_t);
      d.act = l.keep_pre ? kernels::Act::None : l.act;
      d.slope = l.slope;
      d.grad_of = l.keep_pre ? nullptr : post;
      d.out = l.keep_pre ? scratch.dp.data() : da;
      d.n = T - sum_len;
      d.channels = C;
      Gate gg;
      if (l.keep_pre) {
        gg = layer_gate(l, item(s.pre[i][j], b), T, C);
        gg.dp = scratch.dp.data();
        gg.da = da;
        rows_then_gate(ks, d, gg);
      } else {
        ks.rows(d);
      }
      d.in = gz.data() + (T - sum_len) * C;
      d.rows = head_sum_grad.data();
      d.n = sum_len;
      if (l.keep_pre) {
        gg.pre += (T - sum_len) * M;
        gg.da += (T - sum_len) * M;
        rows_then_gate(ks, d, gg);
      } else {
        d.grad_of = post + (T - sum_len) * C;
        d.out = da + (T - sum_len) * C;
        ks.rows(d);
      }
      // Weight gradients.
      Outer w1;
      w1.a = post;
      w1.sa = C;
      w1.ca = C;
      w1.b = gz.data();
      w1.n = T;
      w1.channels = C;
      w1.dw = g.at(lp + 3);
      w1.db = g.at(lp + 4);
      ks.outer(w1);
      for (int64_t k = 0; k < l.K; ++k) {
        Outer wc;
        wc.a = z + k * l.dilation * C;
        wc.sa = C;
        wc.ca = C;
        wc.b = da;
        wc.n = T;
        wc.channels = M;
        wc.dw = g.at(lp) + k * C * M;
        wc.db = k == 0 ? g.at(lp + 1) : nullptr;
        ks.outer(wc);
      }
      Outer wm;
      wm.a = x + (length - T);
      wm.sa = 1;
      wm.ca = 1;
      wm.b = da;
      wm.n = T;
      wm.channels = M;
      wm.dw = g.at(lp + 2);
      ks.outer(wm);
      // dz_in[s] = gz[s - back] + sum_k Conv_k da[s - k d], s in [0, T + back); da is zero outside [0, T).
      std::fill(da - back * M, da, 0.0f);
      std::fill(da + T * M, da + (T + back) * M, 0.0f);
      Rows dz;
      dz.in = da;
      dz.cin = M;
      dz.step = -l.dilation;
      dz.taps = l.K;
      dz.w = ptr(l.conv_t);
      dz.out = gz_in.data();
      dz.n = back;
      dz.channels = C;
      ks.rows(dz);
      dz.in = da + back * M;
      dz.rows = gz.data();
      dz.out = gz_in.data() + back * C;
      dz.n = T;
      ks.rows(dz);
      std::swap(gz, gz_in);
    }
    // gz is now dL/dz_0 [len 0][C]; z_0 = input Rechannel.
    // (the previous array's last out_len rows of z_J)
    const float* input = i == 0 ? x : item(s.z[i - 1].back(), b) + net[i - 1].head_back() * net[i - 1].C;
    Outer wr;
    wr.a = input;
    wr.sa = a.cin;
    wr.ca = a.cin;
    wr.b = gz.data();
    wr.n = a.in_len();
    wr.channels = C;
    wr.dw = g.at(rechannel_param);
    ks.outer(wr);
    if (i > 0) {  // the previous array's output gets dL/dinput = gz Rechannel^T
      Rows gi;
      gi.in = gz.data();
      gi.cin = C;
      gi.w = ptr(a.rechannel_t);
      gi.out = gz_in.data();
      gi.n = a.in_len();
      gi.channels = a.cin;
      ks.rows(gi);
      std::swap(gz, gz_in);
      have_gz = true;
      head_grad_here = head_grad_previous;
    }
  }
}

// ---- The autograd function ------------------------------------------------------------------------

// Items across threads; returns head_scale x the last head, [B][H][out_len].
at::Tensor run_forward(const std::vector<NetArray>& net, const KernelNet& config, const at::Tensor& input,
                       const Activations& s) {
  const int64_t batch = input.size(0), length = input.size(2);
  const KernelSet ks = kernels_now();
  at::parallel_for(0, batch, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) forward_item(ks, net, input.data_ptr<float>() + b * length, length, b, s);
  });
  return (s.head.back() * config.head_scale).permute({0, 2, 1}).contiguous();
}

// The net as integers and reals, for the autograd context (its saved data holds IValues).
std::vector<int64_t> encode(const KernelNet& n, std::vector<double>& reals) {
  std::vector<int64_t> ints = {static_cast<int64_t>(n.arrays.size())};
  reals = {n.head_scale};
  for (const KernelArray& a : n.arrays) {
    ints.insert(ints.end(), {a.input_size, a.channels, a.head_size, a.head_kernel, a.head_dilation, a.head_bias ? 1 : 0,
                             static_cast<int64_t>(a.layers.size())});
    for (const KernelLayer& l : a.layers) {
      ints.insert(ints.end(), {l.kernel_size, l.dilation, static_cast<int64_t>(l.activation), static_cast<int64_t>(l.gating)});
      reals.push_back(l.slope);
    }
  }
  return ints;
}

KernelNet decode(const std::vector<int64_t>& ints, const std::vector<double>& reals) {
  KernelNet n;
  size_t i = 0, r = 0;
  n.head_scale = static_cast<float>(reals[r++]);
  n.arrays.resize(static_cast<size_t>(ints[i++]));
  for (KernelArray& a : n.arrays) {
    a.input_size = ints[i++];
    a.channels = ints[i++];
    a.head_size = ints[i++];
    a.head_kernel = ints[i++];
    a.head_dilation = ints[i++];
    a.head_bias = ints[i++] != 0;
    a.layers.resize(static_cast<size_t>(ints[i++]));
    for (KernelLayer& l : a.layers) {
      l.kernel_size = ints[i++];
      l.dilation = ints[i++];
      l.activation = static_cast<kernels::Act>(ints[i++]);
      l.gating = static_cast<kernels::GateMode>(ints[i++]);
      l.slope = static_cast<float>(reals[r++]);
    }
  }
  return n;
}

struct WaveNetFunction : public torch::autograd::Function<WaveNetFunction> {
  // Saved: x, the parameters, then every activation (Activations, flattened in order).
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const KernelNet* config,
                            at::TensorList params) {
    const at::Tensor input = x.detach().contiguous();
    const std::vector<NetArray> net = make_net(*config, params, input.size(2));
    const Activations s = allocate(net, input.size(0), /*keep_all=*/true);
    const at::Tensor out = run_forward(net, *config, input, s);
    // (apply() runs forward with grad mode off; without a graph the context is dropped at once.)
    std::vector<at::Tensor> saved = {input};
    saved.insert(saved.end(), params.begin(), params.end());
    for (size_t i = 0; i < net.size(); ++i) {
      saved.insert(saved.end(), s.z[i].begin(), s.z[i].end());
      saved.insert(saved.end(), s.post[i].begin(), s.post[i].end());
      saved.insert(saved.end(), s.pre[i].begin(), s.pre[i].end());
      saved.push_back(s.head_sum[i]);
      saved.push_back(s.head[i]);
    }
    ctx->save_for_backward(saved);
    std::vector<double> reals;
    ctx->saved_data["net"] = encode(*config, reals);
    ctx->saved_data["net_reals"] = reals;
    ctx->saved_data["params"] = static_cast<int64_t>(params.size());
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list grads) {
    // The gradients come out of plain loops, without a graph of their own.
    if (at::GradMode::is_enabled())
      throw std::invalid_argument("WaveNet CPU kernels: no double backward (create_graph); use set_cpu_kernels(false)");
    const std::vector<at::Tensor> saved = ctx->get_saved_variables();
    const KernelNet config = decode(ctx->saved_data["net"].toIntVector(), ctx->saved_data["net_reals"].toDoubleVector());
    const auto count = static_cast<size_t>(ctx->saved_data["params"].toInt());
    const at::Tensor& input = saved[0];
    const std::vector<at::Tensor> params(saved.begin() + 1, saved.begin() + 1 + static_cast<std::ptrdiff_t>(count));
    const int64_t batch = input.size(0), length = input.size(2);
    const std::vector<NetArray> net = make_net(config, params, length);
    Activations s;
    size_t at = 1 + count;
    for (const NetArray& a : net) {
      s.z.emplace_back(saved.begin() + static_cast<std::ptrdiff_t>(at), saved.begin() + static_cast<std::ptrdiff_t>(at + a.len.size()));
      at += a.len.size();
      s.post.emplace_back(saved.begin() + static_cast<std::ptrdiff_t>(at),
                          saved.begin() + static_cast<std::ptrdiff_t>(at + a.layers.size()));
      at += a.layers.size();
      s.pre.emplace_back(saved.begin() + static_cast<std::ptrdiff_t>(at),
                         saved.begin() + static_cast<std::ptrdiff_t>(at + a.layers.size()));
      at += a.layers.size();
      s.head_sum.push_back(saved[at++]);
      s.head.push_back(saved[at++]);
    }
    // dL/d head = head_scale dL/d out, as [B][out_len][H].
    const at::Tensor head_grad =
        (grads[0].to(at::kFloat) * config.head_scale).permute({0, 2, 1}).contiguous();

    Grads layout;
    for (const at::Tensor& t : params) {
      layout.offset.push_back(static_cast<int64_t>(layout.data.size()));
      layout.data.resize(layout.data.size() + static_cast<size_t>(t.numel()));
    }
    const KernelSet ks = kernels_now();
    const int threads = at::get_num_threads();
    std::vector<Grads> per_thread(static_cast<size_t>(threads), layout);
    at::parallel_for(0, batch, 1, [&](int64_t b0, int64_t b1) {
      Grads& g = per_thread[static_cast<size_t>(at::get_thread_num())];
      BackwardScratch scratch(net);
      for (int64_t b = b0; b < b1; ++b)
        backward_item(ks, net, input.data_ptr<float>() + b * length, length, b, s, head_grad, g, scratch);
    });
    for (size_t t = 1; t < per_thread.size(); ++t)
      for (size_t k = 0; k < layout.data.size(); ++k) per_thread[0].data[k] += per_thread[t].data[k];

    torch::autograd::variable_list out = {at::Tensor(), at::Tensor()};  // none for x and the config
    const at::Tensor flat = at::from_blob(per_thread[0].data.data(), {static_cast<int64_t>(layout.data.size())}, at::kFloat);
    // The last layer's 1x1 (weight and bias, just before the last head's parameters) feeds nothing;
    // like LibTorch's path, leave its gradient undefined rather than zero, so that optimizers
    // (weight decay included) leave it alone.
    const size_t unused = params.size() - (config.arrays.back().head_bias ? 2 : 1) - 2;
    for (size_t k = 0; k < params.size(); ++k) {
      const at::Tensor& p = params[k];
      if (k == unused || k == unused + 1) {
        out.emplace_back();
        continue;
      }
      at::Tensor block = flat.narrow(0, layout.offset[k], p.numel());
      if (p.dim() == 3)  // weights: [k][in][out] -> [out][in][k]
        block = block.view({p.size(2), p.size(1), p.size(0)}).permute({2, 1, 0});
      // Strides exactly as a contiguous parameter's, also in its size-1 dimensions (a [16, 1, 1]
      // weight's permuted block is "contiguous" with strides [1, 16, 16]): c10d's Reducer compares
      // them literally and warns otherwise.
      out.push_back(block.reshape(p.sizes()).clone(at::MemoryFormat::Contiguous));
    }
    return out;
  }
};

}  // namespace

std::optional<KernelNet> kernel_net_of(const NamWaveNetSpec& spec, std::string* why) {
  auto no = [&](const std::string& reason) -> std::optional<KernelNet> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (spec.condition_dsp) return no("it has a condition_dsp");
  if (spec.post_head) return no("it has a head after the layer arrays");
  if (spec.arrays.empty()) return no("it has no layer arrays");
  KernelNet net;
  net.head_scale = static_cast<float>(spec.head_scale);
  for (size_t i = 0; i < spec.arrays.size(); ++i) {
    const NamLayerArraySpec& a = spec.arrays[i];
    const std::string array = "layer array " + std::to_string(i);
    if (i == 0 && a.input_size != 1) return no(array + " takes " + std::to_string(a.input_size) + " input channels");
    if (a.condition_size != 1) return no(array + " has a condition of " + std::to_string(a.condition_size) + " channels");
    if (const std::string problem = plain_array_problem(a); !problem.empty()) return no(array + " " + problem);
    if (a.head_kernel < 1 || a.head_dilation < 1) return no(array + "'s head has kernel size or dilation below 1");
    if (a.layers.empty()) return no(array + " has no layers");
    if (i + 1 < spec.arrays.size() && a.head_size != spec.arrays[i + 1].channels)
      return no(array + "'s head is not as wide as the next array");
    KernelArray k;
    k.input_size = a.input_size;
    k.channels = a.channels;
    k.head_size = a.head_size;
    k.head_kernel = a.head_kernel;
    k.head_dilation = a.head_dilation;
    k.head_bias = a.head_bias;
    for (const NamLayerSpec& l : a.layers) {
      KernelLayer kl;
      kl.gating = l.gating == Gating::Gated ? kernels::GateMode::Gated
                  : l.gating == Gating::Blended ? kernels::GateMode::Blended
                                                : kernels::GateMode::None;
      if (l.gating != Gating::None && !(l.secondary == ActivationSpec{"Sigmoid", {}}))
        return no(array + " gates with " + l.secondary.type);
      kl.kernel_size = l.kernel_size;
      kl.dilation = l.dilation;
      const std::string& f = l.activation.type;
      if (f == "Tanh") kl.activation = kernels::Act::Tanh;
      else if (f == "Sigmoid") kl.activation = kernels::Act::Sigmoid;
      else if (f == "ReLU") kl.activation = kernels::Act::ReLU;
      else if (f == "SiLU") kl.activation = kernels::Act::SiLU;
      else if (f == "LeakyReLU" && !l.activation.params.empty() && l.activation.params[0] >= 0) {
        kl.activation = kernels::Act::LeakyReLU;
        kl.slope = static_cast<float>(l.activation.params[0]);
      } else {
        return no(array + " uses " + f);
      }
      k.layers.push_back(kl);
    }
    net.arrays.push_back(std::move(k));
  }
  return net;
}

bool wavenet_cpu_supported(at::TensorList params, const at::Tensor& x) {
  if (!x.device().is_cpu() || x.scalar_type() != at::kFloat || x.requires_grad()) return false;
  if (compat::autocast_enabled(c10::DeviceType::CPU)) return false;
  for (const at::Tensor& p : params)
    if (!p.device().is_cpu() || p.scalar_type() != at::kFloat) return false;
  return true;
}

void wavenet_cpu_use_baseline_isa(bool on) { kernels::use_baseline_isa(on); }
void wavenet_cpu_use_no_avx512(bool on) { kernels::use_no_avx512(on); }

at::Tensor wavenet_cpu_forward(const KernelNet& net, at::TensorList params, const at::Tensor& x) {
  if (!wavenet_cpu_supported(params, x))
    throw std::invalid_argument("wavenet_cpu_forward: this model or input is not supported (see wavenet_cpu_supported)");
  if (params.size() != parameter_count(net))
    throw std::invalid_argument("wavenet_cpu_forward: " + std::to_string(params.size()) + " parameters given, the net has " +
                                std::to_string(parameter_count(net)));
  if (x.dim() != 3 || x.size(1) != 1) throw std::invalid_argument("wavenet_cpu_forward: input must be [batch][1][samples], got " + c10::str(x.sizes()));
  int64_t history = 0;
  for (const KernelArray& a : net.arrays) {
    history += (a.head_kernel - 1) * a.head_dilation;
    for (const KernelLayer& l : a.layers) history += (l.kernel_size - 1) * l.dilation;
  }
  if (x.size(2) <= history)
    throw std::invalid_argument("WaveNet: " + std::to_string(x.size(2)) + " input samples are fewer than the receptive field (" +
                                std::to_string(history + 1) + ")");
  bool differentiable = false;
  if (at::GradMode::is_enabled())
    for (const at::Tensor& p : params) differentiable = differentiable || p.requires_grad();
  if (differentiable) return WaveNetFunction::apply(x, &net, params);
  const at::Tensor input = x.detach().contiguous();  // inference: nothing kept for a backward pass
  const std::vector<NetArray> nets = make_net(net, params, input.size(2));
  return run_forward(nets, net, input, allocate(nets, input.size(0), /*keep_all=*/false));
}

}  // namespace wavetrain::experiments::amp
