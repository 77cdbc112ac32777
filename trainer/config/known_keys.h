// The keys a run reads, so that a key in a YAML file that nothing reads (`trainer.max_epoch`, a
// typo that would otherwise change nothing) is refused like an unknown command-line key, with the
// file and line and a "Did you mean ...?".
//
// What is known: every key of every file of the built-in config folder (each under its package:
// its group path, or its `# @package` header), and the keys a task declares that no built-in file
// sets (trainer/task.h). A known key whose built-in value is an empty mapping (`sweep.params: {}`)
// is an open section: any key below it is accepted, as is anything below a declared `section.*`.
// A key that an interpolation refers to (`sr: 48000` beside `amp.sample_rate: ${sr}`) is read
// through it, and `hydra` (Hydra's own section) is accepted whole.
// Keys set on the command line are not checked here: `key=v` must already exist, and `+key=v` adds
// a key on purpose.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "trainer/config/node.h"

namespace wavetrain::config {

class KnownKeys {
 public:
  // "a.b" (that key, and the mappings on the way to it) or "a.b.*" (an open section).
  void add(const std::string& key);
  // Every key of every .yaml file under `dir`, as described above. Throws ConfigError for a file
  // that is not valid YAML.
  void add_config_dir(const std::string& dir);

  // Whether `path` is a key, a mapping on the way to one, or inside an open section.
  bool known(const std::string& path) const;
  // Whether every key below `path` is accepted.
  bool open(const std::string& path) const;
  // The known keys as a tree, for suggestions.
  Node as_tree() const;

 private:
  std::set<std::string> keys_, prefixes_, open_;
};

// Throws ConfigError for the first key of `config` that came from a file and is not known:
//   Key 'trainer.max_epoch' (my.yaml:4) is not a key that wavetrain reads.
//   Did you mean trainer.max_epochs?
void check_known_keys(const Node& config, const KnownKeys& known);

}  // namespace wavetrain::config
