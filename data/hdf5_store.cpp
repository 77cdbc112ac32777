// The HDF5 dataset store's writer (hdf5_store.h; schema in docs/data-format.md). The reader is
// hdf5_store_reader.cpp.
#include "data/hdf5_store.h"

#include <fcntl.h>
#include <signal.h>
#include <hdf5.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <optional>
#include <set>

#include "data/hdf5_store_common.h"

namespace wavetrain::data {
namespace {

using namespace store_detail;

// HDF5's exit handler off before anything in the process initializes HDF5 (silence_hdf5 says
// why); H5dont_atexit does not initialize the library itself. Done again, harmlessly, by the
// store's constructors for a process that loads this file later.
[[maybe_unused]] const herr_t kNoHdf5ExitHandler = H5dont_atexit();

constexpr size_t kFlushBytes = 8u << 20;  // a field's buffered values are written out past 8 MB
constexpr size_t kChunkBytes = 256u << 10;

std::string shape_text(const std::vector<int64_t>& inner, at::ScalarType t) {
  std::string s = "[*";
  for (int64_t d : inner) s += ", " + std::to_string(d);
  return s + "] " + c10::toString(t);
}

// nullopt when written; else the system's reason for HDF5's failure (taken before the handles
// close: the next HDF5 call clears the error stack), empty when there is none.
std::optional<std::string> write_attribute(hid_t object, const std::string& name, const AttributeValue& value) {
  const Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  bool written = false;
  if (const auto* s = std::get_if<std::string>(&value)) {
    const Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(type.get(), H5T_VARIABLE);  // variable-length UTF-8: h5py returns str
    H5Tset_cset(type.get(), H5T_CSET_UTF8);
    const Handle a(H5Acreate2(object, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
    const char* text = s->c_str();
    written = a.get() >= 0 && H5Awrite(a.get(), type.get(), &text) >= 0;
    if (!written) return system_reason();
    return std::nullopt;
  }
  const bool is_double = std::holds_alternative<double>(value);
  const hid_t type = is_double ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT64;
  const Handle a(H5Acreate2(object, name.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  const void* v = is_double ? static_cast<const void*>(&std::get<double>(value)) : static_cast<const void*>(&std::get<int64_t>(value));
  written = a.get() >= 0 && H5Awrite(a.get(), type, v) >= 0;
  if (!written) return system_reason();
  return std::nullopt;
}

// The address of an object's header, as hdf5_raw expects it.

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

// ---- writer -------------------------------------------------------------------------------------

struct DatasetWriter::Field {
  std::string name;  // split/field, for errors
  hid_t group = -1, data = -1;
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> inner;
  size_t row_bytes = 0;
  std::vector<uint8_t> buffer;
  int64_t buffered_rows = 0, written_rows = 0;
  std::vector<int64_t> offsets{0};
};

// Removes the partial files of `target` (.NAME.partial-PID) whose writer is gone: a killed build
// cannot remove its own, and would otherwise leave it beside the store forever. A live PID's file
// is another build's, still being written.
static void remove_dead_writers_partials(const std::filesystem::path& target) {
  const std::string prefix = "." + target.filename().string() + ".partial-";
  const std::filesystem::path dir = target.parent_path().empty() ? std::filesystem::path(".") : target.parent_path();
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string digits = name.substr(prefix.size());
    if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) {
      std::error_code ignored;
      std::filesystem::remove(it->path(), ignored);
    }
  }
}

DatasetWriter::DatasetWriter(std::string path, std::string command) : path_(std::move(path)), command_(std::move(command)) {
  silence_hdf5();
  const std::filesystem::path target(path_);
  remove_dead_writers_partials(target);
  temporary_ = (target.parent_path() / ("." + target.filename().string() + ".partial-" + std::to_string(::getpid()))).string();
  // Version-2 object headers and superblock (HDF5 1.8 and later read them) carry checksums, so a
  // reader detects a damaged header instead of following it. Attributes stay in the root's header
  // (not in dense storage) up to 64 of them: hdf5_raw reads string attributes from there.
  const Handle create(H5Pcreate(H5P_FILE_CREATE), H5Pclose), access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5Pset_attr_phase_change(create.get(), 64, 48);
  H5Pset_libver_bounds(access.get(), H5F_LIBVER_V18, H5F_LIBVER_LATEST);
  file_ = H5Fcreate(temporary_.c_str(), H5F_ACC_TRUNC, create.get(), access.get());
  if (file_ < 0) {
    const std::string reason = system_reason();
    std::error_code ec;
    std::filesystem::remove(temporary_, ec);  // the destructor does not run for a constructor that throws
    fail(path_, "cannot be created: " + (reason.empty() ? std::string("HDF5 failed without a system error") : reason) +
                    " (writing its temporary " + temporary_ + ")");
  }
}

// Why a failed file is abandoned rather than closed: HDF5 1.10.8 cannot close a file whose data it
// cannot write. Its close fails, frees the file and keeps the identifier, and any later walk over
// open files (its exit handler, H5Fget_obj_count) follows freed memory (HDFFV-11052). So the
// file's identifiers are left open and never used again, and its descriptor is pointed at
// /dev/null: HDF5 holds no blocks of the removed temporary, and the disk space comes back at once.
// The cost is HDF5's memory for this one file (its caches), until the process ends.
void DatasetWriter::write_failed(const std::string& doing, std::optional<std::string> known_reason) {
  const std::string reason = known_reason ? *known_reason : system_reason();  // first: the next HDF5 call clears the error stack
  abandoned_ = true;
  void* handle = nullptr;
  if (file_ >= 0 && H5Fget_vfd_handle(file_, H5P_DEFAULT, &handle) >= 0 && handle != nullptr) {
    const int sink = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (sink >= 0) {
      ::dup2(sink, *static_cast<int*>(handle));  // the sec2 driver's handle is its descriptor
      ::close(sink);
    }
  }
  std::error_code ec;
  std::filesystem::remove(temporary_, ec);
  fail(path_, "cannot be written: " + (reason.empty() ? std::string("HDF5 failed without a system error") : reason) + " (" + doing +
                  "); nothing was left behind");
}

DatasetWriter::~DatasetWriter() {
  if (finished_) return;
  if (abandoned_) return;  // write_failed() removed the temporary; its identifiers stay open on purpose
  for (auto& [split, fields] : splits_)
    for (auto& [name, f] : fields) {
      if (f->data >= 0) H5Dclose(f->data);
      if (f->group >= 0) H5Gclose(f->group);
    }
  if (file_ >= 0) H5Fclose(file_);
  std::error_code ec;
  std::filesystem::remove(temporary_, ec);
}

void DatasetWriter::set_attribute(const std::string& name, const AttributeValue& value) {
  // The writer's own: a second attribute of one name would fail to be created in finish().
  for (const char* own : {"format", "format_version", "created", "command", "wavetrain_version", "complete"})
    if (name == own) fail(path_, "root attribute '" + name + "' is written by the store itself");
  attributes_[name] = value;
}

DatasetWriter::Field& DatasetWriter::field(const std::string& split, const std::string& name, const at::Tensor& like) {
  auto& fields = splits_[split];
  auto it = fields.find(name);
  if (it != fields.end()) return *it->second;
  const std::string split_path = "/" + split;
  if (H5Lexists(file_, split_path.c_str(), H5P_DEFAULT) <= 0) {
    const hid_t g = H5Gcreate2(file_, split_path.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0) write_failed("creating group " + split_path);
    H5Gclose(g);
  }
  auto f = std::make_unique<Field>();
  f->name = split + "/" + name;
  f->dtype = like.scalar_type();
  f->inner.assign(like.sizes().begin() + 1, like.sizes().end());
  f->row_bytes = static_cast<size_t>(like.element_size());
  for (int64_t d : f->inner) f->row_bytes *= static_cast<size_t>(d);
  f->group = H5Gcreate2(file_, (split_path + "/" + name).c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (f->group < 0) write_failed("creating group " + split_path + "/" + name);
  const int rank = static_cast<int>(like.dim());
  std::vector<hsize_t> dims(static_cast<size_t>(rank)), max_dims(static_cast<size_t>(rank)), chunk(static_cast<size_t>(rank));
  dims[0] = 0;
  max_dims[0] = H5S_UNLIMITED;
  chunk[0] = static_cast<hsize_t>(std::max<size_t>(1, kChunkBytes / std::max<size_t>(1, f->row_bytes)));
  for (int i = 1; i < rank; ++i) dims[static_cast<size_t>(i)] = max_dims[static_cast<size_t>(i)] = chunk[static_cast<size_t>(i)] = static_cast<hsize_t>(like.size(i));
  const hid_t space = H5Screate_simple(rank, dims.data(), max_dims.data());
  const hid_t plist = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(plist, rank, chunk.data());
  H5Pset_shuffle(plist);
  H5Pset_deflate(plist, 4);
  H5Pset_fletcher32(plist);  // a damaged chunk fails its checksum instead of decoding into wrong values
  f->data = H5Dcreate2(f->group, "data", native_type(f->dtype), space, H5P_DEFAULT, plist, H5P_DEFAULT);
  H5Pclose(plist);
  H5Sclose(space);
  if (f->data < 0) write_failed("creating dataset " + split_path + "/" + name + "/data");
  return *(fields[name] = std::move(f));
}

void DatasetWriter::add(const std::string& split, const Item& item_in, const std::string& id) {
  if (finished_) fail(path_, "add after finish");
  if (abandoned_) fail(path_, "add after a failed write");
  if (split.empty() || split.find('/') != std::string::npos) fail(path_, "bad split name '" + split + "'");
  const int64_t index = items_[split];
  const std::string where = "split '" + split + "' item " + std::to_string(index);
  if (item_in.empty()) fail(path_, where + " has no fields");
  Item item = item_in;
  item["id"] = at::from_blob(const_cast<char*>(id.data()), {static_cast<int64_t>(id.size())}, at::kByte).clone();
  // Every item of a split has the same fields.
  auto& fields = splits_[split];
  if (!fields.empty()) {
    std::set<std::string> expected, got;
    for (const auto& [name, f] : fields) expected.insert(name);
    for (const auto& [name, t] : item) got.insert(name);
    if (expected != got) {
      std::string e, g;
      for (const std::string& n : expected) e += (e.empty() ? "" : ", ") + n;
      for (const std::string& n : got) g += (g.empty() ? "" : ", ") + n;
      fail(path_, where + " has fields {" + g + "}, earlier items {" + e + "}");
    }
  }
  for (const auto& [name, tensor] : item) {
    if (name.empty() || name.find('/') != std::string::npos) fail(path_, where + ": bad field name '" + name + "'");
    if (tensor.dim() < 1) fail(path_, where + " field '" + name + "' is a scalar; fields need a first (length) dimension");
    if (native_type(tensor.scalar_type()) < 0)
      fail(path_, where + " field '" + name + "' has dtype " + c10::toString(tensor.scalar_type()) +
                      "; the store takes float32, float64, int64, int32, int16 and uint8");
    Field& f = field(split, name, tensor);
    const std::vector<int64_t> inner(tensor.sizes().begin() + 1, tensor.sizes().end());
    if (inner != f.inner || tensor.scalar_type() != f.dtype) {
      fail(path_, where + " field '" + name + "': expected " + shape_text(f.inner, f.dtype) + " like earlier items, got " +
                      c10::str(tensor.sizes()) + " " + c10::toString(tensor.scalar_type()));
    }
    const at::Tensor c = tensor.cpu().contiguous();
    const auto* bytes = static_cast<const uint8_t*>(c.data_ptr());
    f.buffer.insert(f.buffer.end(), bytes, bytes + c.numel() * c.element_size());
    f.buffered_rows += c.size(0);
    f.offsets.push_back(f.offsets.back() + c.size(0));
    if (f.buffer.size() >= kFlushBytes) flush(f);
  }
  ++items_[split];
}

void DatasetWriter::flush(Field& f) {
  if (f.buffered_rows == 0) return;
  const int rank = static_cast<int>(f.inner.size()) + 1;
  std::vector<hsize_t> new_dims(static_cast<size_t>(rank)), start(static_cast<size_t>(rank), 0), count(static_cast<size_t>(rank));
  new_dims[0] = static_cast<hsize_t>(f.written_rows + f.buffered_rows);
  start[0] = static_cast<hsize_t>(f.written_rows);
  count[0] = static_cast<hsize_t>(f.buffered_rows);
  for (int i = 1; i < rank; ++i) new_dims[static_cast<size_t>(i)] = count[static_cast<size_t>(i)] = static_cast<hsize_t>(f.inner[static_cast<size_t>(i - 1)]);
  if (H5Dset_extent(f.data, new_dims.data()) < 0) write_failed("extending " + f.name + "/data");
  {
    const Handle file_space(H5Dget_space(f.data), H5Sclose), mem_space(H5Screate_simple(rank, count.data(), nullptr), H5Sclose);
    H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
    if (H5Dwrite(f.data, native_type(f.dtype), mem_space.get(), file_space.get(), H5P_DEFAULT, f.buffer.data()) < 0)
      write_failed("writing " + f.name + "/data");  // here, before the handles' closing clears HDF5's error stack
  }
  f.written_rows += f.buffered_rows;
  f.buffered_rows = 0;
  f.buffer.clear();
}

// Every HDF5 call that may write is checked, and each dataset and the file are flushed before they
// are closed: a write that fails then fails in a flush, with the objects still open and
// abandoned whole (write_failed), never in a close (which HDF5 1.10.8 cannot recover from).
void DatasetWriter::finish() {
  if (finished_) return;
  if (abandoned_) fail(path_, "finish after a failed write");
  for (auto& [split, fields] : splits_) {
    for (auto& [name, f] : fields) {
      flush(*f);
      const hsize_t n = f->offsets.size();
      herr_t status = -1;
      {
        const Handle space(H5Screate_simple(1, &n, nullptr), H5Sclose);
        const Handle d(H5Dcreate2(f->group, "offsets", H5T_NATIVE_INT64, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), H5Dclose);
        if (d.get() >= 0) status = H5Dwrite(d.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, f->offsets.data());
        if (status >= 0) status = H5Dflush(d.get());
        if (status < 0) write_failed("writing " + f->name + "/offsets");
      }
      if (H5Dflush(f->data) < 0) write_failed("writing " + f->name + "/data");
      H5Dclose(f->data);
      H5Gclose(f->group);
      f->data = f->group = -1;
    }
    const Handle g(H5Gopen2(file_, ("/" + split).c_str(), H5P_DEFAULT), H5Gclose);
    if (g.get() < 0) write_failed("opening split '" + split + "'");
    if (auto reason = write_attribute(g.get(), "items", items_[split])) write_failed("writing the attributes of split '" + split + "'", reason);
  }
  {
    const Handle root(H5Gopen2(file_, "/", H5P_DEFAULT), H5Gclose);
    std::vector<std::pair<std::string, AttributeValue>> root_attributes = {{"format", std::string(kStoreFormat)},
                                                                             {"format_version", kStoreFormatVersion},
                                                                             {"created", utc_now()},
                                                                             {"command", command_}};
#ifdef WAVETRAIN_DATA_VERSION
    root_attributes.emplace_back("wavetrain_version", std::string(WAVETRAIN_DATA_VERSION));
#endif
    root_attributes.insert(root_attributes.end(), attributes_.begin(), attributes_.end());
    root_attributes.emplace_back("complete", int64_t{1});  // last: a reader refuses a file without it
    if (root.get() < 0) write_failed("opening the root group");
    for (const auto& [name, value] : root_attributes)
      if (auto reason = write_attribute(root.get(), name, value)) write_failed("writing root attribute '" + name + "'", reason);
  }
  if (H5Fflush(file_, H5F_SCOPE_GLOBAL) < 0) write_failed("flushing the file");
  if (H5Fclose(file_) < 0) {
    file_ = -1;  // closed or not, HDF5 keeps nothing to retry with (write_failed says why)
    write_failed("closing the file");
  }
  file_ = -1;
  // The data must be on disk before the name points at it: a crash after the rename must not leave
  // a complete-looking store whose blocks were never written.
  const int fd = ::open(temporary_.c_str(), O_RDONLY | O_CLOEXEC);
  const bool synced = fd >= 0 && ::fsync(fd) == 0;
  const int sync_errno = errno;
  if (fd >= 0) ::close(fd);
  if (!synced) {
    std::error_code ec;
    std::filesystem::remove(temporary_, ec);
    fail(path_, std::string("cannot be written: ") + std::strerror(sync_errno) + " (syncing " + temporary_ + "); nothing was left behind");
  }
  std::error_code ec;
  std::filesystem::rename(temporary_, path_, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(temporary_, ignored);
    fail(path_, "cannot be put in place: " + ec.message() + " (renaming " + temporary_ + "); nothing was left behind");
  }
  finished_ = true;
}

}  // namespace wavetrain::data
