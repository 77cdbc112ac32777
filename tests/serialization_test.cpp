// torch.save interop: files written by Debian's python3-torch load here with the right names,
// dtypes, shapes and exact values; files written here load in Python with weights_only=True; and
// hostile or broken files fail with a SerializationError that says what is wrong. Tests that need
// Python skip when /usr/bin/python3 cannot import torch.
#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <map>
#include <string>
#include <vector>

#include "trainer/serialization/pickle.h"
#include "trainer/serialization/torch_file.h"

#ifndef WAVETRAIN_TEST_PYTHON
#define WAVETRAIN_TEST_PYTHON "/usr/bin/python3"
#endif

namespace wavetrain::serialization {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// Helpers

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "wavetrain-serialization-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

bool python_has_torch() {
  static const bool ok =
      std::system(WAVETRAIN_TEST_PYTHON " -c 'import torch' >/dev/null 2>&1") == 0;
  return ok;
}

#define REQUIRE_PYTHON_TORCH()                                                                   \
  do {                                                                                           \
    if (!python_has_torch()) {                                                                   \
      GTEST_SKIP() << "python3-torch is missing (" WAVETRAIN_TEST_PYTHON                         \
                      " cannot import torch); CI installs it";                                   \
    }                                                                                            \
  } while (0)

struct PythonResult {
  int status;
  std::string output;  // stdout and stderr
};

// Runs a Python script with `args` (paths, quoted by the caller's choice of plain names).
PythonResult run_python(const TempDir& dir, const std::string& script, const std::vector<std::string>& args = {}) {
  const std::string script_path = dir.file("script.py");
  std::ofstream(script_path) << script;
  std::string command = std::string(WAVETRAIN_TEST_PYTHON) + " " + script_path;
  for (const std::string& a : args) command += " '" + a + "'";
  command += " 2>&1";
  PythonResult result{-1, ""};
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) result.output.append(buffer, n);
  result.status = ::pclose(pipe);
  return result;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// Python's str(dtype).
std::string python_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "torch.float32";
    case at::kDouble: return "torch.float64";
    case at::kHalf: return "torch.float16";
    case at::kBFloat16: return "torch.bfloat16";
    case at::kLong: return "torch.int64";
    case at::kInt: return "torch.int32";
    case at::kShort: return "torch.int16";
    case at::kChar: return "torch.int8";
    case at::kByte: return "torch.uint8";
    case at::kBool: return "torch.bool";
    case at::kComplexFloat: return "torch.complex64";
    default: return "?";
  }
}

// A tensor's elements in row-major order, exactly: floats in C99 hex ("%a", which Python's
// float.fromhex reads), integers and bools as integers, complex numbers as (real, imag) pairs.
std::vector<std::string> exact_values(const at::Tensor& t) {
  at::Tensor flat = t.is_complex() ? at::view_as_real(t.contiguous()) : t;
  flat = flat.contiguous().reshape({-1});
  std::vector<std::string> out;
  char buf[64];
  if (flat.is_floating_point()) {
    const at::Tensor d = flat.to(at::kDouble);
    for (int64_t i = 0; i < d.numel(); ++i) {
      std::snprintf(buf, sizeof buf, "%a", d.data_ptr<double>()[i]);
      out.emplace_back(buf);
    }
  } else {
    const at::Tensor l = flat.to(at::kLong);
    for (int64_t i = 0; i < l.numel(); ++i) out.push_back(std::to_string(l.data_ptr<int64_t>()[i]));
  }
  return out;
}

// "name|dtype|d0,d1|v0 v1 ..." — the line format both languages write for expected values.
std::string describe(const std::string& name, const at::Tensor& t) {
  std::string line = name + "|" + python_dtype(t.scalar_type()) + "|";
  for (int64_t d = 0; d < t.dim(); ++d) line += (d ? "," : "") + std::to_string(t.size(d));
  line += "|";
  const std::vector<std::string> values = exact_values(t);
  for (size_t i = 0; i < values.size(); ++i) line += (i ? " " : "") + values[i];
  return line;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) parts.push_back(part);
  if (!s.empty() && s.back() == sep) parts.emplace_back();
  return parts;
}

// Checks a loaded tensor against a line Python wrote in describe()'s format, with Python's
// float.hex() for floats (parsed exactly by strtod).
void expect_matches_python_line(const std::string& line, const std::string& name, const at::Tensor& t) {
  const std::vector<std::string> f = split(line, '|');
  ASSERT_EQ(f.size(), 4u) << line;
  EXPECT_EQ(f[0], name);
  EXPECT_EQ(f[1], python_dtype(t.scalar_type())) << name;
  std::string shape;
  for (int64_t d = 0; d < t.dim(); ++d) shape += (d ? "," : "") + std::to_string(t.size(d));
  EXPECT_EQ(f[2], shape) << name;
  const std::vector<std::string> expected = split(f[3], ' ');
  at::Tensor flat = t.contiguous().reshape({-1});
  ASSERT_EQ(static_cast<int64_t>(f[3].empty() ? 0 : expected.size()), flat.numel()) << name;
  for (int64_t i = 0; i < flat.numel(); ++i) {
    if (flat.is_floating_point()) {
      const double want = std::strtod(expected[i].c_str(), nullptr);
      const double got = flat.to(at::kDouble).data_ptr<double>()[i];
      EXPECT_EQ(std::memcmp(&want, &got, sizeof got), 0) << name << "[" << i << "]: " << got << " vs " << expected[i];
    } else {
      EXPECT_EQ(flat.to(at::kLong).data_ptr<int64_t>()[i], std::strtoll(expected[i].c_str(), nullptr, 10))
          << name << "[" << i << "]";
    }
  }
}

