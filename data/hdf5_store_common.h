// Shared by the dataset store's writer (hdf5_store.cpp) and reader (hdf5_store_reader.cpp): the
// dtypes the store uses, the error helper, and HDF5 handle and error-stack plumbing. Internal to
// data/; not part of the store's interface (hdf5_store.h).
#pragma once

#include <hdf5.h>

#include <optional>
#include <string>

#include "data/hdf5_store.h"

namespace wavetrain::data::store_detail {

[[noreturn]] inline void fail(const std::string& path, const std::string& what) { throw StoreError(path + ": " + what); }

inline hid_t native_type(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return H5T_NATIVE_FLOAT;
    case at::kDouble: return H5T_NATIVE_DOUBLE;
    case at::kLong: return H5T_NATIVE_INT64;
    case at::kInt: return H5T_NATIVE_INT32;
    case at::kShort: return H5T_NATIVE_INT16;
    case at::kByte: return H5T_NATIVE_UINT8;
    default: return -1;
  }
}

inline std::optional<at::ScalarType> scalar_type_of(hid_t type) {
  for (at::ScalarType t : {at::kFloat, at::kDouble, at::kLong, at::kInt, at::kShort, at::kByte})
    if (H5Tequal(type, native_type(t)) > 0) return t;
  return std::nullopt;
}


// HDF5 prints its error stack to stderr by default; errors here become exceptions instead.
inline void silence_hdf5() {
  static const bool done = [] {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)done;
}

// Closes an HDF5 identifier at the end of its scope, so that an error thrown anywhere on the way
// closes what was opened.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};


}  // namespace wavetrain::data::store_detail
