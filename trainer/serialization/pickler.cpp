// The protocol-2 pickler, pickle() in pickle.h, and the storage type names it writes (which the
// unpickler looks up through storage_dtype).
//
// Format facts the pickler and the unpickler rely on (checked with pickletools.dis on files written
// by torch 1.13, and against torch 2.x's serialization.py / _weights_only_unpickler.py):
//  - torch.save pickles with protocol 2. A tensor is REDUCE(torch._utils._rebuild_tensor_v2,
//    (storage, offset, size, stride, requires_grad, backward_hooks[, metadata])), where storage is
//    BINPERSID of ('storage', torch.<Type>Storage, key, location, numel).
//  - An OrderedDict is REDUCE(collections.OrderedDict, ()) followed by SETITEMS; a state dict then
//    gets BUILD with {'_metadata': ...}.
//  - Protocol 2 has no bytes opcode: bytes pickle as _codecs.encode(str, 'latin1').
//  - torch 1.13's weights_only loader knows neither BINFLOAT nor _codecs.encode, so floats and
//    bytes that we write load there only without weights_only; 2.x reads both.
#include "trainer/serialization/pickle.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <new>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "trainer/serialization/internal.h"

namespace wavetrain::serialization {

using detail::kMaxDepth;
using detail::valid_utf8;

namespace {

struct StorageType {
  const char* name;
  at::ScalarType dtype;
};

// The typed storage classes torch.save names; complex ones are included because 1.13's and 2.x's
// weights_only loaders accept them too.
constexpr StorageType kStorageTypes[] = {
    {"DoubleStorage", at::kDouble}, {"FloatStorage", at::kFloat},
    {"HalfStorage", at::kHalf},     {"BFloat16Storage", at::kBFloat16},
    {"LongStorage", at::kLong},     {"IntStorage", at::kInt},
    {"ShortStorage", at::kShort},   {"CharStorage", at::kChar},
    {"ByteStorage", at::kByte},     {"BoolStorage", at::kBool},
    {"ComplexFloatStorage", at::kComplexFloat}, {"ComplexDoubleStorage", at::kComplexDouble},
};

// Bytes travel through protocol 2 as a str holding one code point per byte (latin-1).
std::string latin1_to_utf8(const std::string& raw) {
  std::string out;
  out.reserve(raw.size() * 2);
  for (const char ch : raw) {
    const auto b = static_cast<unsigned char>(ch);
    if (b < 0x80) {
      out.push_back(static_cast<char>(b));
    } else {
      out.push_back(static_cast<char>(0xC0 | (b >> 6)));
      out.push_back(static_cast<char>(0x80 | (b & 0x3F)));
    }
  }
  return out;
}

}  // namespace

std::string storage_type_name(at::ScalarType dtype) {
  for (const StorageType& t : kStorageTypes) {
    if (t.dtype == dtype) return t.name;
  }
  throw SerializationError(std::string("cannot save tensors of dtype ") + c10::toString(dtype) +
                           ": PyTorch has no storage type for it in torch.save's format");
}

bool storage_dtype(const std::string& type_name, at::ScalarType* dtype) {
  for (const StorageType& t : kStorageTypes) {
    if (type_name == t.name) {
      *dtype = t.dtype;
      return true;
    }
  }
  return false;
}

namespace {

class Pickler {
 public:
  Pickled run(const Value& v) {
    out_.push_back(static_cast<char>(0x80));  // PROTO 2
    out_.push_back(2);
    value(v, 0);
    out_.push_back('.');  // STOP
    return Pickled{std::move(out_), std::move(storages_)};
  }

 private:
  // Python's pickler sends APPENDS/SETITEMS in batches of this size; unpicklers may rely on it.
  static constexpr size_t kBatch = 1000;

  void op(char c) { out_.push_back(c); }
  void little_endian(uint64_t v, int n) {
    for (int k = 0; k < n; ++k) out_.push_back(static_cast<char>((v >> (8 * k)) & 0xFF));
  }

  // The shortest encoding, as Python chooses it.
  void integer(int64_t v) {
    if (v >= 0 && v <= 0xFF) {
      op('K');
      little_endian(static_cast<uint64_t>(v), 1);
    } else if (v >= 0 && v <= 0xFFFF) {
      op('M');
      little_endian(static_cast<uint64_t>(v), 2);
    } else if (v >= std::numeric_limits<int32_t>::min() && v <= std::numeric_limits<int32_t>::max()) {
      op('J');
      little_endian(static_cast<uint32_t>(static_cast<int32_t>(v)), 4);
    } else {
      // LONG1: minimal little-endian two's complement. Drop top bytes that only repeat the sign.
      const auto u = static_cast<uint64_t>(v);
      int n = 8;
      while (n > 1) {
        const uint8_t top = (u >> (8 * (n - 1))) & 0xFF;
        const uint8_t below = (u >> (8 * (n - 2))) & 0xFF;
        if ((top == 0x00 && !(below & 0x80)) || (top == 0xFF && (below & 0x80))) {
          --n;
        } else {
          break;
        }
      }
      op(static_cast<char>(0x8a));
      out_.push_back(static_cast<char>(n));
      little_endian(u, n);
    }
  }

  void string(const std::string& s) {
    if (!valid_utf8(s)) throw SerializationError("cannot save a string that is not valid UTF-8");
    if (s.size() > std::numeric_limits<uint32_t>::max()) throw SerializationError("cannot save a string over 4 GiB");
    op('X');  // BINUNICODE, which every weights_only loader reads
    little_endian(s.size(), 4);
    out_ += s;
  }

  void global(const char* module, const std::string& name) {
    op('c');
    out_ += module;
    out_.push_back('\n');
    out_ += name;
    out_.push_back('\n');
  }