// Deep equality of values, NaN equal to NaN and -0.0 distinct from 0.0 (bitwise floats).
bool same(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::None: return true;
    case Value::Kind::Bool: return a.as_bool() == b.as_bool();
    case Value::Kind::Int: return a.as_int() == b.as_int();
    case Value::Kind::Float: {
      const double x = a.as_float(), y = b.as_float();
      return (std::isnan(x) && std::isnan(y)) || std::memcmp(&x, &y, sizeof x) == 0;
    }
    case Value::Kind::String: return a.as_string() == b.as_string();
    case Value::Kind::Bytes: return a.as_bytes() == b.as_bytes();
    case Value::Kind::List:
    case Value::Kind::Tuple: {
      if (a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i) {
        if (!same(a.items()[i], b.items()[i])) return false;
      }
      return true;
    }
    case Value::Kind::Dict: {
      if (a.ordered() != b.ordered() || a.entries().size() != b.entries().size()) return false;
      for (size_t i = 0; i < a.entries().size(); ++i) {
        if (!same(a.entries()[i].first, b.entries()[i].first) || !same(a.entries()[i].second, b.entries()[i].second)) {
          return false;
        }
      }
      return true;
    }
    case Value::Kind::Tensor: {
      const at::Tensor& x = a.as_tensor();
      const at::Tensor& y = b.as_tensor();
      return x.scalar_type() == y.scalar_type() && x.sizes() == y.sizes() && exact_values(x) == exact_values(y);
    }
  }
  return false;
}

// Zips records the way torch.save lays them out (under "archive/", "version" added at the end).
std::string zip(const std::vector<std::pair<std::string, std::string>>& records) {
  std::string out;
  caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, size_t n) {
    out.append(static_cast<const char*>(data), n);
    return n;
  });
  for (const auto& [name, bytes] : records) writer.writeRecord(name, bytes.data(), bytes.size());
  writer.writeEndOfFile();
  return out;
}

// Pieces of hand-made pickles.
std::string u32(uint32_t v) {
  std::string s(4, '\0');
  for (int k = 0; k < 4; ++k) s[k] = static_cast<char>((v >> (8 * k)) & 0xFF);
  return s;
}
std::string str(const std::string& s) { return "X" + u32(static_cast<uint32_t>(s.size())) + s; }
std::string glob(const std::string& module, const std::string& name) { return "c" + module + "\n" + name + "\n"; }
std::string num(int64_t v) {  // BININT (int32) or LONG1 with 8 bytes
  if (v >= INT32_MIN && v <= INT32_MAX) return "J" + u32(static_cast<uint32_t>(static_cast<int32_t>(v)));
  std::string s = "\x8a\x08";
  for (int k = 0; k < 8; ++k) s.push_back(static_cast<char>((static_cast<uint64_t>(v) >> (8 * k)) & 0xFF));
  return s;
}
std::string int_tuple(const std::vector<int64_t>& values) {
  std::string s = "(";
  for (const int64_t v : values) s += num(v);
  return s + "t";
}
const std::string kProto = "\x80\x02";

// A pickle of {'t': tensor} with the given geometry over FloatStorage '0' of `numel` elements.
std::string tensor_pickle(int64_t numel, int64_t offset, const std::vector<int64_t>& sizes,
                          const std::vector<int64_t>& strides) {
  return kProto + "}" + str("t") + glob("torch._utils", "_rebuild_tensor_v2") + "((" + str("storage") +
         glob("torch", "FloatStorage") + str("0") + str("cpu") + num(numel) + "tQ" + num(offset) + int_tuple(sizes) +
         int_tuple(strides) + "\x89" + glob("collections", "OrderedDict") + ")Rt" + "R" + "s.";
}

std::string float_bytes(int64_t n) {
  std::string s(static_cast<size_t>(n) * 4, '\0');
  for (int64_t i = 0; i < n; ++i) {
    const float f = static_cast<float>(i);
    std::memcpy(&s[static_cast<size_t>(i) * 4], &f, 4);
  }
  return s;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const SerializationError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("WRONG EXCEPTION TYPE: ") + e.what();
  }
  return "NO ERROR";
}

#define EXPECT_ERROR_CONTAINS(statement, text)               \
  do {                                                       \
    const std::string message = error_of([&] { statement; }); \
    EXPECT_NE(message.find(text), std::string::npos) << "error was: " << message; \
  } while (0)

const StorageLoader kNoStorages = [](const std::string& key, at::ScalarType, int64_t) -> at::Tensor {
  throw SerializationError("unexpected storage " + key);
};

// ---------------------------------------------------------------------------------------------
// 1. Python writes a state dict; C++ reads names, dtypes, shapes and exact values.

TEST(Serialization, LoadsAStateDictWrittenByPython) {
  REQUIRE_PYTHON_TORCH();
  TempDir dir;
  const PythonResult py = run_python(dir, R"PY(
import sys, collections, torch
out, values = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 2))
model(torch.randn(5, 4))  # train-mode forward: BatchNorm running stats and num_batches_tracked move
sd = model.state_dict()
base = torch.arange(24, dtype=torch.float32).reshape(4, 6) / 7
sd['extra.f64'] = torch.randn(3, dtype=torch.float64)
sd['extra.i64'] = torch.tensor([-(2**40), 0, 7, 2**62])
sd['extra.bf16'] = torch.randn(5).to(torch.bfloat16)
sd['extra.bool'] = torch.tensor([True, False, True])
sd['extra.scalar'] = torch.tensor(3.25)
sd['extra.base'] = base
sd['extra.view'] = base[1:, ::2].t()  # non-contiguous, shares base's storage
assert type(sd) is collections.OrderedDict
torch.save(sd, out)
with open(values, 'w') as f:
    for k, t in sd.items():
        flat = t.reshape(-1)
        vals = [float(x).hex() for x in flat.double()] if t.dtype.is_floating_point else [str(int(x)) for x in flat]
        f.write('%s|%s|%s|%s\n' % (k, t.dtype, ','.join(str(d) for d in t.shape), ' '.join(vals)))
)PY",
                                     {dir.file("model.pt"), dir.file("values.txt")});
  ASSERT_EQ(py.status, 0) << py.output;

  const Value loaded = load_torch_file(dir.file("model.pt"));
  EXPECT_TRUE(loaded.ordered());
  const StateDict sd = to_state_dict(loaded, "model.pt");
  const std::vector<std::string> lines = split(read_file(dir.file("values.txt")), '\n');
  ASSERT_EQ(sd.size() + 1, lines.size());  // the file ends with a newline
  for (size_t i = 0; i < sd.size(); ++i) {
    SCOPED_TRACE(sd[i].first);
    expect_matches_python_line(lines[i], sd[i].first, sd[i].second);
  }

  const std::vector<std::string> names = {"0.weight", "0.bias", "2.weight", "2.bias", "2.running_mean",
                                          "2.running_var", "2.num_batches_tracked", "3.weight", "3.bias"};
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(sd[i].first, names[i]);
  const Value& view = *loaded.find("extra.view");
  const Value& base = *loaded.find("extra.base");
  EXPECT_FALSE(view.as_tensor().is_contiguous());
  EXPECT_TRUE(view.as_tensor().is_alias_of(base.as_tensor()));  // one storage, as in Python
  EXPECT_EQ(loaded.find("extra.scalar")->as_tensor().dim(), 0);
  EXPECT_EQ(loaded.find("2.num_batches_tracked")->as_tensor().item<int64_t>(), 1);
}

