// The HDF5 dataset store's reader (hdf5_store.h): what a store may claim is checked before it is
// used (docs/data-format.md, "Damaged and hostile files"), and HDF5 reads a store's structure in a
// probe process first. The writer is hdf5_store.cpp.
#include <hdf5.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>

#include "data/hdf5_raw.h"
#include "data/hdf5_store.h"
#include "data/hdf5_store_common.h"

// Defined by the sanitizer runtimes only (ASan, UBSan); a weak reference is null elsewhere.
extern "C" void __sanitizer_set_death_callback(void (*callback)()) __attribute__((weak));

namespace wavetrain::data {
namespace {

using namespace store_detail;

// Bounds on what a stored file may claim, checked before anything is allocated for it.
constexpr hsize_t kMaxMembers = 1u << 16;          // splits in a store, fields in a split
constexpr int64_t kMaxItems = int64_t{1} << 28;    // items in a split
constexpr int64_t kMaxItemBytes = int64_t{1} << 30;  // one field of one item, decoded
// The sample_rate attribute: positive, and at most 1 MHz. Audio goes to 768 kHz; a higher rate is
// a wrong unit or a damaged value, and would size windows and filters absurdly.
constexpr double kMaxSampleRate = 1e6;

// "float16", "int8", "string", ... for an error message.
std::string type_text(hid_t type) {
  const size_t bytes = H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_FLOAT: return "float" + std::to_string(8 * bytes);
    case H5T_INTEGER: return (H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int") + std::to_string(8 * bytes) +
                             (H5Tget_order(type) == H5T_ORDER_BE ? " (big-endian)" : "");
    case H5T_STRING: return "string";
    case H5T_COMPOUND: return "compound";
    default: return "an HDF5 type of class " + std::to_string(static_cast<int>(H5Tget_class(type)));
  }
}

// What a dataset declares must be in the file, checked before anything is allocated for it: an
// outside audit's store declared 2^28 samples in a 249 KB file, and reading them allocated 1 GiB
// for fill values. By layout:
// - contiguous: the bytes (values x type size) lie inside the file; no external files (HDF5 would
//   open another file);
// - compact: the stored bytes hold every value;
// - chunked: HDF5 1.10.8 trusts a chunked dataset's chunk size when it copies out of a decoded
//   chunk: a file that claims larger chunks than were written made H5Dread read past the decoded
//   buffer (fuzzing, docs/fuzzing.md). A store holds every chunk of its grid, so the index must
//   hold exactly as many chunks as the extent and the chunk size make, each found at its grid
//   coordinate and lying inside the file; chunks written with another size lie elsewhere. A chunk
//   decodes to at most kMaxItemBytes. Cost: one index lookup per chunk (256 KB of data), at open.
// `name` is the dataset's ("data", "offsets") for the message.
std::string storage_problem(hid_t dataset, const char* name, uint64_t file_size) {
  const std::string its = std::string("its ") + name;
  const Handle create(H5Dget_create_plist(dataset), H5Pclose);
  const Handle space(H5Dget_space(dataset), H5Sclose);
  const Handle type(H5Dget_type(dataset), H5Tclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  if (rank < 1 || rank > H5S_MAX_RANK) return its + " has " + std::to_string(rank) + " dimensions";
  std::vector<hsize_t> dims(static_cast<size_t>(rank)), chunk(static_cast<size_t>(rank)), cells_per_dim(static_cast<size_t>(rank));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  const size_t type_size = H5Tget_size(type.get());
  if (type_size == 0 || type_size > 16) return its + " has values of " + std::to_string(type_size) + " bytes";
  // Declared bytes, saturating at 2^64 - 1.
  hsize_t values = 1, bytes = 0;
  for (const hsize_t d : dims)
    if (__builtin_mul_overflow(values, d, &values)) values = ~hsize_t{0};
  if (__builtin_mul_overflow(values, static_cast<hsize_t>(type_size), &bytes)) bytes = ~hsize_t{0};
  const std::string declared = its + " declares " + std::to_string(values) + " values (" + std::to_string(bytes) + " bytes)";
  const H5D_layout_t layout = H5Pget_layout(create.get());
  if (layout == H5D_CONTIGUOUS) {
    if (H5Pget_external_count(create.get()) != 0) return its + " is stored in external files, which a store never uses";
    if (values == 0) return {};
    const haddr_t at = H5Dget_offset(dataset);
    if (at == HADDR_UNDEF) return declared + " but none were written (damaged?)";
    if (at > file_size || bytes > file_size - at)
      return declared + " at byte " + std::to_string(at) + ", past the end of the file (" + std::to_string(file_size) + " bytes; damaged?)";
    return {};
  }
  if (layout == H5D_COMPACT) {
    if (H5Dget_storage_size(dataset) < bytes) return declared + " in a compact layout that holds " + std::to_string(H5Dget_storage_size(dataset)) + " bytes (damaged?)";
    return {};
  }
  if (layout != H5D_CHUNKED) return its + " has a storage layout a store does not use";
  if (H5Pget_chunk(create.get(), rank, chunk.data()) != rank) return its + ": chunk size cannot be read (damaged?)";
  hsize_t chunk_bytes = type_size;
  for (const hsize_t c : chunk)
    if (__builtin_mul_overflow(chunk_bytes, c, &chunk_bytes)) chunk_bytes = ~hsize_t{0};
  if (chunk_bytes > static_cast<hsize_t>(kMaxItemBytes))
    return its + ": chunks of " + std::to_string(chunk_bytes) + " bytes, more than " + std::to_string(kMaxItemBytes) + " (damaged?)";
  hsize_t cells = 1;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (chunk[d] == 0) return its + ": chunk size is 0 in dimension " + std::to_string(d) + " (damaged?)";
    cells_per_dim[d] = dims[d] / chunk[d] + (dims[d] % chunk[d] != 0);
    if (__builtin_mul_overflow(cells, cells_per_dim[d], &cells)) return its + ": chunk grid has more than 2^64 chunks (damaged?)";
  }
  hsize_t stored = 0;  // (1.10.8 takes no H5S_ALL here)
  if (H5Dget_num_chunks(dataset, space.get(), &stored) < 0) return its + ": chunk index cannot be read (damaged?)";
  if (stored != cells)
    return (std::string(name) == "data" ? "its" : its + ":") + " chunk index holds " + std::to_string(stored) +
           " chunks where its size and chunk size make " + std::to_string(cells) + " (damaged?)";
  std::vector<hsize_t> cell(static_cast<size_t>(rank), 0), offset(static_cast<size_t>(rank));
  for (hsize_t n = 0; n < cells; ++n) {
    for (size_t d = 0; d < dims.size(); ++d) offset[d] = cell[d] * chunk[d];
    haddr_t address = HADDR_UNDEF;
    unsigned filters = 0;
    hsize_t stored_bytes = 0;
    if (H5Dget_chunk_info_by_coord(dataset, offset.data(), &filters, &address, &stored_bytes) < 0 || address == HADDR_UNDEF)
      return "no chunk at row " + std::to_string(offset[0]) + " of " + its + "'s chunk grid (written with another chunk size? damaged)";
    if (address > file_size || stored_bytes > file_size - address)
      return its + ": the chunk at row " + std::to_string(offset[0]) + " (" + std::to_string(stored_bytes) + " bytes at byte " +
             std::to_string(address) + ") runs past the end of the file (" + std::to_string(file_size) + " bytes; damaged?)";
    for (size_t d = dims.size(); d-- > 0;) {  // the next cell, last dimension fastest
      if (++cell[d] < cells_per_dim[d]) break;
      cell[d] = 0;
    }
  }
  return {};
}

uint64_t header_address(hid_t object) {
#if H5_VERSION_GE(1, 12, 0)
  H5O_info2_t info;
  haddr_t address = HADDR_UNDEF;
  if (H5Oget_info3(object, &info, H5O_INFO_BASIC) < 0 || H5VLnative_token_to_addr(object, info.token, &address) < 0)
    return HADDR_UNDEF;
  return address;
#else
  H5O_info_t info;
  if (H5Oget_info2(object, &info, H5O_INFO_BASIC) < 0) return HADDR_UNDEF;
  return info.addr;
#endif
}

// One scalar attribute. Non-scalar attributes are not part of the schema and are skipped (reading
// one into a scalar would overrun it). Variable-length strings are read by hdf5_raw, which checks
// their heap reference; H5Aread would follow it on trust (hdf5_raw.h says why).
std::optional<AttributeValue> read_attribute(const std::string& path, hid_t object, const std::string& name, bool probe = false) {
  if (H5Aexists(object, name.c_str()) <= 0) return std::nullopt;
  const hid_t a = H5Aopen(object, name.c_str(), H5P_DEFAULT);
  if (a < 0) fail(path, "attribute '" + name + "' cannot be opened (damaged file?)");
  const hid_t type = H5Aget_type(a), space = H5Aget_space(a);
  const bool scalar = space >= 0 && H5Sget_simple_extent_npoints(space) == 1;
  std::optional<AttributeValue> out;
  std::string error;
  if (type < 0 || !scalar) {
    // skipped
  } else if (H5Tget_class(type) == H5T_STRING) {
    if (H5Tis_variable_str(type) > 0) {
      try {
        // The probe leaves string values to the parent: hdf5_raw is not HDF5's code to check.
        out = probe ? std::optional<AttributeValue>(std::string()) : hdf5_raw::read_string_attribute(path, header_address(object), name);
        if (!out) error = "attribute '" + name + "' is stored where wavetrain cannot check it (dense attribute storage)";
      } catch (const hdf5_raw::FormatError& e) {
        error = "attribute '" + name + "': " + e.what() + " (damaged file?)";
      }
    } else {
      const size_t size = H5Tget_size(type);
      if (size == 0 || size > (1u << 20)) {
        error = "attribute '" + name + "' claims a fixed-length string of " + std::to_string(size) + " bytes";
      } else {
        std::string text(size, '\0');
        if (H5Aread(a, type, text.data()) >= 0) out = std::string(text.c_str());
      }
    }
  } else if (H5Tget_class(type) == H5T_FLOAT) {
    double d = 0;
    if (H5Aread(a, H5T_NATIVE_DOUBLE, &d) >= 0) out = d;
  } else if (H5Tget_class(type) == H5T_INTEGER) {
    int64_t v = 0;
    if (H5Aread(a, H5T_NATIVE_INT64, &v) >= 0) out = v;
  }
  if (space >= 0) H5Sclose(space);
  if (type >= 0) H5Tclose(type);
  H5Aclose(a);
  if (!error.empty()) fail(path, error);
  return out;
}

// The names of a group's members that are hard links. Soft and external links are left out: a
// store never has them, and an external link would make HDF5 open another file.
std::vector<std::string> member_names(hid_t group) {
  H5G_info_t info;
  std::vector<std::string> names;
  if (H5Gget_info(group, &info) < 0) return names;
  for (hsize_t i = 0; i < info.nlinks && i < kMaxMembers; ++i) {
    const ssize_t n = H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    if (n <= 0 || n > 4096) continue;
    std::string name(static_cast<size_t>(n), '\0');
    if (H5Lget_name_by_idx(group, ".", H5_INDEX_NAME, H5_ITER_INC, i, name.data(), static_cast<size_t>(n) + 1, H5P_DEFAULT) < 0) continue;
    H5L_info_t link;
    if (H5Lget_info(group, name.c_str(), &link, H5P_DEFAULT) < 0 || link.type != H5L_TYPE_HARD) continue;
    names.push_back(name);
  }
  return names;
}

}  // namespace

DatasetReader::DatasetReader(const std::string& path, size_t cache_items) : path_(path), cache_items_(cache_items) {
  silence_hdf5();
  try {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) fail(path, "no such file");
    if (H5Fis_hdf5(path.c_str()) <= 0) fail(path, "not an HDF5 file");
    // Our own checks first: they name what is wrong, where HDF5 would read past its buffers.
    try {
      hdf5_raw::check_root_attribute_messages(path);
    } catch (const hdf5_raw::FormatError& e) {
      fail(path, std::string("the root group's header: ") + e.what() + " (truncated or damaged?)");
    }
    const char* probe = std::getenv("WAVETRAIN_STORE_PROBE");
    if (!(probe && std::string(probe) == "0")) probe_in_child(path);
    open(false);
  } catch (...) {
    close();  // the destructor does not run for a constructor that throws
    throw;
  }
}

