// The restricted unpickler, unpickle() in pickle.h: it reads what torch.save writes (the format is
// described at the top of pickler.cpp) and implements the few globals it accepts itself, so that
// nothing in a file is ever executed.
//
// Python's pickler memoizes a dict or list *before* filling it, so a later BINGET must see the
// filled object: the unpickler keeps reference semantics (nodes in an arena) and turns the result
// into a Value tree only at the end.
#include "trainer/serialization/pickle.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <new>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "trainer/serialization/internal.h"

namespace wavetrain::serialization {

using detail::a;
using detail::kMaxDepth;
using detail::printable;
using detail::valid_utf8;

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

// Names for opcodes we refuse, so that the error says what the file tried to do.
const char* opcode_name(uint8_t op) {
  switch (op) {
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 'P': return "PERSID";
    case 'S': return "STRING";
    case 'T': return "BINSTRING";
    case 'U': return "SHORT_BINSTRING";
    case 'V': return "UNICODE";
    case 'I': return "INT";
    case 'L': return "LONG";
    case 0x8b: return "LONG4";
    case 'F': return "FLOAT";
    case 'g': return "GET";
    case 'p': return "PUT";
    case '0': return "POP";
    case '1': return "POP_MARK";
    case '2': return "DUP";
    case 0x8f: return "EMPTY_SET";
    case 0x90: return "ADDITEMS";
    case 0x91: return "FROZENSET";
    case 0x96: return "BYTEARRAY8";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    default: return nullptr;
  }
}

constexpr const char* kAllowedGlobals =
    "collections.OrderedDict, torch._utils._rebuild_tensor_v2, torch._utils._rebuild_parameter, "
    "torch.FloatStorage and the other storage types, _codecs.encode";

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

const char* node_kind_name(Node::Kind k) {
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

void Unpickler::set_item(Node* dict, Node* key, Node* value) {
  if (dict->kind != Node::Kind::Dict) {
    fail("SETITEM on " + a(node_kind_name(dict->kind)) + ", not a dict");
  }
  size_t* slot = nullptr;
  bool fresh = false;
  const size_t next = dict->entries.size();
  if (key->kind == Node::Kind::String) {
    const auto [it, inserted] = dict->str_index.emplace(key->text, next);
    slot = &it->second;
    fresh = inserted;
  } else if (key->kind == Node::Kind::Int) {
    const auto [it, inserted] = dict->int_index.emplace(key->i, next);
    slot = &it->second;
    fresh = inserted;
  } else {
    fail("dict keys must be str or int, got " + a(node_kind_name(key->kind)));
  }
  // A repeated key replaces the value and keeps its place, as in Python.
  if (fresh) {
    dict->entries.emplace_back(key, value);
  } else {
    dict->entries[*slot].second = value;
  }
}

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

Value Unpickler::to_value(const Node* n, int depth) {
  if (depth > kMaxDepth) fail("value is nested deeper than " + std::to_string(kMaxDepth) + " levels (or is cyclic)");
  if (budget_values_ == 0 || budget_text_ < n->text.size()) {
    fail("pickle expands to too many values (shared objects referenced too often)");
  }
  --budget_values_;
  budget_text_ -= n->text.size();
  switch (n->kind) {
    case Node::Kind::None: return Value::none();
    case Node::Kind::Bool: return Value::boolean(n->flag);
    case Node::Kind::Int: return Value::integer(n->i);
    case Node::Kind::Float: return Value::floating(n->f);
    case Node::Kind::String: return Value::string(n->text);
    case Node::Kind::Bytes: return Value::bytes(n->text);
    case Node::Kind::Tensor: return Value::tensor(n->tensor);
    case Node::Kind::List:
    case Node::Kind::Tuple: {
      std::vector<Value> items;
      items.reserve(n->items.size());
      for (const Node* item : n->items) items.push_back(to_value(item, depth + 1));
      return n->kind == Node::Kind::List ? Value::list(std::move(items)) : Value::tuple(std::move(items));
    }
    case Node::Kind::Dict: {
      std::vector<Value::Entry> entries;
      entries.reserve(n->entries.size());
      for (const auto& [k, v] : n->entries) entries.emplace_back(to_value(k, depth + 1), to_value(v, depth + 1));
      return n->flag ? Value::ordered_dict(std::move(entries)) : Value::dict(std::move(entries));
    }
    case Node::Kind::Global:
    case Node::Kind::Storage:
      break;
  }
  fail(std::string("the pickle's result contains a bare ") + node_kind_name(n->kind) + " (" + printable(n->text) +
       "), which is not a value");
}

Value Unpickler::run() {
  // Copying a shared object once per reference is normal; a thousandfold per input byte is not.
  budget_values_ = (size_t{1} << 20) + 16 * data_.size();
  budget_text_ = (size_t{1} << 26) + 4 * data_.size();
  while (true) {
    op_pos_ = pos_;
    const uint8_t op = u8();
    switch (op) {
      case 0x80: {  // PROTO
        const uint8_t proto = u8();
        if (proto > 5) fail("unsupported pickle protocol " + std::to_string(proto));
        break;
      }
      case 0x95: {  // FRAME (protocol 4): only a length hint; frames need no special handling
        const uint64_t len = little_endian(8);
        if (len > data_.size() - pos_) fail("pickle frame is longer than the data");
        break;
      }
      case '.': {  // STOP
        if (!marks_.empty()) fail("pickle ends inside an unclosed MARK");
        if (stack_.size() != 1) {
          fail("pickle ends with " + std::to_string(stack_.size()) + " items on the stack, not 1");
        }
        return to_value(stack_.back(), 0);
      }
      case '(':  // MARK
        if (marks_.size() >= kMaxMarks) fail("pickle nests MARKs deeper than " + std::to_string(kMaxMarks));
        marks_.push_back(stack_.size());
        break;
      case 'N': push(make(Node::Kind::None)); break;
      case 0x88:    // NEWTRUE
      case 0x89: {  // NEWFALSE
        Node* b = make(Node::Kind::Bool);
        b->flag = op == 0x88;
        push(b);
        break;
      }
      case 'J': push(int_node(static_cast<int32_t>(static_cast<uint32_t>(little_endian(4))))); break;  // BININT
      case 'K': push(int_node(u8())); break;                                                         // BININT1
      case 'M': push(int_node(static_cast<int64_t>(little_endian(2)))); break;                       // BININT2
      case 0x8a: {  // LONG1: little-endian two's complement of n bytes
        const uint8_t n = u8();
        if (n > 8) fail("integer does not fit in 64 bits");
        need(n);
        uint64_t v = 0;
        for (uint8_t k = 0; k < n; ++k) v |= uint64_t{static_cast<uint8_t>(data_[pos_ + k])} << (8 * k);
        if (n > 0 && n < 8 && (static_cast<uint8_t>(data_[pos_ + n - 1]) & 0x80)) v |= ~uint64_t{0} << (8 * n);
        pos_ += n;
        push(int_node(static_cast<int64_t>(v)));
        break;
      }
      case 'G': {  // BINFLOAT: big-endian IEEE double
        need(8);
        uint64_t bits = 0;
        for (int k = 0; k < 8; ++k) bits = (bits << 8) | static_cast<uint8_t>(data_[pos_ + k]);
        pos_ += 8;
        Node* f = make(Node::Kind::Float);
        std::memcpy(&f->f, &bits, sizeof bits);
        push(f);
        break;
      }
      case 'X': push(string_node(take(little_endian(4)))); break;     // BINUNICODE
      case 0x8c: push(string_node(take(u8()))); break;                // SHORT_BINUNICODE
      case 0x8d: push(string_node(take(little_endian(8)))); break;    // BINUNICODE8
      case 'C': push(bytes_node(take(u8()))); break;                  // SHORT_BINBYTES
      case 'B': push(bytes_node(take(little_endian(4)))); break;      // BINBYTES
      case 0x8e: push(bytes_node(take(little_endian(8)))); break;     // BINBYTES8
      case '}': push(make(Node::Kind::Dict)); break;                  // EMPTY_DICT
      case ']': push(make(Node::Kind::List)); break;                  // EMPTY_LIST
      case ')': push(tuple_node({})); break;                          // EMPTY_TUPLE
      case 't': push(tuple_node(pop_mark())); break;                  // TUPLE
      case 0x85: {  // TUPLE1
        Node* a = pop();
        push(tuple_node({a}));
        break;
      }
      case 0x86: {  // TUPLE2
        Node* b = pop();
        Node* a = pop();
        push(tuple_node({a, b}));
        break;
      }
      case 0x87: {  // TUPLE3
        Node* c = pop();
        Node* b = pop();
        Node* a = pop();
        push(tuple_node({a, b, c}));
        break;
      }
      case 'l': {  // LIST
        Node* l = make(Node::Kind::List);
        l->items = pop_mark();
        push(l);
        break;
      }
      case 'd': {  // DICT
        std::vector<Node*> items = pop_mark();
        if (items.size() % 2 != 0) fail("DICT with an odd number of items");
        Node* d = make(Node::Kind::Dict);
        for (size_t k = 0; k < items.size(); k += 2) set_item(d, items[k], items[k + 1]);
        push(d);
        break;
      }
      case 'a': {  // APPEND
        Node* item = pop();
        Node* l = top();
        if (l->kind != Node::Kind::List) fail("APPEND to " + a(node_kind_name(l->kind)) + ", not a list");
        l->items.push_back(item);
        break;
      }
      case 'e': {  // APPENDS
        std::vector<Node*> items = pop_mark();
        Node* l = top();
        if (l->kind != Node::Kind::List) fail("APPENDS to " + a(node_kind_name(l->kind)) + ", not a list");
        l->items.insert(l->items.end(), items.begin(), items.end());
        break;
      }
      case 's': {  // SETITEM
        Node* value = pop();
        Node* key = pop();
        set_item(top(), key, value);
        break;
      }
      case 'u': {  // SETITEMS
        std::vector<Node*> items = pop_mark();
        if (items.size() % 2 != 0) fail("SETITEMS with an odd number of items");
        Node* d = top();
        for (size_t k = 0; k < items.size(); k += 2) set_item(d, items[k], items[k + 1]);
        break;
      }
      case 'c': {  // GLOBAL "module\nname\n"
        const std::string module = line();
        const std::string name = line();
        global(module, name);
        break;
      }
      case 0x93: {  // STACK_GLOBAL (protocol 4): module and name are strings on the stack
        Node* name = pop();
        Node* module = pop();
        if (module->kind != Node::Kind::String || name->kind != Node::Kind::String) {
          fail("STACK_GLOBAL needs two strings");
        }
        global(module->text, name->text);
        break;
      }
      case 'R': reduce(); break;  // REDUCE
      case 'b': {                 // BUILD
        // Python sets attributes from the state here. The only legitimate case in a state dict is
        // an OrderedDict's _metadata; it is dropped (load_state_dict does not need it).
        Node* state = pop();
        Node* inst = top();
        if (inst->kind != Node::Kind::Dict || state->kind != Node::Kind::Dict) {
          fail("BUILD on " + a(node_kind_name(inst->kind)) + " with " + a(node_kind_name(state->kind)) +
               "; only a dict's attributes may be set");
        }
        break;
      }
      case 'Q': persistent_load(); break;          // BINPERSID
      case 'q': memo_put(u8()); break;              // BINPUT
      case 'r': memo_put(little_endian(4)); break;  // LONG_BINPUT
      case 0x94: memo_put(memo_.size()); break;     // MEMOIZE
      case 'h': memo_get(u8()); break;              // BINGET
      case 'j': memo_get(little_endian(4)); break;  // LONG_BINGET
      default: {
        static const char hex[] = "0123456789abcdef";
        std::string code = "0x";
        code.push_back(hex[op >> 4]);
        code.push_back(hex[op & 15]);
        const char* name = opcode_name(op);
        fail("unsupported pickle opcode " + code + (name ? std::string(" (") + name + ")" : std::string()));
      }
    }
  }
}

}  // namespace

Value unpickle(const std::string& bytes, const StorageLoader& load_storage) {
  Unpickler unpickler(bytes, load_storage);
  // Only SerializationError leaves this function: LibTorch and the allocator report in their own
  // types, which callers should not have to know.
  try {
    return unpickler.run();
  } catch (const SerializationError&) {
    throw;
  } catch (const c10::Error& e) {
    throw SerializationError(std::string("LibTorch failed while unpickling at byte ") +
                             std::to_string(unpickler.position()) + ": " + e.what_without_backtrace());
  } catch (const std::bad_alloc&) {
    throw SerializationError("out of memory while unpickling at byte " + std::to_string(unpickler.position()));
  } catch (const std::exception& e) {
    throw SerializationError("unpickling failed at byte " + std::to_string(unpickler.position()) + ": " + e.what());
  }
}

}  // namespace wavetrain::serialization
