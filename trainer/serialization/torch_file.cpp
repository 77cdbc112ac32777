// The torch.save zip container around pickle.h, files in and out, and state dicts; see
// torch_file.h.
//
// LibTorch 1.13's zip container shapes this file:
//  - PyTorchStreamWriter's destructor finalizes the archive, and after a write error it throws
//    again from there, which terminates the process (PyTorch issue 87997). So the writer always
//    gets a callback that cannot fail; the callback remembers the first write error, and we check
//    it once the archive is complete.
//  - PyTorchStreamReader trusts the zip's central directory (sizes, flags) and leaks when its
//    constructor throws; ZipDirectory (zip_directory.h) vets the archive before the reader sees it
//    (the findings are in docs/fuzzing.md).
//  - It reports a malformed archive by throwing c10::Error (and, for a bad version record,
//    std::invalid_argument); everything is turned into SerializationError here.
#include "trainer/serialization/torch_file.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <set>

#include "trainer/serialization/internal.h"
#include "trainer/serialization/zip_directory.h"

namespace wavetrain::serialization {

using detail::printable;

namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "storages are written as raw native bytes, which torch.save's format defines as little-endian");

// What every torch.save archive's first record starts with: a zip local file header.
constexpr char kZipMagic[] = "PK\x03\x04";
// What files from torch.save before 1.6 (_use_new_zipfile_serialization=False) start with: the
// pickled magic number 0x1950a86a20f9469cfc6c.
constexpr char kLegacyMagic[] = "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19";

// c10::Error messages start with "[enforce fail at file.cc:123] . "; users need only the rest.
std::string libtorch_message(const c10::Error& e) {
  std::string m = e.what_without_backtrace();
  if (m.rfind("[enforce fail at", 0) == 0) {
    const size_t end = m.find("] ");
    if (end != std::string::npos) m = m.substr(end + 2);
    if (m.rfind(". ", 0) == 0) m = m.substr(2);
  }
  const size_t newline = m.find('\n');
  if (newline != std::string::npos) m.resize(newline);
  return m;
}

// Archive bytes from memory. Reads past the end come back short, which miniz reports as an error
// (LibTorch's own MemoryReadAdapter would copy past the end).
class BytesReadAdapter final : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit BytesReadAdapter(const std::string& bytes) : bytes_(bytes) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= bytes_.size()) return 0;
    n = std::min<uint64_t>(n, bytes_.size() - pos);
    std::memcpy(buf, bytes_.data() + pos, n);
    return n;
  }

 private:
  const std::string& bytes_;
};

// Archive bytes from an open file, read with pread. It never throws (miniz, which calls it, is C
// code); a failed read comes back short and its errno is kept for the message.
class FileReadAdapter final : public caffe2::serialize::ReadAdapterInterface {
 public:
  FileReadAdapter(int fd, size_t size) : fd_(fd), size_(size) {}
  ~FileReadAdapter() override { ::close(fd_); }
  size_t size() const override { return size_; }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= size_) return 0;
    n = std::min<uint64_t>(n, size_ - pos);
    size_t done = 0;
    while (done < n) {
      const ssize_t got = ::pread(fd_, static_cast<char*>(buf) + done, n - done, static_cast<off_t>(pos + done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) error_ = errno;
      if (got <= 0) break;
      done += static_cast<size_t>(got);
    }
    return done;
  }
  int error() const { return error_; }

 private:
  int fd_;
  size_t size_;
  mutable int error_ = 0;
};

// A record's bytes through LibTorch's reader, after checking that it finds the record we vetted
// (miniz matches names case-insensitively, so a look-alike name could otherwise slip in).
void check_readable(const ZipDirectory::Record& vetted) {
  if (!vetted.problem.empty()) throw SerializationError("not a PyTorch file (zip archive): " + vetted.problem);
}

at::DataPtr read_record(caffe2::serialize::PyTorchStreamReader& reader, const ZipDirectory::Record& vetted,
                        const std::string& name) {
  check_readable(vetted);
  if (reader.getRecordOffset(name) != vetted.data_offset) {
    throw SerializationError("not a PyTorch file (zip archive): records named like '" + printable(name) +
                             "' are ambiguous");
  }
  auto [data, size] = reader.getRecord(name);
  if (size != vetted.size) {
    throw SerializationError("not a PyTorch file (zip archive): record '" + printable(name) + "' changed size");
  }
  return std::move(data);
}

