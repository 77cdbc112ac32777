// Test support: one dataset of an HDF5 file (the stored reference vectors, or what a live client
// wrote) as a tensor of the given type, read with HDF5's C API. A failed read fails the test.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <hdf5.h>

#include <string>
#include <vector>

namespace wavetrain::testing {

inline at::Tensor read_hdf5_dataset(const std::string& path, const std::string& name, at::ScalarType type = at::kDouble) {
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t data = H5Dopen2(file, name.c_str(), H5P_DEFAULT);
  const hid_t space = H5Dget_space(data);
  hsize_t dims[8] = {};
  const int rank = H5Sget_simple_extent_ndims(space);
  H5Sget_simple_extent_dims(space, dims, nullptr);
  at::Tensor t = at::empty(std::vector<int64_t>(dims, dims + (rank > 0 ? rank : 0)), type);
  const herr_t status = H5Dread(data, type == at::kLong ? H5T_NATIVE_INT64 : H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL,
                                H5P_DEFAULT, t.data_ptr());
  H5Sclose(space);
  H5Dclose(data);
  H5Fclose(file);
  EXPECT_GE(status, 0) << path << ": " << name;
  return t;
}

}  // namespace wavetrain::testing
