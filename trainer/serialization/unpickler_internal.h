// Internal to unpickler.cpp (the restricted unpickler's opcode interpreter) and
// unpickler_globals.cpp (the globals it accepts, storages and tensors): the arena's Node, the
// Unpickler class that the two define between them, and the limits against hostile input.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "trainer/serialization/internal.h"
#include "trainer/serialization/pickle.h"

namespace wavetrain::serialization::detail {

// Limits against hostile input (with detail::kMaxDepth). The stack limit is far above what Python
// writes (its pickler batches APPENDS/SETITEMS by 1000).
constexpr size_t kMaxStack = 100000;
constexpr size_t kMaxMarks = 1000;
constexpr size_t kMaxMemo = size_t{1} << 20;
constexpr size_t kMaxDims = 64;

// The globals we implement ourselves; nothing is ever resolved by name.
enum class Callable { OrderedDict, RebuildTensorV2, RebuildParameter, CodecsEncode, EmptyBytes, Storage };

// An object on the unpickler's stack or in its memo. Objects live in an arena owned by the
// unpickler and refer to each other by pointer, so sharing and even cycles (which a hostile pickle
// can build) cost nothing and leak nothing; a cycle is caught when the result is converted.
struct Node {
  // Value's kinds in Value's order (node_kind_name relies on it), then the two that exist only
  // while unpickling.
  enum class Kind { None, Bool, Int, Float, String, Bytes, List, Tuple, Dict, Tensor, Global, Storage };
  Kind kind = Kind::None;
  bool flag = false;  // Bool's value; Dict: is an OrderedDict
  int64_t i = 0;      // Int; Storage: numel
  double f = 0.0;
  std::string text;   // String, Bytes; Global: its dotted name; Storage: its key
  std::vector<Node*> items;                       // List, Tuple
  std::vector<std::pair<Node*, Node*>> entries;   // Dict
  std::unordered_map<std::string, size_t> str_index;  // Dict: key -> position in entries
  std::unordered_map<int64_t, size_t> int_index;
  Callable callable = Callable::OrderedDict;  // Global
  at::ScalarType dtype = at::kFloat;          // Global naming a storage type; Storage
  at::Tensor tensor;                          // Tensor; Storage: the 1-D storage
};

static_assert(static_cast<int>(Node::Kind::Tensor) == static_cast<int>(Value::Kind::Tensor),
              "Node::Kind must start with Value::Kind");

inline const char* node_kind_name(Node::Kind k) {
  switch (k) {
    case Node::Kind::Global: return "global";
    case Node::Kind::Storage: return "storage";
    default: return Value::kind_name(static_cast<Value::Kind>(k));
  }
}

class Unpickler {
 public:
  Unpickler(const std::string& data, const StorageLoader& loader) : data_(data), loader_(loader) {}

  Value run();
  size_t position() const { return op_pos_; }

 private:
  [[noreturn]] void fail(const std::string& message) const {
    throw SerializationError(message + " at byte " + std::to_string(op_pos_));
  }

  // Reading; every read is checked against the end of the data.
  void need(size_t n) const {
    if (data_.size() - pos_ < n) fail("pickle data is truncated");
  }
  uint8_t u8() {
    need(1);
    return static_cast<uint8_t>(data_[pos_++]);
  }
  uint64_t little_endian(size_t n) {
    need(n);
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) v |= uint64_t{static_cast<uint8_t>(data_[pos_ + k])} << (8 * k);
    pos_ += n;
    return v;
  }
  std::string take(uint64_t n) {
    need(n > data_.size() ? data_.size() + 1 : static_cast<size_t>(n));
    std::string s = data_.substr(pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }
  std::string line() {
    const size_t end = data_.find('\n', pos_);
    if (end == std::string::npos) fail("pickle data is truncated (GLOBAL without a newline)");
    std::string s = data_.substr(pos_, end - pos_);
    pos_ = end + 1;
    return s;
  }

  Node* make(Node::Kind kind) {
    arena_.emplace_back();
    arena_.back().kind = kind;
    return &arena_.back();
  }

  // The stack is one vector; marks_ holds where each open MARK began, and no operation may reach
  // below the innermost mark (as Python's separate per-mark stacks guarantee).
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  void push(Node* n) {
    if (stack_.size() >= kMaxStack) fail("pickle stack exceeds " + std::to_string(kMaxStack) + " items");
    stack_.push_back(n);
  }
  Node* top() {
    if (stack_.size() <= floor()) fail("pickle stack underflow");
    return stack_.back();
  }
  Node* pop() {
    Node* n = top();
    stack_.pop_back();
    return n;
  }
  std::vector<Node*> pop_mark() {
    if (marks_.empty()) fail("pickle has no MARK to pop to");
    std::vector<Node*> items(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }

  Node* int_node(int64_t v) {
    Node* n = make(Node::Kind::Int);
    n->i = v;
    return n;
  }
  Node* string_node(std::string s) {
    if (!valid_utf8(s)) fail("string is not valid UTF-8");
    Node* n = make(Node::Kind::String);
    n->text = std::move(s);
    return n;
  }
  Node* bytes_node(std::string s) {
    Node* n = make(Node::Kind::Bytes);
    n->text = std::move(s);
    return n;
  }
  Node* tuple_node(std::vector<Node*> items) {
    Node* n = make(Node::Kind::Tuple);
    n->items = std::move(items);
    return n;
  }

  void memo_put(uint64_t index) {
    Node* n = top();
    if (memo_.size() >= kMaxMemo && memo_.find(index) == memo_.end()) fail("pickle memo is too large");
    memo_[index] = n;
  }
  void memo_get(uint64_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) fail("pickle refers to memo entry " + std::to_string(index) + ", which was never stored");
    push(it->second);
  }

  void set_item(Node* dict, Node* key, Node* value);
  void global(const std::string& module, const std::string& name);
  void reduce();
  Node* rebuild_tensor(const Node& args);
  void persistent_load();
  Value to_value(const Node* n, int depth);

  const std::string& data_;
  const StorageLoader& loader_;
  size_t pos_ = 0;
  size_t op_pos_ = 0;
  std::deque<Node> arena_;  // a deque: growing it never moves the nodes that pointers refer to
  std::vector<Node*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Node*> memo_;
  std::map<std::string, Node*> storages_;  // each storage key is loaded once; views share it
  // What the final Value tree may cost: shared objects are copied once per reference, so a small
  // pickle could otherwise expand exponentially.
  size_t budget_values_ = 0;
  size_t budget_text_ = 0;
};

}  // namespace wavetrain::serialization::detail
