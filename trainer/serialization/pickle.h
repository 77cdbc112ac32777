// Python's pickle format, the part torch.save uses: a value type for what a checkpoint holds, a
// restricted unpickler that builds values without running anything, and a pickler whose output
// PyTorch's `torch.load(..., weights_only=True)` accepts. The zip container around the pickle is
// torch_file.h's business; here storages are handed in and out as plain 1-D tensors.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace wavetrain::serialization {

// Every failure of this module (bad input, refused content, I/O) is reported as this type, so a
// caller needs one catch clause; messages are meant for users and name where it went wrong.
class SerializationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A pickled value. Containers own their elements (copying a Value copies the tree; tensors are
// shared handles, as everywhere in LibTorch). Dict keys are String or Int values; a Dict keeps its
// entries in insertion order and remembers whether it was a collections.OrderedDict or a dict,
// because PyTorch distinguishes them (state dicts are OrderedDicts).
class Value {
 public:
  enum class Kind { None, Bool, Int, Float, String, Bytes, List, Tuple, Dict, Tensor };
  using Entry = std::pair<Value, Value>;

  Value() = default;  // None

  static Value none() { return Value(); }
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value floating(double d);
  static Value string(std::string utf8);
  static Value bytes(std::string raw);
  static Value list(std::vector<Value> items = {});
  static Value tuple(std::vector<Value> items = {});
  static Value dict(std::vector<Entry> entries = {});          // a Python dict
  static Value ordered_dict(std::vector<Entry> entries = {});  // a collections.OrderedDict
  static Value tensor(at::Tensor t);

  Kind kind() const { return kind_; }
  static const char* kind_name(Kind k);
  const char* kind_name() const { return kind_name(kind_); }
  bool is_none() const { return kind_ == Kind::None; }

  // Accessors throw SerializationError when the value holds another kind.
  bool as_bool() const;
  int64_t as_int() const;
  double as_float() const;  // Float only: an Int is not silently converted
  const std::string& as_string() const;
  const std::string& as_bytes() const;
  const at::Tensor& as_tensor() const;
  const std::vector<Value>& items() const;  // List or Tuple
  std::vector<Value>& items();
  const std::vector<Entry>& entries() const;  // Dict
  std::vector<Entry>& entries();
  bool ordered() const;  // Dict: true for an OrderedDict

  // Dict lookup by string key (linear; checkpoints are small); nullptr when absent.
  const Value* find(const std::string& key) const;

 private:
  void expect(Kind k) const;

  Kind kind_ = Kind::None;
  bool ordered_ = false;
  bool bool_ = false;
  int64_t int_ = 0;
  double float_ = 0.0;
  std::string text_;            // String (UTF-8) or Bytes
  std::vector<Value> items_;    // List, Tuple
  std::vector<Entry> entries_;  // Dict
  at::Tensor tensor_;
};

// Supplies the storage named `key` in the file: a 1-D CPU tensor of `numel` elements of `dtype`.
// It must check that the file really holds that many bytes, and throw SerializationError if not.
using StorageLoader = std::function<at::Tensor(const std::string& key, at::ScalarType dtype, int64_t numel)>;

// Unpickles a state dict or checkpoint without executing anything. Only these globals are
// accepted, each implemented here rather than looked up: collections.OrderedDict,
// torch._utils._rebuild_tensor_v2, torch._utils._rebuild_parameter, torch.<Type>Storage for the
// storage types of storage_dtype(), and _codecs.encode / builtins.bytes (how protocol 2 writes
// bytes). Any other global is refused with an error naming it. Tensor geometry is checked against
// its storage. Errors are SerializationError ending in "at byte N" (the opcode's offset); errors of
// `load_storage` pass through unchanged.
Value unpickle(const std::string& bytes, const StorageLoader& load_storage);

// The pickle of a value plus the storages it refers to: storages[i] is a contiguous CPU tensor
// whose raw bytes the container writes as record data/<i>.
struct Pickled {
  std::string bytes;
  std::vector<at::Tensor> storages;
};

// Pickles with protocol 2 the way torch.save does: tensors as _rebuild_tensor_v2 of a persistent
// storage id (each distinct tensor gets its own contiguous storage; the same tensor twice shares
// one), OrderedDicts as REDUCE of collections.OrderedDict, bytes as _codecs.encode. Throws
// SerializationError for what PyTorch could not read back (invalid UTF-8, a dict key that is not a
// str or int, an unsupported dtype, nesting deeper than 1000).
Pickled pickle(const Value& v);

// The storage class name torch.save writes for a dtype ("FloatStorage"), and back. The first
// throws SerializationError for dtypes without one; the second returns false for unknown names.
std::string storage_type_name(at::ScalarType dtype);
bool storage_dtype(const std::string& type_name, at::ScalarType* dtype);

}  // namespace wavetrain::serialization