// Turns one storage record into a 1-D tensor that keeps the record's memory alive.
at::Tensor load_storage(caffe2::serialize::PyTorchStreamReader& reader, const ZipDirectory& dir,
                        const std::string& key, at::ScalarType dtype, int64_t numel) {
  const std::string record = "data/" + key;
  const ZipDirectory::Record* vetted = dir.find(record);
  if (vetted == nullptr) {
    throw SerializationError("storage '" + printable(key) + "' is missing (no record " + printable(record) +
                             " in the archive)");
  }
  check_readable(*vetted);
  int64_t needed = 0;
  if (__builtin_mul_overflow(numel, static_cast<int64_t>(c10::elementSize(dtype)), &needed)) {
    throw SerializationError("storage '" + printable(key) + "' claims " + std::to_string(numel) +
                             " elements, more than any file holds");
  }
  // Checked before reading, so a false size costs nothing.
  if (vetted->size < static_cast<uint64_t>(needed)) {
    throw SerializationError("storage '" + printable(key) + "' holds " + std::to_string(vetted->size) +
                             " bytes, the tensor needs " + std::to_string(needed));
  }
  const auto options = at::TensorOptions().dtype(dtype);
  if (numel == 0) return at::empty({0}, options);
  // The record's buffer (from getRecord's allocation) becomes the storage; the tensor's deleter
  // owns it, so tensors stay valid after the reader is gone, and views share one copy.
  auto holder = std::make_shared<at::DataPtr>(read_record(reader, *vetted, record));
  return at::from_blob(holder->get(), {numel}, [holder](void*) {}, options);
}

// An archive opened for reading: our vetted directory and LibTorch's reader over the same bytes.
struct OpenArchive {
  std::unique_ptr<ZipDirectory> dir;
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> reader;
  std::string read_error;  // " (read error: ...)" when the file could not be read, else empty
};

// Errors start with `name`.
OpenArchive open_archive(const std::shared_ptr<caffe2::serialize::ReadAdapterInterface>& in, const std::string& name,
                         const FileReadAdapter* file) {
  auto read_error = [&]() -> std::string {
    return file && file->error() ? std::string(" (read error: ") + std::strerror(file->error()) + ")" : std::string();
  };
  const std::string not_torch = name + ": not a PyTorch file (zip archive): ";

  // Recognize the common wrong inputs before the zip checks give a less helpful message.
  char head[sizeof kLegacyMagic - 1] = {};
  const size_t got = in->read(0, head, sizeof head, "");
  if (in->size() == 0) throw SerializationError(not_torch + "the file is empty");
  if (got == sizeof head && std::memcmp(head, kLegacyMagic, sizeof head) == 0) {
    throw SerializationError(name + ": written in torch.save's legacy format (before PyTorch 1.6), which is not "
                             "supported; load it in Python and save it again");
  }
  if (got < 4 || std::memcmp(head, kZipMagic, 4) != 0) {
    if (file && file->error()) throw SerializationError(name + ": cannot read" + read_error());
    throw SerializationError(not_torch + "it does not start with a zip header");
  }

  std::unique_ptr<ZipDirectory> dir;
  try {
    dir = std::make_unique<ZipDirectory>(*in);
  } catch (const SerializationError& e) {
    throw SerializationError(not_torch + e.what() + read_error());
  }
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> reader;
  try {
    reader = std::make_unique<caffe2::serialize::PyTorchStreamReader>(in);
  } catch (const c10::Error& e) {
    throw SerializationError(not_torch + libtorch_message(e) + read_error());
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    throw SerializationError(not_torch + e.what() + read_error());
  }
  return OpenArchive{std::move(dir), std::move(reader), read_error()};
}

