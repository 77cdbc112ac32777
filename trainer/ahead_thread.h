// One thread that lives as long as its owner and runs one job at a time: the training loop makes
// batch b + 1 on it while batch b trains.
//
// Why not std::async per batch: with LibTorch 1.13 (an OpenMP build), the first ATen call in a new
// thread, and in each thread of the OpenMP team that thread then starts, runs
// at::init_num_threads(), which rebuilds the process's pthreadpool (caffe2's, for NNPACK and
// QNNPACK) from scratch; the new pool's worker spins for about a million `pause` instructions before
// it sleeps. Two new threads per batch cost about 8% of a 2-core machine's CPU in the ASR recipe
// (perf: libpthreadpool's wait loop), taken from the batch being trained. A thread that stays pays
// that once.
#pragma once

#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace wavetrain {

template <class T>
class AheadThread {
 public:
  AheadThread() : thread_([this] { loop(); }) {}
  // Runs a job still queued, then ends the thread.
  ~AheadThread() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  AheadThread(const AheadThread&) = delete;
  AheadThread& operator=(const AheadThread&) = delete;

  // Queues `job` for the thread; its result, or what it threw, comes through the future. At most one
  // job waits at a time (one may be running): a second is a logic error.
  std::future<T> submit(std::function<T()> job) {
    std::packaged_task<T()> task(std::move(job));
    std::future<T> out = task.get_future();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (queued_.valid()) throw std::logic_error("AheadThread::submit: a job is already queued");
      queued_ = std::move(task);
    }
    wake_.notify_one();
    return out;
  }

 private:
  void loop() {
    for (;;) {
      std::packaged_task<T()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return stop_ || queued_.valid(); });
        if (!queued_.valid()) return;  // stopping, nothing queued
        task = std::move(queued_);
      }
      task();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::packaged_task<T()> queued_;
  bool stop_ = false;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace wavetrain
