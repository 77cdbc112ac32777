// The dataset store: an HDF5 file that h5py (or any HDF5 reader) opens without wavetrain. The
// schema is in docs/data-format.md; in short, per split a group, per field of an item a group with
// `data` (every item's values concatenated along axis 0, chunked and compressed) and `offsets`
// (int64 [items + 1]: item i is data[offsets[i]:offsets[i+1]]).
//
// DatasetWriter builds the file under a temporary name beside the target and renames it into place
// only in finish(), after marking it complete; an interrupted build (exception, kill) leaves the
// target as it was. A failed write (full disk, quota, file size limit) or create (permission) is
// one StoreError naming the target and the system's reason, and the temporary is removed. DatasetReader refuses a file without the completion mark, reads single items
// by hyperslab with an LRU cache of decoded items, and may be shared by several threads.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

namespace wavetrain::data {

// Errors name the file, and the split, field or item involved.
class StoreError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

using AttributeValue = std::variant<std::string, double, int64_t>;

// One item: named fields, each a tensor whose first dimension is its length (the other dimensions
// must be the same for every item of the split). float32/float64/int64/int32/int16/uint8.
using Item = std::map<std::string, at::Tensor>;

inline constexpr const char* kStoreFormat = "wavetrain-dataset";
inline constexpr int64_t kStoreFormatVersion = 1;

class DatasetWriter {
 public:
  // `command` is recorded as the creation command (for example the wavetrain command line).
  explicit DatasetWriter(std::string path, std::string command = "");
  ~DatasetWriter();  // without finish(): the partial file is removed
  DatasetWriter(const DatasetWriter&) = delete;
  DatasetWriter& operator=(const DatasetWriter&) = delete;

  // A root attribute (sample rate, feature settings as JSON, ...).
  void set_attribute(const std::string& name, const AttributeValue& value);
  // Appends an item to `split`; `id` is stored as the UTF-8 bytes of the field "id".
  void add(const std::string& split, const Item& item, const std::string& id = "");
  // Writes what is buffered, marks the file complete, closes it and renames it over `path`.
  void finish();
  const std::string& path() const { return path_; }

 private:
  struct Field;
  void flush(Field& f);
  Field& field(const std::string& split, const std::string& name, const at::Tensor& like);
  // Throws a StoreError naming `path_` and the system's reason for the HDF5 call that just failed
  // (`doing` says what it was writing), after abandoning the file (hdf5_store.cpp says how).
  [[noreturn]] void write_failed(const std::string& doing, std::optional<std::string> known_reason = std::nullopt);

  std::string path_, temporary_, command_;
  int64_t file_ = -1;
  std::map<std::string, std::map<std::string, std::unique_ptr<Field>>> splits_;
  std::map<std::string, int64_t> items_;
  std::map<std::string, AttributeValue> attributes_;
  bool finished_ = false, abandoned_ = false;
};

// Opening runs HDF5 over the file's structure in a child process first (a "probe"): HDF5 1.10
// decodes damaged object headers without checking them and can crash (fuzzing found overflows in
// its header code on files written with HDF5's defaults, which carry no checksums). A probe that
// crashes becomes a StoreError naming the file; only then does this process read it. The probe
// opens everything open() opens and reads each field's first and last item. Set
// WAVETRAIN_STORE_PROBE=0 to skip it (a debugger, or fuzzing HDF5 itself).
class DatasetReader {
 public:
  explicit DatasetReader(const std::string& path, size_t cache_items = 4096);
  ~DatasetReader();
  DatasetReader(const DatasetReader&) = delete;
  DatasetReader& operator=(const DatasetReader&) = delete;

  const std::string& path() const { return path_; }
  std::vector<std::string> splits() const;
  std::vector<std::string> fields(const std::string& split) const;  // without "id"
  int64_t size(const std::string& split) const;
  // First-dimension length of one field of one item, from the offsets alone (no data read).
  int64_t length(const std::string& split, const std::string& field, int64_t index) const;
  Item item(const std::string& split, int64_t index) const;  // thread-safe; cached
  // One field of one item, read alone (not cached): transcripts without their audio.
  at::Tensor field(const std::string& split, const std::string& name, int64_t index) const;
  std::string id(const std::string& split, int64_t index) const;
  std::optional<AttributeValue> attribute(const std::string& name) const;

 private:
  struct FieldIndex {
    int64_t data = -1;  // hid_t
    std::vector<int64_t> offsets;
    std::vector<int64_t> inner;  // dimensions after the first
    at::ScalarType dtype = at::kFloat;
    int64_t row_bytes = 0;  // bytes of one row (first-dimension step)
  };
  DatasetReader() = default;  // for the probe
  void open(bool probe);
  void close();
  static void probe_in_child(const std::string& path);
  const FieldIndex& index(const std::string& split, const std::string& field) const;
  at::Tensor read(const FieldIndex& f, int64_t item) const;

  std::string path_;
  int64_t file_ = -1;
  std::map<std::string, std::map<std::string, FieldIndex>> splits_;
  std::map<std::string, AttributeValue> attributes_;
  // LRU cache of decoded items, keyed by "split\n index".
  mutable std::mutex mutex_;
  size_t cache_items_ = 0;
  mutable std::list<std::pair<std::string, Item>> lru_;
  mutable std::unordered_map<std::string, std::list<std::pair<std::string, Item>>::iterator> cached_;
};

// Runs `work` in a child process (fork) and returns when it ends normally or throws StoreError; a
// child that dies (a signal, another exception, any other exit) is a StoreError naming `path`. The
// probe of DatasetReader; declared here for its test.
void run_in_probe_process(const std::string& path, const std::function<void()>& work);

}  // namespace wavetrain::data
