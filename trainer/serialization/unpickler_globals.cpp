// The restricted unpickler's globals (see unpickler.cpp): what a GLOBAL may name, what REDUCE
// builds from it (an OrderedDict, bytes, a tensor or a parameter's tensor), and the storages that
// persistent ids load. Nothing is resolved by name and nothing is executed.
#include "trainer/serialization/pickle.h"

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "trainer/serialization/internal.h"
#include "trainer/serialization/unpickler_internal.h"

namespace wavetrain::serialization::detail {
namespace {

// Protocol 2 writes bytes as a str holding one code point per byte (latin-1); this turns such a str
// back into the bytes, false when a code point does not fit in a byte. Expects valid UTF-8.
bool utf8_to_latin1(const std::string& utf8, std::string* raw) {
  raw->clear();
  for (size_t i = 0; i < utf8.size(); ++i) {
    const auto c = static_cast<unsigned char>(utf8[i]);
    if (c < 0x80) {
      raw->push_back(static_cast<char>(c));
    } else if ((c == 0xC2 || c == 0xC3) && i + 1 < utf8.size()) {
      const auto next = static_cast<unsigned char>(utf8[i + 1]);
      raw->push_back(static_cast<char>(((c & 0x03) << 6) | (next & 0x3F)));
      ++i;
    } else {
      return false;
    }
  }
  return true;
}

constexpr const char* kAllowedGlobals =
    "collections.OrderedDict, torch._utils._rebuild_tensor_v2, torch._utils._rebuild_parameter, "
    "torch.FloatStorage and the other storage types, _codecs.encode";

}  // namespace

void Unpickler::global(const std::string& module, const std::string& name) {
  Node* g = make(Node::Kind::Global);
  g->text = module + "." + name;
  at::ScalarType dtype{};
  if (module == "collections" && name == "OrderedDict") {
    g->callable = Callable::OrderedDict;
  } else if (module == "torch._utils" && name == "_rebuild_tensor_v2") {
    g->callable = Callable::RebuildTensorV2;
  } else if (module == "torch._utils" && name == "_rebuild_parameter") {
    g->callable = Callable::RebuildParameter;
  } else if (module == "_codecs" && name == "encode") {
    g->callable = Callable::CodecsEncode;
  } else if ((module == "__builtin__" || module == "builtins") && name == "bytes") {
    g->callable = Callable::EmptyBytes;  // protocol 2 writes b"" as bytes()
  } else if (module == "torch" && storage_dtype(name, &dtype)) {
    g->callable = Callable::Storage;
    g->dtype = dtype;
  } else {
    throw SerializationError("refused global '" + printable(module) + "." + printable(name) + "' at byte " +
                             std::to_string(op_pos_) + ": only state-dict types are allowed (" +
                             kAllowedGlobals + ")");
  }
  push(g);
}

void Unpickler::reduce() {
  Node* args = pop();
  Node* fn = pop();
  if (fn->kind != Node::Kind::Global) {
    fail("REDUCE calls " + a(node_kind_name(fn->kind)) + "; only allowed globals can be called");
  }
  if (args->kind != Node::Kind::Tuple) fail("REDUCE arguments of " + fn->text + " are not a tuple");
  const std::vector<Node*>& a = args->items;
  switch (fn->callable) {
    case Callable::OrderedDict: {
      if (!a.empty()) fail("collections.OrderedDict is only supported with no arguments");
      Node* d = make(Node::Kind::Dict);
      d->flag = true;
      push(d);
      return;
    }
    case Callable::RebuildTensorV2:
      push(rebuild_tensor(*args));
      return;
    case Callable::RebuildParameter: {
      // (tensor, requires_grad, backward_hooks): a Parameter is its tensor for us.
      if (a.size() != 3 || a[0]->kind != Node::Kind::Tensor || a[1]->kind != Node::Kind::Bool ||
          a[2]->kind != Node::Kind::Dict) {
        fail("torch._utils._rebuild_parameter expects (tensor, bool, dict)");
      }
      push(a[0]);
      return;
    }
    case Callable::CodecsEncode: {
      if (a.size() != 2 || a[0]->kind != Node::Kind::String || a[1]->kind != Node::Kind::String ||
          (a[1]->text != "latin1" && a[1]->text != "latin-1")) {
        fail("_codecs.encode is only supported as encode(str, 'latin1'), how pickle writes bytes");
      }
      std::string raw;
      if (!utf8_to_latin1(a[0]->text, &raw)) fail("_codecs.encode: the string has characters above U+00FF");
      push(bytes_node(std::move(raw)));
      return;
    }
    case Callable::EmptyBytes:
      if (!a.empty()) fail("bytes() is only supported with no arguments");
      push(bytes_node(""));
      return;
    case Callable::Storage:
      fail("storage type " + fn->text + " cannot be called; storages come from persistent ids");
  }
}

void Unpickler::persistent_load() {
  // ('storage', torch.<Type>Storage, key, location, numel)
  Node* pid = pop();
  if (pid->kind != Node::Kind::Tuple || pid->items.size() != 5) {
    fail("persistent id is not a 5-tuple ('storage', type, key, location, numel)");
  }
  const std::vector<Node*>& p = pid->items;
  if (p[0]->kind != Node::Kind::String || p[0]->text != "storage") fail("persistent id is not a storage");
  if (p[1]->kind != Node::Kind::Global || p[1]->callable != Callable::Storage) {
    fail("persistent id does not name a storage type");
  }
  if (p[2]->kind != Node::Kind::String || p[3]->kind != Node::Kind::String || p[4]->kind != Node::Kind::Int) {
    fail("persistent id has a malformed key, location or size");
  }
  // The location ('cpu', 'cuda:0', ...) is ignored: everything loads onto the CPU.
  const std::string& key = p[2]->text;
  const at::ScalarType dtype = p[1]->dtype;
  const int64_t numel = p[4]->i;
  if (numel < 0) fail("storage '" + printable(key) + "' has a negative size");

  const auto it = storages_.find(key);
  if (it != storages_.end()) {
    if (it->second->dtype != dtype || it->second->i != numel) {
      fail("storage '" + printable(key) + "' is used with two different types or sizes");
    }
    push(it->second);
    return;
  }
  at::Tensor storage = loader_(key, dtype, numel);
  if (!storage.defined() || storage.dim() != 1 || storage.numel() != numel || storage.scalar_type() != dtype ||
      !storage.device().is_cpu()) {
    fail("storage loader returned a tensor that does not match storage '" + printable(key) + "'");
  }
  Node* s = make(Node::Kind::Storage);
  s->text = key;
  s->dtype = dtype;
  s->i = numel;
  s->tensor = std::move(storage);
  storages_.emplace(key, s);
  push(s);
}

Node* Unpickler::rebuild_tensor(const Node& args) {
  // (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata]); 2.x may
  // add the metadata dict. requires_grad is checked but dropped: these are plain weights.
  const std::vector<Node*>& a = args.items;
  if (a.size() != 6 && a.size() != 7) {
    fail("torch._utils._rebuild_tensor_v2 takes 6 or 7 arguments, got " + std::to_string(a.size()));
  }
  if (a[0]->kind != Node::Kind::Storage) fail("_rebuild_tensor_v2: the first argument is not a storage");
  if (a[1]->kind != Node::Kind::Int || a[2]->kind != Node::Kind::Tuple || a[3]->kind != Node::Kind::Tuple ||
      a[4]->kind != Node::Kind::Bool || a[5]->kind != Node::Kind::Dict) {
    fail("_rebuild_tensor_v2 expects (storage, int, tuple, tuple, bool, dict)");
  }
  const Node& storage = *a[0];
  const int64_t offset = a[1]->i;
  const std::vector<Node*>& size_items = a[2]->items;
  const std::vector<Node*>& stride_items = a[3]->items;
  if (size_items.size() != stride_items.size()) fail("tensor size and stride have different lengths");
  if (size_items.size() > kMaxDims) fail("tensor has more than " + std::to_string(kMaxDims) + " dimensions");

  std::vector<int64_t> sizes, strides;
  for (size_t d = 0; d < size_items.size(); ++d) {
    if (size_items[d]->kind != Node::Kind::Int || stride_items[d]->kind != Node::Kind::Int) {
      fail("tensor size and stride must be ints");
    }
    sizes.push_back(size_items[d]->i);
    strides.push_back(stride_items[d]->i);
  }

  // The geometry must stay inside the storage: offset + sum((size_i - 1) * stride_i) < numel for a
  // non-empty tensor, offset <= numel for an empty one, nothing negative, nothing overflowing.
  auto geometry = [&]() {
    std::string s = "size [";
    for (size_t d = 0; d < sizes.size(); ++d) s += (d ? ", " : "") + std::to_string(sizes[d]);
    s += "], stride [";
    for (size_t d = 0; d < strides.size(); ++d) s += (d ? ", " : "") + std::to_string(strides[d]);
    return s + "], offset " + std::to_string(offset);
  };
  bool empty = false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] < 0 || strides[d] < 0) fail("tensor geometry (" + geometry() + ") has negative entries");
    if (sizes[d] == 0) empty = true;
  }
  if (offset < 0) fail("tensor geometry (" + geometry() + ") has a negative offset");
  bool fits = true;
  if (empty) {
    fits = offset <= storage.i;
  } else {
    int64_t numel = 1;
    int64_t last = offset;  // index of the last element
    for (size_t d = 0; d < sizes.size() && fits; ++d) {
      int64_t step = 0;
      fits = !__builtin_mul_overflow(numel, sizes[d], &numel) &&
             !__builtin_mul_overflow(sizes[d] - 1, strides[d], &step) && !__builtin_add_overflow(last, step, &last);
    }
    fits = fits && last < storage.i;
  }
  if (!fits) {
    fail("tensor geometry (" + geometry() + ") exceeds its storage '" + printable(storage.text) + "' of " +
         std::to_string(storage.i) + " elements");
  }
  Node* t = make(Node::Kind::Tensor);
  t->tensor = storage.tensor.as_strided(sizes, strides, offset);
  return t;
}

}  // namespace wavetrain::serialization::detail
