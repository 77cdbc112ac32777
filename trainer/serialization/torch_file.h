// PyTorch's torch.save file format: a zip archive (LibTorch's PyTorchStreamReader/Writer) with
// <prefix>/data.pkl, one <prefix>/data/<key> record of raw little-endian bytes per storage, and
// <prefix>/version. Loading never executes anything (see pickle.h for what is accepted); saving
// writes what Python's torch.load(path, weights_only=True) reads. Also state-dict helpers.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "trainer/serialization/pickle.h"

namespace wavetrain::serialization {

// Loads a file written by torch.save (zip format, PyTorch >= 1.6). Tensors come back on the CPU
// and own their memory. Every error is a SerializationError starting with the path, e.g.
// "model.pt: cannot open: No such file or directory" or
// "model.pt: not a PyTorch file (zip archive): ...".
Value load_torch_file(const std::string& path);

// The same from memory; `name` stands in for the path in error messages.
Value load_torch_bytes(const std::string& bytes, const std::string& name);

// The archive for a value, as a string. The records sit under "archive/", which is what Python
// writes for a buffer; readers ignore the prefix. (LibTorch chooses the prefix from a file name
// only when it writes the file itself, and its own file writer aborts the process on a write
// error, so we always stream through a callback instead.)
std::string save_torch_bytes(const Value& v);

// Writes the archive to path.tmp.XXXXXX, flushes it to disk and renames it over `path`, so a
// reader sees the old file or the new one, never a partial one. Errors start with the path.
void save_torch_file(const std::string& path, const Value& v);

// Lower level, for files with records of their own next to torch.save's (e.g. a checksum).
// The archive for an already pickled value plus `extra_records` (name inside the folder, bytes),
// as a string. `archive_name` must be "archive" (see save_torch_bytes); other names, and extra
// names that torch.save's records use, are SerializationErrors.
std::string write_archive(const Pickled& pickled, const std::string& archive_name,
                          const std::vector<std::pair<std::string, std::string>>& extra_records = {});

// Every record of an archive, names inside the folder ("data.pkl", "data/0", ...) in name order,
// after the same checks load_torch_bytes makes on the zip structure. Errors start with `name`.
std::vector<std::pair<std::string, std::string>> read_records(const std::string& bytes, const std::string& name);

// A state dict: parameter and buffer names in order, with their tensors.
using StateDict = std::vector<std::pair<std::string, at::Tensor>>;

// The state dict inside `v`, which must be a dict (or OrderedDict) of str -> tensor; otherwise a
// SerializationError naming `source` and the first offending key.
StateDict to_state_dict(const Value& v, const std::string& source);

// An OrderedDict value of the state dict, as torch.save(model.state_dict()) writes it.
Value from_state_dict(const StateDict& sd);


}  // namespace wavetrain::serialization
