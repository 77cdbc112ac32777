// The callback registry and the default checkpoint hooks; see callback.h.
#include "trainer/callback.h"

#include <algorithm>
#include <map>

#include "trainer/callbacks/builtin.h"

namespace wavetrain {
namespace {

struct Registered {
  CallbackFactory factory;
  std::vector<std::string> config_keys;
};

std::map<std::string, Registered>& registry() {
  // Built on first use; the built-in optional callbacks are here from the start.
  static std::map<std::string, Registered> callbacks = {{"lr_monitor", {make_lr_monitor, {"lr_monitor.*"}}}};
  return callbacks;
}

}  // namespace

void Callback::on_save_checkpoint(const FitContext& ctx, TrainingState& state) const {
  (void)ctx;
  serialization::Value own = state_dict();
  if (!own.is_none()) state.callbacks.emplace_back(name(), std::move(own));
}

void Callback::on_load_checkpoint(FitContext& ctx, const TrainingState& state) {
  (void)ctx;
  for (const auto& [key, own] : state.callbacks)
    if (key == name()) load_state_dict(own);
}

// The callbacks every run has (callbacks/builtin.h): their names are taken.
const std::vector<std::string>& builtin_callback_names() {
  static const std::vector<std::string> names = {"progress_bar", "csv_logger",     "tensorboard", "early_stopping", "timer",
                                                 "model_checkpoint", "stop_on_signal", "fault_injection"};
  return names;
}

bool is_builtin(const std::string& name) {
  const std::vector<std::string>& b = builtin_callback_names();
  return std::find(b.begin(), b.end(), name) != b.end();
}

CallbackRegistration::CallbackRegistration(const std::string& name, CallbackFactory factory, std::vector<std::string> keys) {
  if (is_builtin(name)) {
    note_registration_clash("callback '" + name + "' (built in)");
    return;
  }
  if (!registry().emplace(name, Registered{std::move(factory), std::move(keys)}).second)
    note_registration_clash("callback '" + name + "'");
}

std::vector<std::string> callback_names() {
  std::vector<std::string> names;
  for (const auto& [name, r] : registry()) names.push_back(name);
  return names;
}

std::vector<std::string> callback_config_keys(const std::string& name) {
  const auto it = registry().find(name);
  return it == registry().end() ? std::vector<std::string>{} : it->second.config_keys;
}

std::vector<std::string> configured_callback_names(const config::Config& cfg) {
  std::vector<std::string> names;
  if (!cfg.has("callbacks")) return names;
  const config::Node list = cfg.value("callbacks");
  const std::string where = "callbacks (" + list.origin().str() + ")";
  if (list.is_null()) return names;
  if (!list.is_sequence()) throw config::ConfigError(where + ": expected a list of callback names, found " + list.to_display());
  for (const config::Node& item : list.items()) {
    if (item.kind() != config::Node::Kind::String)
      throw config::ConfigError(where + ": expected callback names, found " + item.to_display());
    const std::string& name = item.string_value();
    if (is_builtin(name))
      throw config::ConfigError(where + ": '" + name + "' is built in: every run has it (configured by trainer.*)");
    if (registry().count(name) == 0) {
      std::string known;
      for (const std::string& n : callback_names()) known += (known.empty() ? "" : ", ") + n;
      throw config::ConfigError(where + ": unknown callback '" + name + "'. Known callbacks: " + known +
                                " (a plugin's callbacks are known once plugins=[...] loads it)");
    }
    for (const std::string& earlier : names)
      if (earlier == name) throw config::ConfigError(where + ": '" + name + "' is named twice");
    names.push_back(name);
  }
  return names;
}

std::vector<std::unique_ptr<Callback>> make_configured_callbacks(const config::Config& cfg) {
  std::vector<std::unique_ptr<Callback>> made;
  for (const std::string& name : configured_callback_names(cfg)) {
    std::unique_ptr<Callback> c = registry().at(name).factory(cfg);
    // Its name is its state's key in checkpoints: it must be the one it was configured by.
    if (!c) throw config::ConfigError("callback '" + name + "': its factory made no callback");
    if (c->name() != name)
      throw config::ConfigError("callback '" + name + "': its factory made a callback named '" + c->name() + "'");
    made.push_back(std::move(c));
  }
  return made;
}

}  // namespace wavetrain
