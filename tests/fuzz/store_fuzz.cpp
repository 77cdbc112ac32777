// libFuzzer target for the HDF5 dataset store reader (data/hdf5_store): any bytes as a file must
// open as a store or give a StoreError that names the file, and so must every read from a store
// that opened: attributes, splits, fields, lengths, items and ids. Never a crash, another
// exception, a leak, undefined behaviour or a hang. Build and run: docs/fuzzing.md.
#include <cstdint>
#include <cstdlib>

#include "data/hdf5_store.h"
#include "tests/fuzz/fuzz_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace wavetrain::data;
  const wavetrain::fuzz::InputFile file(data, size, ".h5");
  try {
    const DatasetReader r(file.path(), 16);
    for (const char* name : {"format", "complete", "sample_rate", "command"}) (void)r.attribute(name);
    for (const std::string& split : r.splits()) {
      const int64_t n = r.size(split);
      // Bounded: a damaged store may claim millions of (empty) items.
      for (int64_t i = 0; i < n && i < 64; ++i) {
        for (const std::string& field : r.fields(split)) {
          const int64_t length = r.length(split, field, i);
          const Item item = r.item(split, i);
          if (item.at(field).size(0) != length) std::abort();
        }
        (void)r.id(split, i);
      }
    }
  } catch (const StoreError& e) {
    wavetrain::fuzz::require_named(e, file.path());
  }
  return 0;
}
