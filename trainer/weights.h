// Model weights in and out of torch.save files, interoperable with Python and with DataParallel.
//
// Reads a state dict written by Python's torch.save(model.state_dict()) or by a DataParallel/DDP
// model (keys prefixed `module.`), or the weights inside a wavetrain checkpoint, into a C++ module
// whose names may or may not carry the prefix: the reader picks the mapping (as is, `module.`
// stripped, or added) that matches the most names. Strict by default: missing keys, unexpected keys
// and shape mismatches are all listed by name. Writes files Python reads with weights_only=True.
// Reading never executes anything (see serialization/pickle.h).
#pragma once

#include <string>
#include <vector>

#include "trainer/serialization/torch_file.h"

namespace torch::nn {
class Module;
}

namespace wavetrain {

using serialization::StateDict;

// The module's parameters and buffers in Python's order (module by module: parameters, then
// buffers), detached; names optionally prefixed with "module.".
StateDict module_state_dict(const torch::nn::Module& module, bool module_prefix = false);

// A module whose parameter names changed between releases implements this as well (a second base
// class): load_state_dict hands it the file's state dict first, and it returns the state under
// today's names (with `module.` prefixes kept as found) plus any entry the old names had no
// counterpart for, so that checkpoints written before the change still load and resume.
class RenamesOldState {
 public:
  virtual ~RenamesOldState() = default;
  virtual StateDict renamed_old_state(const StateDict& state) const = 0;
};

struct LoadReport {
  std::vector<std::string> missing;     // in the module, not in the file
  std::vector<std::string> unexpected;  // in the file, not in the module
  std::vector<std::string> mismatched;  // "fc.weight: file [4, 2], model [2, 2]"
  std::string prefix_note;              // how `module.` was handled, if it was
  bool complete() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }
  std::string describe() const;         // one line per non-empty list
};

// Copies the matching tensors into the module. With strict, any incomplete match throws
// std::runtime_error starting with `source` and listing every problem, and nothing is changed.
LoadReport load_state_dict(torch::nn::Module& module, const StateDict& state, bool strict, const std::string& source);

// Reads `path` (a state dict, or a wavetrain checkpoint's "model") into the module.
LoadReport load_weights(const std::string& path, torch::nn::Module& module, bool strict = true);

// Writes the module's state dict to `path` atomically, optionally with DataParallel's prefix.
void save_weights(const std::string& path, const torch::nn::Module& module, bool module_prefix = false);

}  // namespace wavetrain