// ---------------------------------------------------------------------------------------------
// 2. nn.DataParallel's state dict: the same names behind "module.".

TEST(Serialization, LoadsADataParallelStateDict) {
  REQUIRE_PYTHON_TORCH();
  TempDir dir;
  const PythonResult py = run_python(dir, R"PY(
import sys, torch
model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
torch.save(torch.nn.DataParallel(model).state_dict(), sys.argv[1])
print(','.join(model.state_dict().keys()))
)PY",
                                     {dir.file("dp.pt")});
  ASSERT_EQ(py.status, 0) << py.output;
  std::string plain_names = py.output;
  while (!plain_names.empty() && plain_names.back() == '\n') plain_names.pop_back();

  const StateDict sd = to_state_dict(load_torch_file(dir.file("dp.pt")), "dp.pt");
  ASSERT_EQ(sd.size(), 7u);
  for (const auto& [name, tensor] : sd) EXPECT_EQ(name.rfind("module.", 0), 0u) << name;
  std::string stripped;
  for (const auto& [name, tensor] : sd) stripped += (stripped.empty() ? "" : ",") + name.substr(7);  // "module."
  EXPECT_EQ(stripped, plain_names);
}

// ---------------------------------------------------------------------------------------------
// 3. C++ writes a state dict; Python's weights_only loader reads every value exactly.

TEST(Serialization, PythonLoadsAStateDictWrittenHereWithWeightsOnly) {
  REQUIRE_PYTHON_TORCH();
  TempDir dir;
  at::manual_seed(1);
  const at::Tensor matrix = at::randn({3, 5});
  const at::Tensor tied = at::randn({4});
  const StateDict sd = {
      {"layer.weight", matrix},
      {"layer.bias", at::randn({5})},
      {"f64", at::randn({2, 2}, at::kDouble)},
      {"i64", at::tensor(std::vector<int64_t>{std::numeric_limits<int64_t>::min(), -1, 0, int64_t{1} << 40,
                                               std::numeric_limits<int64_t>::max()})},
      {"bool", at::tensor(std::vector<int64_t>{1, 0, 0, 1}).to(at::kBool)},
      {"bf16", at::randn({6}).to(at::kBFloat16)},
      {"half", at::randn({3}).to(at::kHalf)},
      {"i8", at::tensor(std::vector<int64_t>{-128, 127}).to(at::kChar)},
      {"u8", at::tensor(std::vector<int64_t>{0, 255}).to(at::kByte)},
      {"c64", at::randn({2}, at::kComplexFloat)},
      {"scalar", at::scalar_tensor(-2.5)},
      {"empty", at::zeros({0, 3})},
      {"transposed", matrix.t()},                    // non-contiguous input
      {"column", matrix.select(1, 2)},               // strided view with an offset
      {"tied.a", tied},
      {"tied.b", tied},                              // the same tensor twice: one storage
  };
  save_torch_file(dir.file("cpp.pt"), from_state_dict(sd));
  std::string expected;
  for (const auto& [name, tensor] : sd) expected += describe(name, tensor) + "\n";
  write_file(dir.file("expected.txt"), expected);

  const PythonResult py = run_python(dir, R"PY(
import sys, collections, torch
sd = torch.load(sys.argv[1], weights_only=True)
assert type(sd) is collections.OrderedDict, type(sd)
names = []
for line in open(sys.argv[2]).read().splitlines():
    name, dtype, shape, vals = line.split('|')
    names.append(name)
    t = sd[name]
    assert str(t.dtype) == dtype, (name, t.dtype, dtype)
    assert list(t.shape) == [int(d) for d in shape.split(',') if d], (name, t.shape, shape)
    flat = (torch.view_as_real(t) if t.is_complex() else t).reshape(-1)
    want = vals.split(' ') if vals else []
    assert len(want) == flat.numel(), name
    for got, w in zip(flat.tolist(), want):
        if t.is_floating_point() or t.is_complex():
            assert float(got).hex() == float.fromhex(w).hex(), (name, got, w)
        else:
            assert int(got) == int(w), (name, got, w)
assert list(sd.keys()) == names, list(sd.keys())
assert sd['tied.a'].data_ptr() == sd['tied.b'].data_ptr(), 'tied tensors should share a storage'
assert not sd['scalar'].requires_grad
print('OK')
)PY",
                                     {dir.file("cpp.pt"), dir.file("expected.txt")});
  EXPECT_EQ(py.status, 0) << py.output;
  EXPECT_EQ(py.output, "OK\n");

  // And it reads back here identically.
  const StateDict back = to_state_dict(load_torch_file(dir.file("cpp.pt")), "cpp.pt");
  ASSERT_EQ(back.size(), sd.size());
  for (size_t i = 0; i < sd.size(); ++i) EXPECT_EQ(describe(back[i].first, back[i].second), describe(sd[i].first, sd[i].second));
}

// ---------------------------------------------------------------------------------------------
// 4. A nested checkpoint round-trips through Python and through this reader.

