// The Value type, the restricted unpickler and the protocol-2 pickler; see pickle.h.
//
// Format facts this file relies on (checked with pickletools.dis on files written by torch 1.13,
// and against torch 2.x's serialization.py / _weights_only_unpickler.py):
//  - torch.save pickles with protocol 2. A tensor is REDUCE(torch._utils._rebuild_tensor_v2,
//    (storage, offset, size, stride, requires_grad, backward_hooks[, metadata])), where storage is
//    BINPERSID of ('storage', torch.<Type>Storage, key, location, numel).
//  - An OrderedDict is REDUCE(collections.OrderedDict, ()) followed by SETITEMS; a state dict then
//    gets BUILD with {'_metadata': ...}. Python's pickler memoizes a dict or list *before* filling
//    it, so a later BINGET must see the filled object: the unpickler keeps reference semantics
//    (nodes in an arena) and turns the result into a Value tree only at the end.
//  - Protocol 2 has no bytes opcode: bytes pickle as _codecs.encode(str, 'latin1').
//  - torch 1.13's weights_only loader knows neither BINFLOAT nor _codecs.encode, so floats and
//    bytes that we write load there only without weights_only; 2.x reads both.
#include "trainer/serialization/pickle.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <new>
#include <tuple>
#include <unordered_map>

namespace wavetrain::serialization {

// ---------------------------------------------------------------------------------------------
// Value

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.bool_ = b;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::Int;
  v.int_ = i;
  return v;
}

Value Value::floating(double d) {
  Value v;
  v.kind_ = Kind::Float;
  v.float_ = d;
  return v;
}

Value Value::string(std::string utf8) {
  Value v;
  v.kind_ = Kind::String;
  v.text_ = std::move(utf8);
  return v;
}

Value Value::bytes(std::string raw) {
  Value v;
  v.kind_ = Kind::Bytes;
  v.text_ = std::move(raw);
  return v;
}

Value Value::list(std::vector<Value> items) {
  Value v;
  v.kind_ = Kind::List;
  v.items_ = std::move(items);
  return v;
}

Value Value::tuple(std::vector<Value> items) {
  Value v;
  v.kind_ = Kind::Tuple;
  v.items_ = std::move(items);
  return v;
}

Value Value::dict(std::vector<Entry> entries) {
  Value v;
  v.kind_ = Kind::Dict;
  v.entries_ = std::move(entries);
  return v;
}

Value Value::ordered_dict(std::vector<Entry> entries) {
  Value v = dict(std::move(entries));
  v.ordered_ = true;
  return v;
}

Value Value::tensor(at::Tensor t) {
  Value v;
  v.kind_ = Kind::Tensor;
  v.tensor_ = std::move(t);
  return v;
}

const char* Value::kind_name(Kind k) {
  switch (k) {
    case Kind::None: return "None";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::Bytes: return "bytes";
    case Kind::List: return "list";
    case Kind::Tuple: return "tuple";
    case Kind::Dict: return "dict";
    case Kind::Tensor: return "tensor";
  }
  return "?";
}

namespace {

// "an int", "a list", "None": kind names as they read in a sentence.
std::string a(const char* kind) {
  const std::string name = kind;
  if (name == "None") return name;
  return (name == "int" ? "an " : "a ") + name;
}

}  // namespace

void Value::expect(Kind k) const {
  if (kind_ != k) {
    throw SerializationError("expected " + a(kind_name(k)) + ", got " + a(kind_name()));
  }
}

bool Value::as_bool() const {
  expect(Kind::Bool);
  return bool_;
}

int64_t Value::as_int() const {
  expect(Kind::Int);
  return int_;
}

double Value::as_float() const {
  expect(Kind::Float);
  return float_;
}

const std::string& Value::as_string() const {
  expect(Kind::String);
  return text_;
}

const std::string& Value::as_bytes() const {
  expect(Kind::Bytes);
  return text_;
}

const at::Tensor& Value::as_tensor() const {
  expect(Kind::Tensor);
  return tensor_;
}

const std::vector<Value>& Value::items() const {
  if (kind_ != Kind::List && kind_ != Kind::Tuple) {
    throw SerializationError("expected a list or tuple, got " + a(kind_name()));
  }
  return items_;
}

std::vector<Value>& Value::items() {
  if (kind_ != Kind::List && kind_ != Kind::Tuple) {
    throw SerializationError("expected a list or tuple, got " + a(kind_name()));
  }
  return items_;
}

const std::vector<Value::Entry>& Value::entries() const {
  expect(Kind::Dict);
  return entries_;
}

std::vector<Value::Entry>& Value::entries() {
  expect(Kind::Dict);
  return entries_;
}

bool Value::ordered() const {
  expect(Kind::Dict);
  return ordered_;
}

const Value* Value::find(const std::string& key) const {
  for (const Entry& e : entries()) {
    if (e.first.kind() == Kind::String && e.first.as_string() == key) return &e.second;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Shared helpers

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

// Checks UTF-8 as Python's "surrogatepass" decoder does (pickle decodes BINUNICODE that way):
// shortest forms only, code points up to U+10FFFF, but lone surrogates are allowed.
bool valid_utf8(const std::string& s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (n - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    const uint32_t min_for_len[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_for_len[len] || cp > 0x10FFFF) return false;
    i += len;
  }
  return true;
}

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

// The inverse; false when a code point does not fit in a byte. Expects valid UTF-8.
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

// Module and class names come from the input; keep error messages printable and short.
std::string printable(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < 120; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F) {
      out.push_back(static_cast<char>(c));
    } else {
      static const char hex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  if (s.size() > 120) out += "...";
  return out;
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

// Limits against hostile input. The stack limit is far above what Python writes (its pickler
// batches APPENDS/SETITEMS by 1000); depth bounds the recursion that builds the Value tree.
constexpr size_t kMaxStack = 100000;
constexpr size_t kMaxMarks = 1000;
constexpr int kMaxDepth = 1000;
constexpr size_t kMaxMemo = size_t{1} << 20;
constexpr size_t kMaxDims = 64;

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

// ---------------------------------------------------------------------------------------------
// Unpickler

namespace {

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

// ---------------------------------------------------------------------------------------------
// Pickler

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
