// The callback registry and the default checkpoint hooks; see callback.h.
#include "trainer/callback.h"

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

CallbackRegistration::CallbackRegistration(const std::string& name, CallbackFactory factory, std::vector<std::string> keys) {
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
  for (const std::string& name : configured_callback_names(cfg)) made.push_back(registry().at(name).factory(cfg));
  return made;
}

}  // namespace wavetrain