  void tuple_of_ints(at::IntArrayRef values) {
    if (values.empty()) {
      op(')');
      return;
    }
    const bool marked = values.size() > 3;
    if (marked) op('(');
    for (const int64_t x : values) integer(x);
    if (marked) {
      op('t');
    } else {
      op(static_cast<char>(0x84 + values.size()));  // TUPLE1..TUPLE3
    }
  }

  void empty_ordered_dict() {
    global("collections", "OrderedDict");
    op(')');
    op('R');
  }

  void tensor(const at::Tensor& t) {
    if (!t.defined()) throw SerializationError("cannot save an undefined tensor");
    if (t.layout() != at::kStrided || t.is_quantized()) {
      throw SerializationError("cannot save a sparse or quantized tensor; only dense tensors are supported");
    }
    const std::string type_name = storage_type_name(t.scalar_type());
    // The same tensor (or an identical view of the same memory) is written once and referenced
    // twice, as torch.save does for tied weights.
    const auto identity = std::make_tuple(static_cast<const void*>(t.storage().unsafeGetStorageImpl()),
                                          t.storage_offset(), t.sizes().vec(), t.strides().vec(), t.scalar_type());
    auto found = ids_.find(identity);
    size_t index = 0;
    if (found != ids_.end()) {
      index = found->second;
    } else {
      index = storages_.size();
      // Lazy conjugate/negative views are made real first: their raw bytes are not their values.
      storages_.push_back(t.detach().to(at::kCPU).resolve_conj().resolve_neg().contiguous());
      ids_.emplace(identity, index);
    }
    const at::Tensor& stored = storages_[index];

    global("torch._utils", "_rebuild_tensor_v2");
    op('(');
    op('(');  // the persistent id
    string("storage");
    global("torch", type_name);
    string(std::to_string(index));
    string("cpu");
    integer(stored.numel());
    op('t');
    op('Q');  // BINPERSID
    integer(0);
    tuple_of_ints(stored.sizes());
    tuple_of_ints(stored.strides());
    op(static_cast<char>(0x89));  // requires_grad = False
    empty_ordered_dict();         // backward hooks
    op('t');
    op('R');
  }

  void value(const Value& v, int depth) {
    if (depth > kMaxDepth) throw SerializationError("cannot save a value nested deeper than 1000 levels");
    switch (v.kind()) {
      case Value::Kind::None: op('N'); return;
      case Value::Kind::Bool: op(static_cast<char>(v.as_bool() ? 0x88 : 0x89)); return;
      case Value::Kind::Int: integer(v.as_int()); return;
      case Value::Kind::Float: {
        uint64_t bits = 0;
        const double d = v.as_float();
        std::memcpy(&bits, &d, sizeof bits);
        op('G');
        for (int k = 7; k >= 0; --k) out_.push_back(static_cast<char>((bits >> (8 * k)) & 0xFF));
        return;
      }
      case Value::Kind::String: string(v.as_string()); return;
      case Value::Kind::Bytes:
        // Protocol 2 has no bytes opcode; this is what Python writes, and what 2.x's weights_only
        // loader accepts (it has no BINBYTES either).
        global("_codecs", "encode");
        string(latin1_to_utf8(v.as_bytes()));
        string("latin1");
        op(static_cast<char>(0x86));  // TUPLE2
        op('R');
        return;
      case Value::Kind::Tuple: {
        const std::vector<Value>& items = v.items();
        if (items.empty()) {
          op(')');
          return;
        }
        const bool marked = items.size() > 3;
        if (marked) op('(');
        for (const Value& item : items) value(item, depth + 1);
        if (marked) {
          op('t');
        } else {
          op(static_cast<char>(0x84 + items.size()));
        }
        return;
      }
      case Value::Kind::List: {
        op(']');
        const std::vector<Value>& items = v.items();
        for (size_t start = 0; start < items.size(); start += kBatch) {
          const size_t end = std::min(items.size(), start + kBatch);
          if (end - start > 1) op('(');
          for (size_t k = start; k < end; ++k) value(items[k], depth + 1);
          op(end - start > 1 ? 'e' : 'a');
        }
        return;
      }
      case Value::Kind::Dict: {
        if (v.ordered()) {
          empty_ordered_dict();
        } else {
          op('}');
        }
        const std::vector<Value::Entry>& entries = v.entries();
        for (size_t start = 0; start < entries.size(); start += kBatch) {
          const size_t end = std::min(entries.size(), start + kBatch);
          if (end - start > 1) op('(');
          for (size_t k = start; k < end; ++k) {
            const Value& key = entries[k].first;
            if (key.kind() != Value::Kind::String && key.kind() != Value::Kind::Int) {
              throw SerializationError(std::string("cannot save a dict key of type ") + key.kind_name() +
                                       "; keys must be str or int");
            }
            value(key, depth + 1);
            value(entries[k].second, depth + 1);
          }
          op(end - start > 1 ? 'u' : 's');
        }
        return;
      }
      case Value::Kind::Tensor: tensor(v.as_tensor()); return;
    }
  }

  std::string out_;
  std::vector<at::Tensor> storages_;
  std::map<std::tuple<const void*, int64_t, std::vector<int64_t>, std::vector<int64_t>, at::ScalarType>, size_t> ids_;
};

}  // namespace

Pickled pickle(const Value& v) {
  try {
    return Pickler().run(v);
  } catch (const SerializationError&) {
    throw;
  } catch (const c10::Error& e) {
    throw SerializationError(std::string("LibTorch failed while pickling: ") + e.what_without_backtrace());
  } catch (const std::bad_alloc&) {
    throw SerializationError("out of memory while pickling");
  }
}

}  // namespace wavetrain::serialization
