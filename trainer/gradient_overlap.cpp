// Gradient averaging overlapped with the backward pass; see gradient_overlap.h.
#include "trainer/gradient_overlap.h"

#include <c10/core/GradMode.h>

#include <algorithm>
#include <mutex>

#include "trainer/distributed.h"

namespace wavetrain {

struct OverlappedGradientAverage::State {
  struct Slot {
    at::Tensor param;
    size_t bucket = 0;
    int64_t offset = 0;  // in the bucket's flat buffer
    bool filled = false;
  };
  struct Bucket {
    at::Tensor flat;  // on the group's device
    size_t missing = 0;  // slots not yet filled this step
    std::function<void()> wait;  // set once launched
  };
  ProcessGroup* group = nullptr;
  size_t bucket_bytes = 0;
  std::vector<Slot> slots;
  std::vector<Bucket> buckets;
  size_t next_launch = 0;  // buckets launch in index order
  bool armed = false;
  bool rebuilt = false;
  std::vector<int64_t> ready_order;  // slots in the order their hooks fired (until the rebuild)
  int64_t launched_in_backward = 0;
  std::mutex mutex;  // hooks run on autograd's threads (one per device)

  // Packs the slots, taken in `order`, into buckets: one dtype per bucket, at most bucket_bytes
  // each (a larger tensor gets a bucket of its own), the first at most 1 MiB, as DDP's first bucket
  // is, so that the first collective starts early in the backward.
  void assign(const std::vector<int64_t>& order) {
    buckets.clear();
    std::vector<at::ScalarType> dtypes;
    for (const int64_t i : order)
      if (std::find(dtypes.begin(), dtypes.end(), slots[i].param.scalar_type()) == dtypes.end()) dtypes.push_back(slots[i].param.scalar_type());
    for (const at::ScalarType dtype : dtypes) {
      size_t bytes = 0;
      int64_t elements = 0;
      bool open = false;
      const auto close = [&] {
        if (open) buckets.back().flat = at::zeros({elements}, at::TensorOptions().dtype(dtype).device(group->device()));
      };
      for (const int64_t i : order) {
        Slot& s = slots[i];
        if (s.param.scalar_type() != dtype) continue;
        const size_t size = static_cast<size_t>(s.param.numel() * s.param.element_size());
        const size_t cap = buckets.size() == 1 ? std::min<size_t>(bucket_bytes, 1u << 20) : bucket_bytes;  // 1: the first is open
        if (!open || bytes + size > cap) {
          close();
          buckets.emplace_back();
          open = true;
          bytes = 0;
          elements = 0;
        }
        s.bucket = buckets.size() - 1;
        s.offset = elements;
        bytes += size;
        elements += s.param.numel();
      }
      close();
    }
  }

  void fill(Slot& s, const at::Tensor& window_sum) {
    Bucket& b = buckets[s.bucket];
    b.flat.narrow(0, s.offset, s.param.numel()).copy_(window_sum.reshape({-1}));
    s.filled = true;
    --b.missing;
  }
  void reset() {
    for (Slot& s : slots) s.filled = false;
    for (Bucket& b : buckets) {
      b.missing = 0;
      b.wait = nullptr;
    }
    for (const Slot& s : slots) ++buckets[s.bucket].missing;
    next_launch = 0;
    launched_in_backward = 0;
  }
  void launch_ready() {
    while (next_launch < buckets.size() && buckets[next_launch].missing == 0) {
      buckets[next_launch].wait = group->start_sum(buckets[next_launch].flat);
      ++next_launch;
    }
  }
};

OverlappedGradientAverage::OverlappedGradientAverage(ProcessGroup& group, std::vector<at::Tensor> params, size_t bucket_bytes)
    : state_(std::make_shared<State>()) {
  State& st = *state_;
  st.group = &group;
  st.bucket_bytes = bucket_bytes;
  // Until the first backward shows the order gradients come in: reverse registration order (a
  // model's last layers get their gradients first).
  std::vector<int64_t> order;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    if (!it->requires_grad()) continue;
    order.push_back(static_cast<int64_t>(st.slots.size()));
    st.slots.push_back({*it, 0, 0, false});
  }
  st.assign(order);
  st.reset();
  for (size_t i = 0; i < st.slots.size(); ++i) {
    // The hook holds the state weakly: a parameter may outlive this object (the trainer's model does).
    std::weak_ptr<State> weak = state_;
    st.slots[i].param.register_hook([weak, i](const at::Tensor& grad) {
      const std::shared_ptr<State> state = weak.lock();
      if (!state) return;
      std::lock_guard<std::mutex> lock(state->mutex);
      // An undefined gradient (a custom autograd function that gives none, as the amp WaveNet's CPU
      // kernels do for a weight without one) adds nothing: finish() takes .grad as it stands.
      if (!state->armed || !grad.defined()) return;
      State::Slot& s = state->slots[i];
      // Autograd sums a leaf's incoming gradients before its hook, so a hook fires once a backward.
      if (s.filled) return;
      c10::AutoGradMode no_grad(false);
      const at::Tensor& accumulated = s.param.grad();
      state->fill(s, accumulated.defined() ? accumulated + grad : grad);
      if (!state->rebuilt) state->ready_order.push_back(static_cast<int64_t>(i));
      const size_t before = state->next_launch;
      state->launch_ready();
      state->launched_in_backward += static_cast<int64_t>(state->next_launch - before);
    });
  }
}

OverlappedGradientAverage::~OverlappedGradientAverage() = default;

void OverlappedGradientAverage::arm() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->reset();
  state_->armed = true;
}

void OverlappedGradientAverage::finish() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  State& st = *state_;
  if (!st.armed) st.reset();  // no armed backward: every slot comes from .grad below
  st.armed = false;
  c10::AutoGradMode no_grad(false);
  for (State::Slot& s : st.slots) {
    if (s.filled) continue;
    const at::Tensor& g = s.param.grad();
    if (g.defined()) st.fill(s, g);
    else st.fill(s, at::zeros_like(s.param));
  }
  st.launch_ready();
  const double ranks = st.group->size();
  for (State::Bucket& b : st.buckets) {
    b.wait();
    b.flat.div_(ranks);
  }
  for (const State::Slot& s : st.slots) {
    at::Tensor g = s.param.grad();
    if (g.defined()) g.copy_(st.buckets[s.bucket].flat.narrow(0, s.offset, s.param.numel()).view_as(g));
  }
  if (!st.rebuilt) {  // on every rank at the same step, also one whose backward was skipped
    // As the Reducer does after its first iteration: buckets in the order the gradients came in,
    // and the parameters that got none (unused, whose absence would hold every later bucket back)
    // at the end. Rank 0's order for all, so that the ranks' buckets stay the same.
    std::vector<bool> seen(st.slots.size(), false);
    std::vector<int64_t> order = st.ready_order;
    for (const int64_t i : order) seen[static_cast<size_t>(i)] = true;
    for (size_t i = 0; i < st.slots.size(); ++i)
      if (!seen[i]) order.push_back(static_cast<int64_t>(i));
    at::Tensor shared = at::tensor(order, at::kLong);
    st.group->broadcast_from_rank0({shared});
    const int64_t* p = shared.data_ptr<int64_t>();
    st.assign(std::vector<int64_t>(p, p + shared.numel()));
    st.rebuilt = true;
    st.ready_order.clear();
  }
}

int64_t OverlappedGradientAverage::buckets() const { return static_cast<int64_t>(state_->buckets.size()); }
int64_t OverlappedGradientAverage::launched_during_backward() const { return state_->launched_in_backward; }

}  // namespace wavetrain