void run_in_probe_process(const std::string& path, const std::function<void()>& work) {
  std::fflush(nullptr);  // nothing buffered is written twice
  const pid_t child = ::fork();
  if (child < 0) return;  // no probe, as with WAVETRAIN_STORE_PROBE=0
  if (child == 0) {
    // A crash here must end the probe and nothing else. Handlers inherited from the parent (a
    // crash reporter's, or a fuzzer's, which would record the probe's crash as the parent's
    // finding) are dropped: the signal then kills the child and the parent turns it into an error.
    for (const int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGALRM}) std::signal(sig, SIG_DFL);
    // Under a sanitizer, an error it detects calls the death callback before exiting with status 1.
    if (__sanitizer_set_death_callback != nullptr) __sanitizer_set_death_callback(nullptr);
    // _exit: no destructors, atexit handlers or stream flushes of the parent's state run here.
    ::alarm(120);
    int code = 0;
    try {
      work();
    } catch (const StoreError&) {
      code = 3;  // the parent's own reading reports it
    } catch (...) {
      code = 4;
    }
    ::_exit(code);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 3)) return;
  if (WIFSIGNALED(status))
    fail(path, std::string("damaged: reading its structure crashed HDF5 (") + strsignal(WTERMSIG(status)) + ", in a probe process)");
  fail(path, "damaged: reading its structure failed in a probe process (exit status " + std::to_string(WEXITSTATUS(status)) + ")");
}

