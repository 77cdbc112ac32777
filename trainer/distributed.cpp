// Data-parallel collectives; see distributed.h.
#include "trainer/distributed.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <map>
#include <stdexcept>

namespace wavetrain {

struct ProcessGroup::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
};

namespace {

// c10d reports failures as c10::Error with long internal traces; keep the first line.
[[noreturn]] void collective_failed(const char* what, const std::exception& e) {
  std::string msg = e.what();
  msg = msg.substr(0, msg.find('\n'));
  throw std::runtime_error(std::string("distributed ") + what + " failed (another rank stopped or is unreachable): " + msg);
}

}  // namespace

ProcessGroup::ProcessGroup(const DistributedEnv& env, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()), rank_(env.rank), size_(env.world_size) {
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<std::uint16_t>(env.master_port);
    options.isServer = env.rank == 0 && !env.store_exists;
    options.numWorkers = env.world_size;
    options.waitWorkers = false;
    options.timeout = timeout;
    impl_->store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
    auto gloo = c10d::ProcessGroupGloo::Options::create(timeout);
    // Bind to the address the peers can reach: loopback for a single machine, else this host's.
    gloo->devices.push_back(env.master_addr == "127.0.0.1" || env.master_addr == "localhost"
                                ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                : c10d::ProcessGroupGloo::createDefaultDevice());
    impl_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, env.rank, env.world_size, gloo);
  } catch (const std::exception& e) {
    collective_failed("rendezvous", e);
  }
}

ProcessGroup::~ProcessGroup() = default;

void ProcessGroup::broadcast_from_rank0(const std::vector<at::Tensor>& tensors) {
  try {
    for (const at::Tensor& t : tensors) {
      std::vector<at::Tensor> one = {t.is_contiguous() ? t : t.contiguous()};
      impl_->group->broadcast(one)->wait();
      if (!t.is_contiguous()) t.copy_(one[0]);
    }
  } catch (const std::exception& e) {
    collective_failed("broadcast", e);
  }
}

void ProcessGroup::average(const std::vector<at::Tensor>& tensors, size_t bucket_bytes) {
  // Buckets hold tensors of one dtype, flattened back to back.
  std::map<at::ScalarType, std::vector<at::Tensor>> by_dtype;
  for (const at::Tensor& t : tensors) by_dtype[t.scalar_type()].push_back(t);
  try {
    for (auto& [dtype, list] : by_dtype) {
      size_t start = 0;
      while (start < list.size()) {
        size_t end = start, bytes = 0;
        do {
          bytes += static_cast<size_t>(list[end].numel() * list[end].element_size());
          ++end;
        } while (end < list.size() && bytes + static_cast<size_t>(list[end].numel() * list[end].element_size()) <= bucket_bytes);
        std::vector<at::Tensor> flat_parts;
        for (size_t i = start; i < end; ++i) flat_parts.push_back(list[i].reshape({-1}));
        std::vector<at::Tensor> bucket = {at::cat(flat_parts)};
        impl_->group->allreduce(bucket)->wait();
        bucket[0].div_(size_);
        int64_t offset = 0;
        for (size_t i = start; i < end; ++i) {
          const int64_t n = list[i].numel();
          list[i].copy_(bucket[0].narrow(0, offset, n).view_as(list[i]));
          offset += n;
        }
        start = end;
      }
    }
  } catch (const std::exception& e) {
    collective_failed("gradient all-reduce", e);
  }
}

void ProcessGroup::set(const std::string& key, const std::string& value) {
  try {
    impl_->store->set(key, std::vector<uint8_t>(value.begin(), value.end()));
  } catch (const std::exception& e) {
    collective_failed("store set", e);
  }
}

std::string ProcessGroup::get(const std::string& key) {
  try {
    const std::vector<uint8_t> v = impl_->store->get(key);
    return std::string(v.begin(), v.end());
  } catch (const std::exception& e) {
    collective_failed("store get", e);
  }
}

void ProcessGroup::barrier() {
  try {
    impl_->group->barrier()->wait();
  } catch (const std::exception& e) {
    collective_failed("barrier", e);
  }
}

}  // namespace wavetrain