Value checkpoint() {
  using V = Value;
  at::manual_seed(2);
  const StateDict model = {{"w", at::randn({2, 3})}, {"b", at::zeros({3})}};
  V optimizer_state = V::dict({
      {V::integer(0), V::dict({{V::string("step"), V::tensor(at::scalar_tensor(3.0))},
                               {V::string("exp_avg"), V::tensor(at::randn({2, 3}))}})},
      {V::integer(1), V::dict({{V::string("step"), V::tensor(at::scalar_tensor(3.0))},
                               {V::string("exp_avg"), V::tensor(at::randn({3}))}})},
  });
  return V::dict({
      {V::string("epoch"), V::integer(7)},
      {V::string("step"), V::integer((int64_t{1} << 40) + 3)},
      {V::string("neg"), V::integer(-5)},
      {V::string("i32_edges"), V::list({V::integer(255), V::integer(256), V::integer(65535), V::integer(65536),
                                        V::integer(-1), V::integer(INT32_MIN), V::integer(INT32_MAX),
                                        V::integer(int64_t{INT32_MAX} + 1), V::integer(int64_t{INT32_MIN} - 1)})},
      {V::string("i64_edges"), V::tuple({V::integer(std::numeric_limits<int64_t>::min()),
                                         V::integer(std::numeric_limits<int64_t>::max())})},
      {V::string("name"), V::string("wavetrain \xe2\x9c\x93 \xc3\xbc" "n\xc3\xaf" "c\xc3\xb6" "d\xc3\xa9 \xf0\x9f\x9a\x80")},
      {V::string("empty_string"), V::string("")},
      {V::string("nothing"), V::none()},
      {V::string("flags"), V::list({V::boolean(true), V::boolean(false)})},
      {V::string("shape"), V::tuple({V::integer(1), V::integer(2), V::integer(3), V::integer(4)})},
      {V::string("pair"), V::tuple({V::string("a"), V::integer(2)})},
      {V::string("one"), V::tuple({V::none()})},
      {V::string("empty_list"), V::list()},
      {V::string("empty_tuple"), V::tuple()},
      {V::string("empty_dict"), V::dict()},
      {V::string("nested"), V::dict({{V::string("a"), V::dict({{V::string("b"), V::list({V::dict({{V::string("c"), V::integer(1)}})})}})}})},
      {V::string("model"), from_state_dict(model)},
      {V::string("optimizer"), V::dict({{V::string("state"), optimizer_state},
                                        {V::string("param_groups"), V::list({V::dict({{V::string("params"), V::list({V::integer(0), V::integer(1)})}})})}})},
  });
}

// What 1.13's weights_only loader cannot read (BINFLOAT, _codecs.encode); 2.x can.
Value floats_and_bytes() {
  using V = Value;
  return V::dict({
      {V::string("lr"), V::floating(1e-3)},
      {V::string("inf"), V::floating(std::numeric_limits<double>::infinity())},
      {V::string("-inf"), V::floating(-std::numeric_limits<double>::infinity())},
      {V::string("nan"), V::floating(std::nan(""))},
      {V::string("neg_zero"), V::floating(-0.0)},
      {V::string("denormal"), V::floating(std::numeric_limits<double>::denorm_min())},
      {V::string("betas"), V::tuple({V::floating(0.9), V::floating(0.999)})},
      {V::string("bytes"), V::bytes(std::string("\x00\x7f\x80\xff abc", 8))},
      {V::string("empty_bytes"), V::bytes("")},
  });
}

TEST(Serialization, NestedCheckpointRoundTripsThroughPythonAndBack) {
  REQUIRE_PYTHON_TORCH();
  TempDir dir;
  const Value ckpt = checkpoint();
  const Value extras = floats_and_bytes();
  save_torch_file(dir.file("ckpt.pt"), ckpt);
  save_torch_file(dir.file("extras.pt"), extras);

  const PythonResult py = run_python(dir, R"PY(
import sys, math, collections, torch
OD = collections.OrderedDict
ckpt = torch.load(sys.argv[1], weights_only=True)
torch.manual_seed(2)
w, b = torch.randn(2, 3), torch.zeros(3)
e0, e1 = torch.randn(2, 3), torch.randn(3)
expected = {
    'epoch': 7, 'step': 2**40 + 3, 'neg': -5,
    'i32_edges': [255, 256, 65535, 65536, -1, -2**31, 2**31 - 1, 2**31, -2**31 - 1],
    'i64_edges': (-2**63, 2**63 - 1),
    'name': 'wavetrain \u2713 \u00fcn\u00efc\u00f6d\u00e9 \U0001F680', 'empty_string': '',
    'nothing': None, 'flags': [True, False], 'shape': (1, 2, 3, 4), 'pair': ('a', 2), 'one': (None,),
    'empty_list': [], 'empty_tuple': (), 'empty_dict': {},
    'nested': {'a': {'b': [{'c': 1}]}},
    'model': OD([('w', w), ('b', b)]),
    'optimizer': {'state': {0: {'step': torch.tensor(3.0), 'exp_avg': e0},
                            1: {'step': torch.tensor(3.0), 'exp_avg': e1}},
                  'param_groups': [{'params': [0, 1]}]},
}
def same(a, b, path):
    assert type(a) is type(b), (path, type(a), type(b))
    if isinstance(a, dict):
        assert list(a.keys()) == list(b.keys()), (path, list(a.keys()), list(b.keys()))
        for k in a: same(a[k], b[k], path + '/' + str(k))
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)): same(x, y, path + '/' + str(i))
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b), (path, a, b)
    elif isinstance(a, float):
        assert (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b)), (path, a, b)
    else:
        assert a == b, (path, a, b)
same(ckpt, expected, '')

# Floats and bytes: torch 1.13's weights_only unpickler has no BINFLOAT and refuses _codecs.encode.
major = int(torch.__version__.split('.')[0])
if major < 2:
    try:
        torch.load(sys.argv[2], weights_only=True)
        raise AssertionError('torch 1.13 weights_only unexpectedly read floats')
    except torch.serialization.pickle.UnpicklingError:
        pass
