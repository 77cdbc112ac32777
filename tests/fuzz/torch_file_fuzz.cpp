// libFuzzer target for the torch.save reader (trainer/serialization): any bytes must give a Value
// (or records) or a SerializationError; never a crash, another exception type, a leak, a hang or
// undefined behaviour. What loads must also save, and saving it again after a reload must give the same
// bytes. Build and run: see docs/fuzzing.md.
#include <ATen/ATen.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "trainer/serialization/pickle.h"
#include "trainer/serialization/torch_file.h"

namespace {

using wavetrain::serialization::SerializationError;
using wavetrain::serialization::Value;

// Enough for any seed; larger requests are refused like a short record would be, so the fuzzer
// cannot make us allocate gigabytes.
constexpr int64_t kMaxFakeStorage = int64_t{1} << 20;

at::Tensor zeros_storage(const std::string& /*key*/, at::ScalarType dtype, int64_t numel) {
  if (numel > kMaxFakeStorage) throw SerializationError("fuzz: storage too large");
  return at::zeros({numel}, at::TensorOptions().dtype(dtype));
}

// Reads the first and the last byte each tensor claims, in instrumented code, so AddressSanitizer
// sees a view that reaches outside its storage's allocation. Returns the elements of all tensors.
int64_t touch_tensors(const Value& v) {
  int64_t total = 0;
  switch (v.kind()) {
    case Value::Kind::List:
    case Value::Kind::Tuple:
      for (const Value& item : v.items()) total += touch_tensors(item);
      break;
    case Value::Kind::Dict:
      for (const auto& [key, value] : v.entries()) total += touch_tensors(key) + touch_tensors(value);
      break;
    case Value::Kind::Tensor: {
      const at::Tensor& t = v.as_tensor();
      if (t.numel() == 0) break;
      int64_t last = 0;
      for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
      const auto* first = static_cast<const volatile unsigned char*>(t.data_ptr());
      const int64_t item = static_cast<int64_t>(t.element_size());
      unsigned char sink = first[0];
      sink ^= first[last * item + item - 1];
      (void)sink;
      total += t.numel();
      break;
    }
    default:
      break;
  }
  return total;
}

void check_round_trip(const Value& v) {
  // Saving materializes every tensor; an expanded tensor (stride 0) may be huge, so skip those.
  if (touch_tensors(v) > kMaxFakeStorage) return;
  const std::string saved = wavetrain::serialization::save_torch_bytes(v);
  const Value reloaded = wavetrain::serialization::load_torch_bytes(saved, "fuzz-resaved");
  if (wavetrain::serialization::save_torch_bytes(reloaded) != saved) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  // Only loading may fail; an error in the round trip escapes and libFuzzer reports it.
  Value loaded;
  bool ok = true;
  try {
    loaded = wavetrain::serialization::load_torch_bytes(bytes, "fuzz");
  } catch (const SerializationError&) {
    ok = false;
  }
  if (ok) check_round_trip(loaded);
  try {
    (void)wavetrain::serialization::read_records(bytes, "fuzz");
  } catch (const SerializationError&) {
  }

  // Half of the inputs also go to the unpickler directly, which reaches it without a valid zip.
  if (size > 0 && data[0] % 2 == 0) {
    ok = true;
    try {
      loaded = wavetrain::serialization::unpickle(bytes, zeros_storage);
    } catch (const SerializationError&) {
      ok = false;
    }
    if (ok) check_round_trip(loaded);
  }
  return 0;
}
