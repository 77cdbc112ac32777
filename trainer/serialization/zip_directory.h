// The central directory of a torch.save zip archive, read and vetted by us before LibTorch's
// reader is given the archive. Internal to torch_file.cpp (and separate only to keep that file one
// thing); the public API is torch_file.h.
#pragma once

#include <caffe2/serialize/read_adapter_interface.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace wavetrain::serialization {

// A read-only look at the zip's central directory, taken before LibTorch's reader sees the file,
// because that reader (miniz) trusts it: it allocates whatever size a record claims (a 2 KB file
// can ask for terabytes); it "extracts" a record flagged as a directory, or a corrupt compressed
// one, by returning a buffer it never wrote; and it leaks its state when its constructor throws
// (e.g. for a missing or bad "version" record). Readable records are what torch.save writes:
// uncompressed, unencrypted files inside the file. Other records may exist (a re-zipped archive
// has directory entries) but cannot be read. Names must be unique. Errors are SerializationErrors
// without the file name.
class ZipDirectory {
 public:
  struct Record {
    uint64_t data_offset = 0;
    uint64_t size = 0;
    std::string problem;  // why the record cannot be read; empty when it can
  };

  // Reads and checks the directory (and the version record); throws SerializationError.
  explicit ZipDirectory(const caffe2::serialize::ReadAdapterInterface& in);

  // A record by its name inside the archive folder ("data.pkl"); nullptr when absent.
  const Record* find(const std::string& name) const {
    const auto it = records_.find(name);
    return it == records_.end() ? nullptr : &it->second;
  }

  const std::string& prefix() const { return prefix_; }
  const std::map<std::string, Record>& records() const { return records_; }

 private:
  static constexpr size_t kCentralHeader = 46;
  static constexpr size_t kLocalHeader = 30;

  // Where a record's bytes are, or why miniz would not hand them over intact.
  Record vet(const std::string& name, uint64_t flags, uint64_t method, uint64_t compressed, uint64_t size,
             uint64_t external_attributes, uint64_t local) const;

  // Exactly n bytes at pos (the caller checked they are inside the file).
  std::string read(uint64_t pos, uint64_t n) const;

  const caffe2::serialize::ReadAdapterInterface& in_;
  uint64_t size_;
  std::string prefix_;  // "archive/"
  std::map<std::string, Record> records_;
};

}  // namespace wavetrain::serialization