extras = torch.load(sys.argv[2], weights_only=major >= 2)
same(extras, {'lr': 1e-3, 'inf': math.inf, '-inf': -math.inf, 'nan': math.nan, 'neg_zero': -0.0,
              'denormal': 5e-324, 'betas': (0.9, 0.999), 'bytes': b'\x00\x7f\x80\xff abc', 'empty_bytes': b''}, '')
print('OK')
)PY",
                                     {dir.file("ckpt.pt"), dir.file("extras.pt")});
  EXPECT_EQ(py.status, 0) << py.output;
  EXPECT_EQ(py.output, "OK\n");

  EXPECT_TRUE(same(load_torch_file(dir.file("ckpt.pt")), ckpt));
  EXPECT_TRUE(same(load_torch_file(dir.file("extras.pt")), extras));
}

// The same round trip without Python, so it runs everywhere.
TEST(Serialization, RoundTripsEveryKindInMemory) {
  const Value ckpt = checkpoint();
  EXPECT_TRUE(same(load_torch_bytes(save_torch_bytes(ckpt), "mem"), ckpt));
  const Value extras = floats_and_bytes();
  EXPECT_TRUE(same(load_torch_bytes(save_torch_bytes(extras), "mem"), extras));
  // A dict that is not ordered stays a plain dict, and the other way round.
  EXPECT_FALSE(load_torch_bytes(save_torch_bytes(Value::dict()), "mem").ordered());
  EXPECT_TRUE(load_torch_bytes(save_torch_bytes(Value::ordered_dict()), "mem").ordered());
}

TEST(Serialization, BigContainersAreBatchedLikePython) {
  std::vector<Value> items;
  std::vector<Value::Entry> entries;
  for (int i = 0; i < 2500; ++i) {
    items.push_back(Value::integer(i));
    entries.emplace_back(Value::string("k" + std::to_string(i)), Value::integer(i));
  }
  const Value v = Value::tuple({Value::list(items), Value::ordered_dict(entries), Value::list({Value::none()})});
  EXPECT_TRUE(same(load_torch_bytes(save_torch_bytes(v), "mem"), v));
}

// ---------------------------------------------------------------------------------------------
// Unpickler semantics that Python relies on

TEST(Unpickle, MemoizedContainersAreSharedNotSnapshotted) {
  // Python memoizes a dict before filling it; a later BINGET must see the filled dict:
  // {'a': d, 'b': d} with d = {'x': 1}
  const std::string p = kProto + "}(" + str("a") + "}q\x01" + str("x") + "K\x01s" + str("b") + "h\x01u.";
  const Value v = unpickle(p, kNoStorages);
  ASSERT_EQ(v.entries().size(), 2u);
  EXPECT_EQ(v.find("b")->find("x")->as_int(), 1);
}

TEST(Unpickle, AcceptsProtocol4Opcodes) {
  // FRAME, SHORT_BINUNICODE, MEMOIZE, STACK_GLOBAL, SHORT_BINBYTES, BINGET of a MEMOIZE slot.
  const std::string body = std::string("}\x94") + "(\x8c\x01k\x94" + "\x8c\x0b" + "collections\x94" + "\x8c\x0bOrderedDict\x94" +
                           "\x93)R" + "\x8c\x01" + "b" + "C\x02hi" + "\x8c\x01" + "c" + "h\x01" + "u.";
  std::string p = "\x80\x04\x95" + std::string(8, '\0') + body;
  p[3] = static_cast<char>(body.size());
  const Value v = unpickle(p, kNoStorages);
  ASSERT_EQ(v.entries().size(), 3u);
  EXPECT_TRUE(v.find("k")->ordered());
  EXPECT_EQ(v.find("b")->as_bytes(), "hi");
  EXPECT_EQ(v.find("c")->as_string(), "k");
}

TEST(Unpickle, RebuildParameterGivesItsTensor) {
  const std::string inner = glob("torch._utils", "_rebuild_tensor_v2") + "((" + str("storage") + glob("torch", "FloatStorage") +
                            str("0") + str("cpu") + num(2) + "tQ" + num(0) + int_tuple({2}) + int_tuple({1}) + "\x89" +
                            glob("collections", "OrderedDict") + ")Rtq\x05R";
  const std::string p = kProto + glob("torch._utils", "_rebuild_parameter") + inner + "\x88}\x87R.";
  const Value v = unpickle(p, [](const std::string&, at::ScalarType dtype, int64_t numel) {
    return at::arange(numel, at::TensorOptions().dtype(dtype));
  });
  EXPECT_TRUE(v.as_tensor().equal(at::arange(2, at::kFloat)));
}

TEST(Unpickle, CyclesAndExponentialSharingAreRefused) {
  // l = []; l.append(l)
  EXPECT_ERROR_CONTAINS(unpickle(kProto + std::string("]q\0h\0a.", 7), kNoStorages), "nested deeper than 1000");
  // t0 = (); t1 = (t0, t0); ... t60: 2^60 leaves when expanded.
  std::string p = kProto + std::string(")q\0", 3);
  for (int i = 1; i <= 60; ++i) {
    p += "h" + std::string(1, static_cast<char>(i - 1)) + "\x86q" + std::string(1, static_cast<char>(i));
  }
  EXPECT_ERROR_CONTAINS(unpickle(p + ".", kNoStorages), "too many values");
}

// ---------------------------------------------------------------------------------------------
// 5. Hostile and broken inputs

TEST(Serialization, RefusesGlobalsOutsideTheAllowList) {
  const std::string call = str("true") + "\x85R.";
  EXPECT_ERROR_CONTAINS(unpickle(kProto + glob("os", "system") + call, kNoStorages),
                        "refused global 'os.system' at byte 2: only state-dict types are allowed (collections.OrderedDict, "
                        "torch._utils._rebuild_tensor_v2");
  for (const auto& [module, name] : std::vector<std::pair<std::string, std::string>>{
           {"builtins", "eval"}, {"__builtin__", "getattr"}, {"torch.nn.modules.linear", "Linear"},
           {"torch", "load"}, {"posix", "system"}, {"subprocess", "Popen"}, {"torch._utils", "_rebuild_tensor"}}) {
    EXPECT_ERROR_CONTAINS(unpickle(kProto + glob(module, name) + call, kNoStorages),
                          "refused global '" + module + "." + name + "' at byte 2");
  }
  // Inside a real archive the message starts with the file name.
  EXPECT_ERROR_CONTAINS(load_torch_bytes(zip({{"data.pkl", kProto + "}" + str("x") + glob("builtins", "eval") + call}}), "evil.pt"),
                        "evil.pt: refused global 'builtins.eval' at byte 9");
}

