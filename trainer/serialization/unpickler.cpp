// The restricted unpickler, unpickle() in pickle.h: it reads what torch.save writes (the format is
// described at the top of pickler.cpp) and implements the few globals it accepts itself, so that
// nothing in a file is ever executed. Here: the opcode interpreter and the conversion of its
// result; the globals, storages and tensors are built in unpickler_globals.cpp.
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
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "trainer/serialization/internal.h"
#include "trainer/serialization/unpickler_internal.h"

namespace wavetrain::serialization {
namespace detail {
namespace {

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

}  // namespace

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

}  // namespace detail

using detail::Unpickler;

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