Value read_archive(const std::shared_ptr<caffe2::serialize::ReadAdapterInterface>& in, const std::string& name,
                   const FileReadAdapter* file) {
  const OpenArchive archive = open_archive(in, name, file);
  const ZipDirectory& dir = *archive.dir;
  caffe2::serialize::PyTorchStreamReader& reader = *archive.reader;
  const ZipDirectory::Record* pkl_record = dir.find("data.pkl");
  if (pkl_record == nullptr) {
    if (dir.find("constants.pkl") != nullptr) {
      throw SerializationError(name + ": a TorchScript archive (torch.jit.save), not a torch.save file");
    }
    throw SerializationError(name + ": not a torch.save file: the archive has no data.pkl");
  }
  try {
    if (const ZipDirectory::Record* order = dir.find("byteorder")) {
      const at::DataPtr data = read_record(reader, *order, "byteorder");
      const std::string text(static_cast<const char*>(data.get()), order->size);
      if (text != "little") {
        throw SerializationError("storages are stored with byte order '" + printable(text) +
                                 "'; only little-endian files are supported");
      }
    }
    const at::DataPtr pkl_data = read_record(reader, *pkl_record, "data.pkl");
    const std::string pkl(static_cast<const char*>(pkl_data.get()), pkl_record->size);
    return unpickle(pkl, [&](const std::string& key, at::ScalarType dtype, int64_t numel) {
      return load_storage(reader, dir, key, dtype, numel);
    });
  } catch (const SerializationError& e) {
    throw SerializationError(name + ": " + e.what() + archive.read_error);
  }
}

// Catches what LibTorch and the allocator throw and reports it as ours, prefixed with `name`.
template <typename F>
auto reporting_errors(const std::string& name, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const SerializationError&) {
    throw;
  } catch (const c10::Error& e) {
    throw SerializationError(name + ": " + libtorch_message(e));
  } catch (const std::bad_alloc&) {
    throw SerializationError(name + ": out of memory");
  } catch (const std::exception& e) {
    throw SerializationError(name + ": " + e.what());
  }
}

using Records = std::vector<std::pair<std::string, std::string>>;

// Writes the records in the order torch.save does, then `extra` (the writer adds "version" last).
void stream_archive(const Pickled& p, const Records& extra, const std::function<size_t(const void*, size_t)>& sink) {
  static const std::set<std::string> kReserved = {"data.pkl", "byteorder", "version", ".data/version"};
  for (const auto& [name, bytes] : extra) {
    if (kReserved.count(name) != 0 || name.rfind("data/", 0) == 0 || name.empty()) {
      throw SerializationError("extra record name '" + printable(name) + "' is taken by torch.save's format");
    }
  }
  auto writer = std::make_unique<caffe2::serialize::PyTorchStreamWriter>(sink);
  try {
    writer->writeRecord("data.pkl", p.bytes.data(), p.bytes.size());
    writer->writeRecord("byteorder", "little", 6);  // what torch 2.x writes; 1.13 ignores it
    static const char kNothing = 0;
    for (size_t i = 0; i < p.storages.size(); ++i) {
      const at::Tensor& s = p.storages[i];
      const size_t nbytes = s.nbytes();
      writer->writeRecord("data/" + std::to_string(i), nbytes ? s.data_ptr() : &kNothing, nbytes);
    }
    for (const auto& [name, bytes] : extra) writer->writeRecord(name, bytes.data(), bytes.size());
    writer->writeEndOfFile();
  } catch (...) {
    // Destroying a writer that failed would finalize it again and throw from its destructor,
    // terminating the process; leaking it (memory only: the sink owns any file) is the lesser evil.
    (void)writer.release();
    throw;
  }
}

[[noreturn]] void fail_errno(const std::string& path, const std::string& what, int err) {
  throw SerializationError(path + ": " + what + ": " + std::strerror(err));
}

}  // namespace

Value load_torch_bytes(const std::string& bytes, const std::string& name) {
  return reporting_errors(name, [&] {
    return read_archive(std::make_shared<BytesReadAdapter>(bytes), name, nullptr);
  });
}

Value load_torch_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail_errno(path, "cannot open", errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail_errno(path, "cannot open", err);
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    fail_errno(path, "cannot open", EISDIR);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw SerializationError(path + ": cannot open: not a regular file");
  }
  // From here the adapter owns the descriptor.
  auto file = std::make_shared<FileReadAdapter>(fd, static_cast<size_t>(st.st_size));
  return reporting_errors(path, [&] { return read_archive(file, path, file.get()); });
}