TEST(Serialization, RefusesAMaliciousFileWrittenByPython) {
  REQUIRE_PYTHON_TORCH();
  TempDir dir;
  const std::string marker = dir.file("pwned");
  const PythonResult py = run_python(dir, R"PY(
import os, sys, torch
class Evil:
    def __reduce__(self):
        return (os.system, ('touch ' + sys.argv[2],))
torch.save({'weight': torch.ones(2), 'x': Evil()}, sys.argv[1])
torch.save({'weight': torch.ones(2)}, sys.argv[3], _use_new_zipfile_serialization=False)
)PY",
                                     {dir.file("evil.pt"), marker, dir.file("legacy.pt")});
  ASSERT_EQ(py.status, 0) << py.output;
  ASSERT_FALSE(fs::exists(marker));  // torch.save itself runs nothing
  EXPECT_ERROR_CONTAINS(load_torch_file(dir.file("evil.pt")), "evil.pt: refused global 'posix.system' at byte ");
  EXPECT_FALSE(fs::exists(marker));
  EXPECT_ERROR_CONTAINS(load_torch_file(dir.file("legacy.pt")), "legacy.pt: written in torch.save's legacy format");
}

TEST(Serialization, RefusesUnknownOpcodes) {
  EXPECT_ERROR_CONTAINS(unpickle(kProto + "\xff", kNoStorages), "unsupported pickle opcode 0xff at byte 2");
  EXPECT_ERROR_CONTAINS(unpickle(kProto + glob("collections", "OrderedDict") + ")\x81.", kNoStorages),
                        "unsupported pickle opcode 0x81 (NEWOBJ) at byte 28");
  EXPECT_ERROR_CONTAINS(unpickle(kProto + "(i" "os\nsystem\n.", kNoStorages), "unsupported pickle opcode 0x69 (INST) at byte 3");
  EXPECT_ERROR_CONTAINS(unpickle(kProto + "N" + "b.", kNoStorages), "at byte");
  EXPECT_ERROR_CONTAINS(unpickle(kProto + "]N}b.", kNoStorages), "BUILD on None with a dict");
  EXPECT_ERROR_CONTAINS(unpickle(kProto + "K\x01)R.", kNoStorages), "REDUCE calls an int");
}

TEST(Serialization, TruncatedPickleAtEveryLength) {
  const std::string archive = save_torch_bytes(checkpoint());
  std::istringstream in(archive);  // outlives the reader, which keeps a pointer to it
  caffe2::serialize::PyTorchStreamReader reader(&in);
  const auto [data, size] = reader.getRecord("data.pkl");
  const std::string pkl(static_cast<const char*>(data.get()), size);
  ASSERT_GT(pkl.size(), 1000u);
  for (size_t cut = 0; cut < pkl.size(); ++cut) {
    std::vector<std::pair<std::string, std::string>> records = {{"data.pkl", pkl.substr(0, cut)}};
    for (int i = 0; i < 8; ++i) {
      const std::string name = "data/" + std::to_string(i);
      if (reader.hasRecord(name)) {
        const auto [d, n] = reader.getRecord(name);
        records.emplace_back(name, std::string(static_cast<const char*>(d.get()), n));
      }
    }
    const std::string message = error_of([&] { load_torch_bytes(zip(records), "cut.pt"); });
    ASSERT_EQ(message.rfind("cut.pt: pickle data is truncated", 0), 0u) << "cut at " << cut << ": " << message;
  }
}

TEST(Serialization, TruncatedEmptyAndNonZipFiles) {
  const std::string archive = save_torch_bytes(checkpoint());
  for (const size_t cut : {size_t{4}, size_t{30}, size_t{200}, archive.size() / 2, archive.size() - 22, archive.size() - 1}) {
    EXPECT_ERROR_CONTAINS(load_torch_bytes(archive.substr(0, cut), "cut.pt"), "cut.pt: not a PyTorch file (zip archive): ");
  }
  EXPECT_ERROR_CONTAINS(load_torch_bytes("", "empty.pt"), "empty.pt: not a PyTorch file (zip archive): the file is empty");
  EXPECT_ERROR_CONTAINS(load_torch_bytes("name: value\n", "config.yaml"),
                        "config.yaml: not a PyTorch file (zip archive): it does not start with a zip header");
  // A zip without a version record or without data.pkl.
  EXPECT_ERROR_CONTAINS(load_torch_bytes(zip({{"data/0", "x"}}), "nopkl.pt"), "nopkl.pt: not a torch.save file");

  TempDir dir;
  EXPECT_EQ(error_of([&] { load_torch_file(dir.file("model.pt")); }),
            dir.file("model.pt") + ": cannot open: No such file or directory");
  write_file(dir.file("empty.pt"), "");
  EXPECT_ERROR_CONTAINS(load_torch_file(dir.file("empty.pt")), "empty.pt: not a PyTorch file (zip archive): the file is empty");
}

// Where the central directory entry of `record` starts in a zip.
size_t central_entry(const std::string& zip, const std::string& record) {
  for (size_t at = zip.find("PK\x01\x02"); at != std::string::npos; at = zip.find("PK\x01\x02", at + 1)) {
    const size_t name_size = static_cast<unsigned char>(zip[at + 28]) | static_cast<unsigned char>(zip[at + 29]) << 8;
    if (zip.compare(at + 46, name_size, record) == 0) return at;
  }
  throw std::runtime_error("no central directory entry " + record);
}

