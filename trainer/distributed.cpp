// Data-parallel collectives; see distributed.h.
#include "trainer/distributed.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <stdexcept>

#include "trainer/torch_compat.h"
#include "wavetrain_build_config.h"

#if defined(WAVETRAIN_WITH_CUDA)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace wavetrain {

// One backend is set. They are held by their own types: their common base differs between
// LibTorch versions (c10d::ProcessGroup in 1.13, c10d::Backend from 2.0), and each() needs none.
struct ProcessGroup::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
#if defined(WAVETRAIN_WITH_CUDA)
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl;
#endif
  at::Device device{at::kCPU};  // where collective buffers must live (CUDA for NCCL)
  c10::intrusive_ptr<c10d::ProcessGroup> wrapper;  // c10d_group(), made on first use

  template <class F>
  void each(F&& f) {
#if defined(WAVETRAIN_WITH_CUDA)
    if (nccl) return f(*nccl);
#endif
    f(*gloo);
  }
};

// c10d reports failures as c10::Error with long internal traces; keep the first line.
void collective_failed(const char* what, const std::exception& e) {
  std::string msg = e.what();
  msg = msg.substr(0, msg.find('\n'));
  throw PeerLostError(std::string("distributed ") + what + " failed (another rank stopped or is unreachable): " + msg);
}

namespace {

// The address this host reaches `host` from: the source address the kernel would give a datagram
// to it (connect() on a UDP socket sends nothing). Empty if `host` does not resolve or has no route.
std::string local_address_towards(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), "9", &hints, &found) != 0 || found == nullptr) return "";
  std::string address;
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_in local{};
    socklen_t length = sizeof(local);
    char text[INET_ADDRSTRLEN] = {};
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0 &&
        ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof(text)) != nullptr)
      address = text;
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(found);
  return address;
}

// Where Gloo listens and connects from: the interface GLOO_SOCKET_IFNAME names (PyTorch's variable;
// the first of a comma-separated list), else loopback for a single machine, else the address that
// routes to the master. Gloo's own default resolves this machine's hostname, which on a cluster node
// with several interfaces, or in a network namespace, can be an address the peers cannot reach.
std::shared_ptr<::gloo::transport::Device> gloo_device(const std::string& master_addr) {
  if (const char* names = std::getenv("GLOO_SOCKET_IFNAME"); names != nullptr && *names != '\0') {
    const std::string all = names;
    return c10d::ProcessGroupGloo::createDeviceForInterface(all.substr(0, all.find(',')));
  }
  if (master_addr == "127.0.0.1" || master_addr == "localhost") return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  const std::string local = local_address_towards(master_addr);
  return local.empty() ? c10d::ProcessGroupGloo::createDefaultDevice() : c10d::ProcessGroupGloo::createDeviceForHostname(local);
}

}  // namespace

ProcessGroup::ProcessGroup(const DistributedEnv& env, std::chrono::milliseconds timeout, const at::Device& device)
    : impl_(std::make_unique<Impl>()), rank_(env.rank), size_(env.world_size) {
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<std::uint16_t>(env.master_port);
    options.isServer = env.rank == 0 && !env.store_exists;
    options.numWorkers = env.world_size;
    options.waitWorkers = false;
    options.timeout = timeout;
    impl_->store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
#if defined(WAVETRAIN_WITH_CUDA)
    if (device.is_cuda()) {
      auto nccl = c10d::ProcessGroupNCCL::Options::create();
      nccl->timeout = timeout;
      impl_->nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(impl_->store, env.rank, env.world_size, nccl);
      impl_->device = device;
      return;
    }
#else
    if (device.is_cuda()) throw std::runtime_error("a CUDA device without CUDA in this LibTorch");
#endif
    auto gloo = c10d::ProcessGroupGloo::Options::create(timeout);
    gloo->devices.push_back(gloo_device(env.master_addr));
    impl_->gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(impl_->store, env.rank, env.world_size, gloo);
  } catch (const std::exception& e) {
    collective_failed("rendezvous", e);
  }
}

ProcessGroup::~ProcessGroup() = default;

void ProcessGroup::broadcast_from_rank0(const std::vector<at::Tensor>& tensors) {
  try {
    for (const at::Tensor& t : tensors) {
      const bool in_place = t.is_contiguous() && t.device() == impl_->device;
      std::vector<at::Tensor> one = {in_place ? t : t.contiguous().to(impl_->device)};
      impl_->each([&](auto& g) { g.broadcast(one)->wait(); });
      if (!in_place) t.copy_(one[0]);
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
        std::vector<at::Tensor> bucket = {at::cat(flat_parts).to(impl_->device)};
        impl_->each([&](auto& g) { g.allreduce(bucket)->wait(); });
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

std::function<void()> ProcessGroup::start_sum(const at::Tensor& flat) {
  try {
    auto tensors = std::make_shared<std::vector<at::Tensor>>(std::vector<at::Tensor>{flat});
    std::function<void()> wait;
    impl_->each([&](auto& g) {
      auto work = g.allreduce(*tensors);  // c10d's Work type differs between LibTorch versions
      wait = [work, tensors] {
        try {
          work->wait();
        } catch (const std::exception& e) {
          collective_failed("gradient all-reduce", e);
        }
      };
    });
    return wait;
  } catch (const PeerLostError&) {
    throw;
  } catch (const std::exception& e) {
    collective_failed("gradient all-reduce", e);
  }
}

const at::Device& ProcessGroup::device() const { return impl_->device; }

c10::intrusive_ptr<c10d::ProcessGroup> ProcessGroup::c10d_group() const {
#if WAVETRAIN_TORCH_AT_LEAST(2, 0)
  // From 2.0 the backends are c10d::Backend, held by a c10d::ProcessGroup that dispatches each
  // collective to the backend of its tensors' device type.
  if (!impl_->wrapper) {
    using Type = c10d::ProcessGroup::BackendType;
    impl_->wrapper = c10::make_intrusive<c10d::ProcessGroup>(impl_->store, rank_, size_);
#if defined(WAVETRAIN_WITH_CUDA)
    if (impl_->nccl) {
      impl_->wrapper->setDefaultBackend(Type::NCCL);
      impl_->wrapper->setBackend(c10::DeviceType::CUDA, Type::NCCL, impl_->nccl);
      return impl_->wrapper;
    }
#endif
    impl_->wrapper->setDefaultBackend(Type::GLOO);
    impl_->wrapper->setBackend(c10::DeviceType::CPU, Type::GLOO, impl_->gloo);
  }
  return impl_->wrapper;
#else  // 1.13: the backends are c10d::ProcessGroup themselves
#if defined(WAVETRAIN_WITH_CUDA)
  if (impl_->nccl) return impl_->nccl;
#endif
  return impl_->gloo;
#endif
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
    impl_->each([&](auto& g) { g.barrier()->wait(); });
  } catch (const std::exception& e) {
    collective_failed("barrier", e);
  }
}

}  // namespace wavetrain