std::string save_torch_bytes(const Value& v) {
  return write_archive(reporting_errors("save_torch_bytes", [&] { return pickle(v); }), "archive");
}

std::string write_archive(const Pickled& pickled, const std::string& archive_name, const Records& extra_records) {
  if (archive_name != "archive") {
    throw SerializationError("write_archive: the folder can only be 'archive' (LibTorch's writer names it when "
                             "writing through a callback), not '" + printable(archive_name) + "'");
  }
  return reporting_errors("write_archive", [&] {
    std::string out;
    stream_archive(pickled, extra_records, [&](const void* data, size_t n) {
      out.append(static_cast<const char*>(data), n);
      return n;
    });
    return out;
  });
}

Records read_records(const std::string& bytes, const std::string& name) {
  return reporting_errors(name, [&] {
    const OpenArchive archive = open_archive(std::make_shared<BytesReadAdapter>(bytes), name, nullptr);
    Records records;
    try {
      for (const auto& [record, vetted] : archive.dir->records()) {
        const at::DataPtr data = read_record(*archive.reader, vetted, record);
        records.emplace_back(record, std::string(static_cast<const char*>(data.get()), vetted.size));
      }
    } catch (const SerializationError& e) {
      throw SerializationError(name + ": " + e.what());
    }
    return records;
  });
}

void save_torch_file(const std::string& path, const Value& v) {
  // Pickle first: a value that cannot be saved must not leave a temporary file behind.
  const Pickled p = reporting_errors(path, [&] { return pickle(v); });

  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) fail_errno(path, "cannot create a temporary file", errno);
  auto abandon = [&]() {
    ::close(fd);
    ::unlink(tmp.c_str());
  };

  // The sink reports success to the writer whatever happens (see the top of this file) and keeps
  // the first error; after an error it stops writing.
  int write_error = 0;
  auto sink = [&](const void* data, size_t n) -> size_t {
    size_t done = 0;
    while (write_error == 0 && done < n) {
      const ssize_t w = ::write(fd, static_cast<const char*>(data) + done, n - done);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        write_error = errno;
      } else {
        done += static_cast<size_t>(w);
      }
    }
    return n;
  };
  try {
    reporting_errors(path, [&] { stream_archive(p, {}, sink); });
  } catch (...) {
    abandon();
    throw;
  }
  if (write_error != 0) {
    abandon();
    fail_errno(path, "cannot write", write_error);
  }
  // The data must be on disk before the rename makes it visible under the final name.
  if (::fsync(fd) != 0) {
    const int err = errno;
    abandon();
    fail_errno(path, "cannot write", err);
  }
  ::fchmod(fd, 0644);  // mkstemp creates 0600; checkpoints are ordinary result files
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail_errno(path, "cannot write", err);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail_errno(path, "cannot rename " + tmp + " onto it", err);
  }
  // Make the rename itself durable; a failure here does not undo the save, so it is not reported.
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

StateDict to_state_dict(const Value& v, const std::string& source) {
  auto a = [](const Value& x) { return std::string(x.kind() == Value::Kind::Int ? "an " : "a ") + x.kind_name(); };
  if (v.kind() != Value::Kind::Dict) {
    throw SerializationError(source + ": expected a state dict (a dict of tensors), got " + a(v));
  }
  StateDict sd;
  sd.reserve(v.entries().size());
  for (const auto& [key, value] : v.entries()) {
    if (key.kind() != Value::Kind::String) {
      throw SerializationError(source + ": expected a state dict, but it has a key of type " + key.kind_name() +
                               (key.kind() == Value::Kind::Int ? " (" + std::to_string(key.as_int()) + ")" : ""));
    }
    if (value.kind() != Value::Kind::Tensor) {
      throw SerializationError(source + ": expected a state dict, but entry '" + key.as_string() + "' is " + a(value) +
                               ", not a tensor");
    }
    sd.emplace_back(key.as_string(), value.as_tensor());
  }
  return sd;
}

Value from_state_dict(const StateDict& sd) {
  std::vector<Value::Entry> entries;
  entries.reserve(sd.size());
  for (const auto& [name, tensor] : sd) entries.emplace_back(Value::string(name), Value::tensor(tensor));
  return Value::ordered_dict(std::move(entries));
}

}  // namespace wavetrain::serialization
