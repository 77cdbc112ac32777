// The HDF5 dataset store's writer (hdf5_store.h; schema in docs/data-format.md). The reader is
// hdf5_store_reader.cpp.
#include "data/hdf5_store.h"

#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <set>

#include "data/hdf5_store_common.h"

namespace wavetrain::data {
namespace {

using namespace store_detail;

constexpr size_t kFlushBytes = 8u << 20;  // a field's buffered values are written out past 8 MB
constexpr size_t kChunkBytes = 256u << 10;

std::string shape_text(const std::vector<int64_t>& inner, at::ScalarType t) {
  std::string s = "[*";
  for (int64_t d : inner) s += ", " + std::to_string(d);
  return s + "] " + c10::toString(t);
}

void write_attribute(hid_t object, const std::string& name, const AttributeValue& value) {
  const hid_t space = H5Screate(H5S_SCALAR);
  if (const auto* s = std::get_if<std::string>(&value)) {
    const hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, H5T_VARIABLE);  // variable-length UTF-8: h5py returns str
    H5Tset_cset(type, H5T_CSET_UTF8);
    const hid_t a = H5Acreate2(object, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT);
    const char* text = s->c_str();
    H5Awrite(a, type, &text);
    H5Aclose(a);
    H5Tclose(type);
  } else if (const auto* d = std::get_if<double>(&value)) {
    const hid_t a = H5Acreate2(object, name.c_str(), H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_DOUBLE, d);
    H5Aclose(a);
  } else {
    const int64_t v = std::get<int64_t>(value);
    const hid_t a = H5Acreate2(object, name.c_str(), H5T_NATIVE_INT64, space, H5P_DEFAULT, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT64, &v);
    H5Aclose(a);
  }
  H5Sclose(space);
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
  hid_t group = -1, data = -1;
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> inner;
  size_t row_bytes = 0;
  std::vector<uint8_t> buffer;
  int64_t buffered_rows = 0, written_rows = 0;
  std::vector<int64_t> offsets{0};
};

DatasetWriter::DatasetWriter(std::string path, std::string command) : path_(std::move(path)), command_(std::move(command)) {
  silence_hdf5();
  const std::filesystem::path target(path_);
  temporary_ = (target.parent_path() / ("." + target.filename().string() + ".partial-" + std::to_string(::getpid()))).string();
  // Version-2 object headers and superblock (HDF5 1.8 and later read them) carry checksums, so a
  // reader detects a damaged header instead of following it. Attributes stay in the root's header
  // (not in dense storage) up to 64 of them: hdf5_raw reads string attributes from there.
  const Handle create(H5Pcreate(H5P_FILE_CREATE), H5Pclose), access(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  H5Pset_attr_phase_change(create.get(), 64, 48);
  H5Pset_libver_bounds(access.get(), H5F_LIBVER_V18, H5F_LIBVER_LATEST);
  file_ = H5Fcreate(temporary_.c_str(), H5F_ACC_TRUNC, create.get(), access.get());
  if (file_ < 0) fail(path_, "cannot create (writing " + temporary_ + ")");
}

DatasetWriter::~DatasetWriter() {
  if (finished_) return;
  for (auto& [split, fields] : splits_)
    for (auto& [name, f] : fields) {
      if (f->data >= 0) H5Dclose(f->data);
      if (f->group >= 0) H5Gclose(f->group);
    }
  if (file_ >= 0) H5Fclose(file_);
  std::error_code ec;
  std::filesystem::remove(temporary_, ec);
}

void DatasetWriter::set_attribute(const std::string& name, const AttributeValue& value) { attributes_[name] = value; }

DatasetWriter::Field& DatasetWriter::field(const std::string& split, const std::string& name, const at::Tensor& like) {
  auto& fields = splits_[split];
  auto it = fields.find(name);
  if (it != fields.end()) return *it->second;
  const std::string split_path = "/" + split;
  if (H5Lexists(file_, split_path.c_str(), H5P_DEFAULT) <= 0) H5Gclose(H5Gcreate2(file_, split_path.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  auto f = std::make_unique<Field>();
  f->dtype = like.scalar_type();
  f->inner.assign(like.sizes().begin() + 1, like.sizes().end());
  f->row_bytes = static_cast<size_t>(like.element_size());
  for (int64_t d : f->inner) f->row_bytes *= static_cast<size_t>(d);
  f->group = H5Gcreate2(file_, (split_path + "/" + name).c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (f->group < 0) fail(path_, "cannot create group " + split_path + "/" + name);
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
  if (f->data < 0) fail(path_, "cannot create dataset " + split_path + "/" + name + "/data");
  return *(fields[name] = std::move(f));
}

void DatasetWriter::add(const std::string& split, const Item& item_in, const std::string& id) {
  if (finished_) fail(path_, "add after finish");
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
  if (H5Dset_extent(f.data, new_dims.data()) < 0) fail(path_, "cannot extend a dataset (disk full?)");
  const hid_t file_space = H5Dget_space(f.data);
  H5Sselect_hyperslab(file_space, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
  const hid_t mem_space = H5Screate_simple(rank, count.data(), nullptr);
  const herr_t status = H5Dwrite(f.data, native_type(f.dtype), mem_space, file_space, H5P_DEFAULT, f.buffer.data());
  H5Sclose(mem_space);
  H5Sclose(file_space);
  if (status < 0) fail(path_, "write failed (disk full?)");
  f.written_rows += f.buffered_rows;
  f.buffered_rows = 0;
  f.buffer.clear();
}

void DatasetWriter::finish() {
  if (finished_) return;
  for (auto& [split, fields] : splits_) {
    for (auto& [name, f] : fields) {
      flush(*f);
      const hsize_t n = f->offsets.size();
      const hid_t space = H5Screate_simple(1, &n, nullptr);
      const hid_t d = H5Dcreate2(f->group, "offsets", H5T_NATIVE_INT64, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      const herr_t status = H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, f->offsets.data());
      H5Dclose(d);
      H5Sclose(space);
      if (status < 0) fail(path_, "cannot write " + split + "/" + name + "/offsets");
      H5Dclose(f->data);
      H5Gclose(f->group);
      f->data = f->group = -1;
    }
    const hid_t g = H5Gopen2(file_, ("/" + split).c_str(), H5P_DEFAULT);
    write_attribute(g, "items", items_[split]);
    H5Gclose(g);
  }
  const hid_t root = H5Gopen2(file_, "/", H5P_DEFAULT);
  write_attribute(root, "format", std::string(kStoreFormat));
  write_attribute(root, "format_version", kStoreFormatVersion);
  write_attribute(root, "created", utc_now());
  write_attribute(root, "command", command_);
#ifdef WAVETRAIN_DATA_VERSION
  write_attribute(root, "wavetrain_version", std::string(WAVETRAIN_DATA_VERSION));
#endif
  for (const auto& [name, value] : attributes_) write_attribute(root, name, value);
  write_attribute(root, "complete", int64_t{1});  // last: a reader refuses a file without it
  H5Gclose(root);
  if (H5Fflush(file_, H5F_SCOPE_GLOBAL) < 0 || H5Fclose(file_) < 0) {
    file_ = -1;
    fail(path_, "cannot be completed (disk full?)");
  }
  file_ = -1;
  std::error_code ec;
  std::filesystem::rename(temporary_, path_, ec);
  if (ec) fail(path_, "cannot be put in place: " + ec.message());
  finished_ = true;
}

}  // namespace wavetrain::data
