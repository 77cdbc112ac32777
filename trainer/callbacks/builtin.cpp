// The built-in callbacks in their order; see builtin.h.
#include "trainer/callbacks/builtin.h"

namespace wavetrain {

std::vector<std::unique_ptr<Callback>> make_run_callbacks(const FitOptions& options,
                                                          std::vector<std::unique_ptr<Callback>> configured) {
  std::vector<std::unique_ptr<Callback>> all;
  all.push_back(make_progress_bar());
  all.push_back(make_csv_logger());
  all.push_back(make_tensorboard_logger());
  all.push_back(make_early_stopping(options));
  all.push_back(make_timer(options));
  for (std::unique_ptr<Callback>& c : configured) all.push_back(std::move(c));
  all.push_back(make_model_checkpoint(options));
  all.push_back(make_stop_on_signal());
  if (std::unique_ptr<Callback> faults = make_fault_injection()) all.push_back(std::move(faults));
  return all;
}

}  // namespace wavetrain