void DatasetReader::probe_in_child(const std::string& path) {
  run_in_probe_process(path, [&path] {
    DatasetReader r;
    r.path_ = path;
    r.open(true);
    for (const auto& [split, fields] : r.splits_)
      for (const auto& [name, f] : fields)
        if (f.offsets.size() > 1)
          for (const int64_t i : {int64_t{0}, static_cast<int64_t>(f.offsets.size()) - 2}) (void)r.read(f, i);
  });
}

void DatasetReader::open(bool probe) {
  const std::string& path = path_;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail(path, "no such file");
  if (H5Fis_hdf5(path.c_str()) <= 0) fail(path, "not an HDF5 file");
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  if (ec) fail(path, "cannot be read: " + ec.message());
  file_ = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (file_ < 0) fail(path, "cannot be opened as HDF5 (truncated or damaged?)");
  const Handle root(H5Gopen2(file_, "/", H5P_DEFAULT), H5Gclose);
  if (root.get() < 0) fail(path, "its root group cannot be opened (damaged file?)");
  const std::optional<AttributeValue> format = read_attribute(path, root.get(), "format", probe);
  if (probe) {
    // In the probe, string values are not read: only the rest of the structure is checked.
  } else if (!format || std::get_if<std::string>(&*format) == nullptr || std::get<std::string>(*format) != kStoreFormat)
    fail(path, std::string("not a wavetrain dataset (its 'format' attribute is not '") + kStoreFormat + "')");
  const std::optional<AttributeValue> complete = read_attribute(path, root.get(), "complete", probe);
  if (!complete || std::get_if<int64_t>(&*complete) == nullptr || std::get<int64_t>(*complete) != 1)
    fail(path, "incomplete: the build that wrote it did not finish");
  // A later format may mean something else by the same names: refused, not misread. (A store
  // without the attribute is read as version 1: h5py-written stores may leave it out.)
  if (const std::optional<AttributeValue> version = read_attribute(path, root.get(), "format_version", probe)) {
    const int64_t* v = std::get_if<int64_t>(&*version);
    if (v == nullptr)
      fail(path, "attribute 'format_version' is not an integer");
    if (*v > kStoreFormatVersion)
      fail(path, "format_version " + std::to_string(*v) + " is newer than this wavetrain reads (version " + std::to_string(kStoreFormatVersion) +
                     "); a newer wavetrain wrote it");
    if (*v < 1) fail(path, "format_version " + std::to_string(*v) + " is not a version (this wavetrain reads version " + std::to_string(kStoreFormatVersion) + ")");
  }
  // Every reader of a store's audio divides by it or sizes windows from it.
  if (const std::optional<AttributeValue> rate = read_attribute(path, root.get(), "sample_rate", probe)) {
    const int64_t* i = std::get_if<int64_t>(&*rate);
    const double* d = std::get_if<double>(&*rate);
    if (i == nullptr && d == nullptr) fail(path, "attribute 'sample_rate' is a string; expected a number of Hz");
    const double hz = i != nullptr ? static_cast<double>(*i) : *d;
    if (!(hz > 0 && hz <= kMaxSampleRate)) {
      char text[32];
      std::snprintf(text, sizeof(text), "%.10g", hz);
      fail(path, std::string("attribute 'sample_rate' is ") + text + " Hz; expected more than 0 and at most 1000000 Hz");
    }
  }
  const int attribute_count = H5Aget_num_attrs(root.get());
  if (attribute_count > static_cast<int>(kMaxMembers)) fail(path, "has " + std::to_string(attribute_count) + " root attributes");
  for (int i = 0; i < attribute_count; ++i) {
    char name[256] = {};
    const Handle a(H5Aopen_by_idx(root.get(), ".", H5_INDEX_NAME, H5_ITER_INC, static_cast<hsize_t>(i), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    if (a.get() < 0 || H5Aget_name(a.get(), sizeof(name), name) < 0) fail(path, "root attribute " + std::to_string(i) + " cannot be opened (damaged file?)");
    if (auto v = read_attribute(path, root.get(), name, probe)) attributes_[name] = *v;
  }
  for (const std::string& split : member_names(root.get())) {
    const Handle g(H5Gopen2(root.get(), split.c_str(), H5P_DEFAULT), H5Gclose);
    if (g.get() < 0) continue;
    for (const std::string& field : member_names(g.get())) {
      const std::string where = "split '" + split + "' field '" + field + "'";
      FieldIndex& f = splits_[split][field];
      const Handle access(H5Pcreate(H5P_DATASET_ACCESS), H5Pclose);
      H5Pset_chunk_cache(access.get(), 521, 16u << 20, 0.75);  // 16 MB of decoded chunks per field
      f.data = H5Dopen2(g.get(), (field + "/data").c_str(), access.get());
      const Handle off(H5Dopen2(g.get(), (field + "/offsets").c_str(), H5P_DEFAULT), H5Dclose);
      if (f.data < 0 || off.get() < 0) fail(path, where + " lacks its data or offsets dataset");
      if (const std::string problem = storage_problem(f.data, "data", file_size); !problem.empty()) fail(path, where + ": " + problem);
      if (const std::string problem = storage_problem(off.get(), "offsets", file_size); !problem.empty()) fail(path, where + ": " + problem);
      const Handle type(H5Dget_type(f.data), H5Tclose);
      const std::optional<at::ScalarType> t = scalar_type_of(type.get());
      if (!t)
        fail(path, where + ": its data holds " + type_text(type.get()) + " values; the store uses float32, float64, int64, int32, int16 and uint8");
      f.dtype = *t;
      const Handle space(H5Dget_space(f.data), H5Sclose);
      const int rank = H5Sget_simple_extent_ndims(space.get());
      if (rank < 1 || rank > H5S_MAX_RANK) fail(path, where + ": data has " + std::to_string(rank) + " dimensions (1 to " + std::to_string(H5S_MAX_RANK) + ")");
      std::vector<hsize_t> dims(static_cast<size_t>(rank));
      H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
      int64_t row_bytes = static_cast<int64_t>(c10::elementSize(f.dtype));
      for (int i = 1; i < rank; ++i) {
        const hsize_t d = dims[static_cast<size_t>(i)];
        if (d > static_cast<hsize_t>(kMaxItemBytes) || (row_bytes *= static_cast<int64_t>(d)) > kMaxItemBytes)
          fail(path, where + ": one row of data would hold more than " + std::to_string(kMaxItemBytes) + " bytes");
        f.inner.push_back(static_cast<int64_t>(d));
      }
      const Handle ospace(H5Dget_space(off.get()), H5Sclose);
      const hssize_t n = H5Sget_simple_extent_npoints(ospace.get());
      if (H5Sget_simple_extent_ndims(ospace.get()) != 1 || n < 1 || n > kMaxItems + 1)
        fail(path, where + ": offsets must be one-dimensional with 1 to " + std::to_string(kMaxItems + 1) + " values");
      f.offsets.resize(static_cast<size_t>(n));
      const herr_t status = H5Dread(off.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, f.offsets.data());
      if (status < 0 || f.offsets.front() != 0 || f.offsets.back() != static_cast<int64_t>(dims[0]) ||
          !std::is_sorted(f.offsets.begin(), f.offsets.end()))
        fail(path, where + " has damaged offsets (they must rise from 0 to the data's length " + std::to_string(dims[0]) + ")");
      f.row_bytes = row_bytes;
    }
    // Fields of a split agree on the number of items.
    size_t items = 0;
    for (const auto& [name, f] : splits_[split]) {
      if (items == 0) items = f.offsets.size();
      if (f.offsets.size() != items) fail(path, "split '" + split + "': fields disagree on the number of items");
    }
  }
}

void DatasetReader::close() {
  for (auto& [split, fields] : splits_)
    for (auto& [name, f] : fields)
      if (f.data >= 0) H5Dclose(f.data);
  splits_.clear();
  if (file_ >= 0) H5Fclose(file_);
  file_ = -1;
}

DatasetReader::~DatasetReader() { close(); }

std::vector<std::string> DatasetReader::splits() const {
  std::vector<std::string> out;
  for (const auto& [name, f] : splits_) out.push_back(name);
  return out;
}

std::vector<std::string> DatasetReader::fields(const std::string& split) const {
  std::vector<std::string> out;
  auto it = splits_.find(split);
  if (it == splits_.end()) fail(path_, "no split '" + split + "'");
  for (const auto& [name, f] : it->second)
    if (name != "id") out.push_back(name);
  return out;
}

const DatasetReader::FieldIndex& DatasetReader::index(const std::string& split, const std::string& field) const {
  auto it = splits_.find(split);
  if (it == splits_.end()) fail(path_, "no split '" + split + "'");
  auto f = it->second.find(field);
  if (f == it->second.end()) fail(path_, "split '" + split + "' has no field '" + field + "'");
  return f->second;
}

int64_t DatasetReader::size(const std::string& split) const {
  auto it = splits_.find(split);
  if (it == splits_.end()) fail(path_, "no split '" + split + "'");
  return it->second.empty() ? 0 : static_cast<int64_t>(it->second.begin()->second.offsets.size()) - 1;
}

int64_t DatasetReader::length(const std::string& split, const std::string& field, int64_t i) const {
  const FieldIndex& f = index(split, field);
  if (i < 0 || i + 1 >= static_cast<int64_t>(f.offsets.size()))
    fail(path_, "split '" + split + "' has no item " + std::to_string(i));
  return f.offsets[static_cast<size_t>(i + 1)] - f.offsets[static_cast<size_t>(i)];
}

at::Tensor DatasetReader::read(const FieldIndex& f, int64_t i) const {
  const int64_t begin = f.offsets[static_cast<size_t>(i)], rows = f.offsets[static_cast<size_t>(i + 1)] - begin;
  if (rows > kMaxItemBytes / std::max<int64_t>(1, f.row_bytes))
    fail(path_, "item " + std::to_string(i) + " claims " + std::to_string(rows) + " rows, more than " + std::to_string(kMaxItemBytes) +
                    " bytes (damaged offsets?)");
  std::vector<int64_t> shape{rows};
  shape.insert(shape.end(), f.inner.begin(), f.inner.end());
  at::Tensor out = at::empty(shape, f.dtype);
  if (rows == 0 || out.numel() == 0) return out;
  const int rank = static_cast<int>(shape.size());
  std::vector<hsize_t> start(static_cast<size_t>(rank), 0), count(shape.begin(), shape.end());
  start[0] = static_cast<hsize_t>(begin);
  const hid_t file_space = H5Dget_space(f.data);
  H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
  const hid_t mem_space = H5Screate_simple(rank, count.data(), nullptr);
  const herr_t status = H5Dread(f.data, native_type(f.dtype), mem_space, file_space, H5P_DEFAULT, out.data_ptr());
  H5Sclose(mem_space);
  H5Sclose(file_space);
  if (status < 0) fail(path_, "reading item " + std::to_string(i) + " failed (damaged data?)");
  return out;
}

Item DatasetReader::item(const std::string& split, int64_t i) const {
  const std::string key = split + "\n" + std::to_string(i);
  std::lock_guard<std::mutex> lock(mutex_);  // HDF5 calls and the cache, one thread at a time
  auto hit = cached_.find(key);
  if (hit != cached_.end()) {
    lru_.splice(lru_.begin(), lru_, hit->second);
    return hit->second->second;
  }
  auto it = splits_.find(split);
  if (it == splits_.end()) fail(path_, "no split '" + split + "'");
  if (i < 0 || i >= size(split)) fail(path_, "split '" + split + "' has no item " + std::to_string(i));
  Item out;
  for (const auto& [name, f] : it->second)
    if (name != "id") out[name] = read(f, i);
  if (cache_items_ > 0) {
    lru_.emplace_front(key, out);
    cached_[key] = lru_.begin();
    if (lru_.size() > cache_items_) {
      cached_.erase(lru_.back().first);
      lru_.pop_back();
    }
  }
  return out;
}

at::Tensor DatasetReader::field(const std::string& split, const std::string& name, int64_t i) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const FieldIndex& f = index(split, name);
  if (i < 0 || i >= size(split)) fail(path_, "split '" + split + "' has no item " + std::to_string(i));
  return read(f, i);
}

std::string DatasetReader::id(const std::string& split, int64_t i) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const FieldIndex& f = index(split, "id");
  if (i < 0 || i >= size(split)) fail(path_, "split '" + split + "' has no item " + std::to_string(i));
  const at::Tensor bytes = read(f, i);
  return std::string(static_cast<const char*>(bytes.data_ptr()), static_cast<size_t>(bytes.numel()));
}

std::optional<AttributeValue> DatasetReader::attribute(const std::string& name) const {
  auto it = attributes_.find(name);
  if (it == attributes_.end()) return std::nullopt;
  return it->second;
}

}  // namespace wavetrain::data