// Overwrites a little-endian field of the central directory entry of `record` in a zip.
std::string patch_central_entry(std::string zip, const std::string& record, size_t field, uint64_t value, int width) {
  const size_t at = central_entry(zip, record);
  for (int k = 0; k < width; ++k) zip[at + field + k] = static_cast<char>((value >> (8 * k)) & 0xFF);
  return zip;
}

TEST(Serialization, ZipStructureIsVettedBeforeLibTorchReadsIt) {
  // LibTorch's reader would allocate the claimed size, inflate corrupt data, or leak; these are
  // refused by the directory check first.
  const std::string archive = save_torch_bytes(from_state_dict({{"w", at::ones({4})}}));
  EXPECT_ERROR_CONTAINS(load_torch_bytes(patch_central_entry(archive, "archive/data.pkl", 10, 8, 2), "deflated.pt"),
                        "deflated.pt: not a PyTorch file (zip archive): record 'archive/data.pkl' is compressed");
  // A size that passes miniz's own check (which forgets the local header's name and padding).
  const size_t entry = central_entry(archive, "archive/data/0");
  uint64_t local = 0;
  for (int k = 0; k < 4; ++k) local |= uint64_t{static_cast<unsigned char>(archive[entry + 42 + k])} << (8 * k);
  std::string huge = patch_central_entry(archive, "archive/data/0", 20, archive.size() - local - 30, 4);
  huge = patch_central_entry(huge, "archive/data/0", 24, archive.size() - local - 30, 4);
  EXPECT_ERROR_CONTAINS(load_torch_bytes(huge, "huge.pt"), "huge.pt: not a PyTorch file (zip archive): record 'archive/data/0' lies outside the file");
  std::string renamed = archive;
  const size_t version = renamed.rfind("archive/version");
  renamed.replace(version, 15, "archive/versioN");  // in the central directory, the last mention
  EXPECT_ERROR_CONTAINS(load_torch_bytes(renamed, "noversion.pt"), "noversion.pt: not a PyTorch file (zip archive): no version record");
  EXPECT_ERROR_CONTAINS(load_torch_bytes(zip({{"data.pkl", kProto + "N."}, {"version", "99\n"}}), "future.pt"),
                        "future.pt: not a PyTorch file (zip archive): unsupported version record '99\\x0a'");
  std::string directory = patch_central_entry(archive, "archive/data.pkl", 38, 0x10, 4);  // MS-DOS directory bit
  EXPECT_ERROR_CONTAINS(load_torch_bytes(directory, "dir.pt"),
                        "dir.pt: not a PyTorch file (zip archive): record 'archive/data.pkl' is a directory");
  std::string duplicated = save_torch_bytes(from_state_dict({{"a", at::ones({1})}, {"b", at::ones({2})}}));
  duplicated.replace(duplicated.rfind("archive/data/1"), 14, "archive/data/0");
  EXPECT_ERROR_CONTAINS(load_torch_bytes(duplicated, "twice.pt"),
                        "twice.pt: not a PyTorch file (zip archive): record 'archive/data/0' appears twice");
}

TEST(Serialization, TensorGeometryMustFitItsStorage) {
  auto load = [](int64_t numel, int64_t offset, std::vector<int64_t> sizes, std::vector<int64_t> strides) {
    return load_torch_bytes(zip({{"data.pkl", tensor_pickle(numel, offset, sizes, strides)}, {"data/0", float_bytes(numel)}}),
                            "geometry.pt");
  };
  // Fitting exactly is fine, and so is an empty tensor at the end of its storage.
  EXPECT_TRUE(load(4, 0, {2, 2}, {2, 1}).find("t")->as_tensor().equal(at::arange(4, at::kFloat).reshape({2, 2})));
  EXPECT_TRUE(load(4, 1, {2}, {2}).find("t")->as_tensor().equal(at::tensor({1.0f, 3.0f})));
  EXPECT_EQ(load(4, 4, {0}, {1}).find("t")->as_tensor().numel(), 0);
  EXPECT_EQ(load(4, 0, {1000, 4}, {0, 1}).find("t")->as_tensor().numel(), 4000);  // stride 0 (expand) is legal

  EXPECT_ERROR_CONTAINS(load(4, 0, {5}, {1}), "geometry.pt: tensor geometry (size [5], stride [1], offset 0) exceeds its storage '0' of 4 elements at byte");
  EXPECT_ERROR_CONTAINS(load(4, 4, {1}, {1}), "exceeds its storage");
  EXPECT_ERROR_CONTAINS(load(4, 0, {2, 2}, {3, 1}), "exceeds its storage");
  EXPECT_ERROR_CONTAINS(load(4, 5, {0}, {1}), "exceeds its storage");
  EXPECT_ERROR_CONTAINS(load(4, 0, {2}, {-1}), "negative");
  EXPECT_ERROR_CONTAINS(load(4, -1, {1}, {1}), "negative offset");
  EXPECT_ERROR_CONTAINS(load(4, 0, {-2}, {1}), "negative");
  EXPECT_ERROR_CONTAINS(load(4, 0, {int64_t{1} << 62, 4}, {int64_t{1} << 62, 1}), "exceeds its storage");
  EXPECT_ERROR_CONTAINS(load(4, 0, {2, 2}, {1}), "different lengths");
}

TEST(Serialization, StorageRecordsMustHoldTheTensor) {
  EXPECT_EQ(error_of([] {
              load_torch_bytes(zip({{"data.pkl", tensor_pickle(10, 0, {10}, {1})}, {"data/0", float_bytes(2)}}), "short.pt");
            }),
            "short.pt: storage '0' holds 8 bytes, the tensor needs 40");
  EXPECT_ERROR_CONTAINS(load_torch_bytes(zip({{"data.pkl", tensor_pickle(4, 0, {4}, {1})}}), "missing.pt"),
                        "missing.pt: storage '0' is missing (no record data/0 in the archive)");
  EXPECT_ERROR_CONTAINS(
      load_torch_bytes(zip({{"data.pkl", tensor_pickle(int64_t{1} << 62, 0, {4}, {1})}, {"data/0", float_bytes(4)}}), "huge.pt"),
      "huge.pt: storage '0' claims 4611686018427387904 elements");
  EXPECT_ERROR_CONTAINS(
      load_torch_bytes(zip({{"data.pkl", tensor_pickle(-1, 0, {4}, {1})}, {"data/0", float_bytes(4)}}), "neg.pt"),
      "neg.pt: storage '0' has a negative size");
}

