// fault_injection: for the tests of resuming and of the launchers only, never in a normal run (it is
// there only when one of these is set):
//   WAVETRAIN_FAULT_KILL_AT_STEP=N   the process kills itself (SIGKILL, no cleanup) right after
//                                    optimizer step N and the checkpoints due at it
//   WAVETRAIN_FAULT_KILL_RANK=R      ... on rank R only
//   WAVETRAIN_FAULT_STEP_DELAY_MS=M  a pause after every step: a short run lasts long enough for a
//                                    test to stop it on the way, without changing a number
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <thread>

#include "trainer/callbacks/builtin.h"

namespace wavetrain {
namespace {

class FaultInjection : public Callback {
 public:
  FaultInjection(int64_t kill_at_step, int kill_rank, int delay_ms)
      : kill_at_step_(kill_at_step), kill_rank_(kill_rank), delay_ms_(delay_ms) {}

  std::string name() const override { return "fault_injection"; }

  void on_train_batch_end(FitContext& ctx, TrainStep& step) override {
    (void)step;
    if (ctx.step == kill_at_step_ && (kill_rank_ < 0 || kill_rank_ == ctx.rank)) std::raise(SIGKILL);
    if (delay_ms_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms_));
  }

 private:
  const int64_t kill_at_step_;
  const int kill_rank_;
  const int delay_ms_;
};

}  // namespace

std::unique_ptr<Callback> make_fault_injection() {
  const char* kill = std::getenv("WAVETRAIN_FAULT_KILL_AT_STEP");
  const char* rank = std::getenv("WAVETRAIN_FAULT_KILL_RANK");
  const char* delay = std::getenv("WAVETRAIN_FAULT_STEP_DELAY_MS");
  if (!kill && !delay) return nullptr;
  return std::make_unique<FaultInjection>(kill ? std::atoll(kill) : -1, rank ? std::atoi(rank) : -1, delay ? std::atoi(delay) : 0);
}

}  // namespace wavetrain
