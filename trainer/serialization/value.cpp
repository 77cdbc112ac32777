// Value's constructors and checked accessors (pickle.h); the unpickler and the pickler build on them.
#include "trainer/serialization/pickle.h"

#include <string>
#include <utility>
#include <vector>

#include "trainer/serialization/internal.h"

namespace wavetrain::serialization {

using detail::a;

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

}  // namespace wavetrain::serialization
