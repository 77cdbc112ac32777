// Shared by the dataset store's writer (hdf5_store.cpp) and reader (hdf5_store_reader.cpp): the
// dtypes the store uses, the error helper, and HDF5 handle and error-stack plumbing. Internal to
// data/; not part of the store's interface (hdf5_store.h).
#pragma once

#include <hdf5.h>

#include <cstdlib>
#include <cstring>
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

// By class, size and sign, not by equality with a native type: a big-endian float32 (h5py's ">f4")
// is float32 too, and H5Dread converts it to the native order.
inline std::optional<at::ScalarType> scalar_type_of(hid_t type) {
  const size_t bytes = H5Tget_size(type);
  switch (H5Tget_class(type)) {
    case H5T_FLOAT:
      if (bytes == 4) return at::kFloat;
      if (bytes == 8) return at::kDouble;
      return std::nullopt;
    case H5T_INTEGER:
      if (H5Tget_sign(type) == H5T_SGN_NONE) return bytes == 1 ? std::optional<at::ScalarType>(at::kByte) : std::nullopt;
      if (bytes == 8) return at::kLong;
      if (bytes == 4) return at::kInt;
      if (bytes == 2) return at::kShort;
      return std::nullopt;
    default:
      return std::nullopt;
  }
}


// HDF5 prints its error stack to stderr by default; errors here become exceptions instead.
//
// HDF5's exit-time cleanup is turned off (H5dont_atexit, which only works before the library's
// first call). HDF5 1.10.8 frees a file whose close fails (a full disk while it flushes) but keeps
// its identifier (HDFFV-11052, fixed in 1.14.1); its atexit handler then closes that identifier
// again and crashes (`wavetrain data amp` on a full disk: the error, then SIGSEGV in
// H5F__close_cb). Nothing is lost without the handler: the writer closes its file explicitly
// (finish()) or abandons a failed one on purpose, and files open for reading need no flush.
inline void silence_hdf5() {
  static const bool done = [] {
    (void)H5dont_atexit();  // fails harmlessly when something in the process called HDF5 first
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    return true;
  }();
  (void)done;
}

// The operating system's reason for HDF5's last failure ("No space left on device", "Permission
// denied"): HDF5's file driver records the errno of a failed open or write in its error stack
// ("..., errno = 28, error message = ..."). Empty when no system call failed. Call it right after
// the failing HDF5 call: the next API call clears the stack.
inline std::string system_reason() {
  int error = 0;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_DOWNWARD,
      [](unsigned, const H5E_error2_t* e, void* data) -> herr_t {
        int& found = *static_cast<int*>(data);
        const char* at = e->desc != nullptr ? std::strstr(e->desc, "errno = ") : nullptr;
        if (found == 0 && at != nullptr) found = std::atoi(at + 8);
        return 0;
      },
      &error);
  return error > 0 ? std::strerror(error) : std::string();
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