TEST(Serialization, LoadedTensorsOutliveTheArchive) {
  std::string archive = save_torch_bytes(from_state_dict({{"w", at::arange(6, at::kFloat)}, {"v", at::arange(3, at::kLong)}}));
  const Value v = load_torch_bytes(archive, "mem");
  archive.assign(archive.size(), '\0');  // the bytes are gone; the tensors must not care
  archive.clear();
  archive.shrink_to_fit();
  EXPECT_TRUE(v.find("w")->as_tensor().equal(at::arange(6, at::kFloat)));
  EXPECT_TRUE(v.find("v")->as_tensor().equal(at::arange(3, at::kLong)));
}

TEST(Serialization, SaveReportsWriteErrorsAndLeavesNoTemporaryFile) {
  // A file size limit makes write() fail with EFBIG (SIGXFSZ ignored). LibTorch's own file writer
  // would abort the process here (its destructor throws); ours must report and clean up.
  TempDir dir;
  struct rlimit old {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string message = error_of([&] { save_torch_file(dir.file("big.pt"), from_state_dict({{"w", at::ones({100000})}})); });
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(message, dir.file("big.pt") + ": cannot write: File too large");
  EXPECT_TRUE(fs::is_empty(dir.file("")));
  // And a save that fits replaces an existing file in one step.
  save_torch_file(dir.file("big.pt"), from_state_dict({{"w", at::ones({3})}}));
  save_torch_file(dir.file("big.pt"), from_state_dict({{"w", at::zeros({2})}}));
  EXPECT_TRUE(to_state_dict(load_torch_file(dir.file("big.pt")), "big.pt")[0].second.equal(at::zeros({2})));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.file("")), fs::directory_iterator()), 1);
}

TEST(Serialization, ExtraRecordsTravelNextToTorchSaveOnes) {
  const Pickled pickled = pickle(from_state_dict({{"w", at::arange(3, at::kFloat)}}));
  const std::string archive = write_archive(pickled, "archive", {{"wavetrain_checksum", "1234abcd"}});
  const std::vector<std::pair<std::string, std::string>> records = read_records(archive, "extra.pt");
  // LibTorch's writer adds records of its own from 2.x on (.data/serialization_id, .data/version):
  // compare the rest by name.
  std::map<std::string, std::string> by_name;
  for (const auto& [name, bytes] : records)
    if (name.rfind(".data/", 0) != 0) by_name[name] = bytes;
  std::vector<std::string> names;
  for (const auto& [name, bytes] : by_name) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"byteorder", "data.pkl", "data/0", "version", "wavetrain_checksum"}));
  EXPECT_EQ(by_name["wavetrain_checksum"], "1234abcd");
  EXPECT_EQ(by_name["data.pkl"], pickled.bytes);
  EXPECT_TRUE(to_state_dict(load_torch_bytes(archive, "extra.pt"), "extra.pt")[0].second.equal(at::arange(3, at::kFloat)));

  EXPECT_ERROR_CONTAINS(write_archive(pickled, "archive", {{"data/7", ""}}), "extra record name 'data/7' is taken");
  EXPECT_ERROR_CONTAINS(write_archive(pickled, "model"), "the folder can only be 'archive'");
  EXPECT_ERROR_CONTAINS(read_records("PK\x03\x04", "bad.pt"), "bad.pt: not a PyTorch file (zip archive): ");

  if (python_has_torch()) {  // Python ignores records it does not know
    TempDir dir;
    write_file(dir.file("extra.pt"), archive);
    const PythonResult py = run_python(dir, "import sys, torch\nprint(torch.load(sys.argv[1], weights_only=True)['w'].tolist())\n",
                                       {dir.file("extra.pt")});
    EXPECT_EQ(py.output, "[0.0, 1.0, 2.0]\n");
  }
}

TEST(Serialization, StateDictConversionNamesTheOffendingKey) {
  const Value ckpt = checkpoint();
  EXPECT_EQ(error_of([&] { to_state_dict(ckpt, "ckpt.pt"); }),
            "ckpt.pt: expected a state dict, but entry 'epoch' is an int, not a tensor");
  EXPECT_EQ(error_of([&] { to_state_dict(Value::list(), "x.pt"); }), "x.pt: expected a state dict (a dict of tensors), got a list");
  EXPECT_EQ(to_state_dict(*ckpt.find("model"), "ckpt.pt").size(), 2u);
  EXPECT_ERROR_CONTAINS(ckpt.find("epoch")->as_string(), "expected a str, got an int");
}

TEST(Serialization, SaveRefusesWhatPythonCouldNotRead) {
  EXPECT_ERROR_CONTAINS(save_torch_bytes(Value::string("\xff")), "not valid UTF-8");
  EXPECT_ERROR_CONTAINS(save_torch_bytes(Value::dict({{Value::none(), Value::none()}})), "dict key of type None");
  EXPECT_ERROR_CONTAINS(storage_type_name(at::kComplexHalf), "cannot save tensors of dtype ComplexHalf");
  EXPECT_ERROR_CONTAINS(save_torch_bytes(Value::tensor(at::zeros({2}).to_sparse())), "sparse");
  EXPECT_ERROR_CONTAINS(save_torch_bytes(Value::tensor(at::Tensor())), "undefined tensor");
  Value deep = Value::list();
  for (int i = 0; i < 1100; ++i) deep = Value::list({deep});
  EXPECT_ERROR_CONTAINS(save_torch_bytes(deep), "deeper than 1000");

  TempDir dir;
  EXPECT_ERROR_CONTAINS(save_torch_file(dir.file("no/such/dir/model.pt"), Value::none()),
                        "no/such/dir/model.pt: cannot create a temporary file: No such file or directory");
  EXPECT_TRUE(fs::is_empty(dir.file("")));
}

}  // namespace
}  // namespace wavetrain::serialization
