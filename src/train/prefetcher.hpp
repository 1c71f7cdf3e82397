#pragma once
// Batches prepared ahead on one background thread while the solves run: at most `depth` batches
// wait in memory. Batch k is handed out in order; an error while loading it (a damaged image) is
// rethrown by next() when batch k is asked for, not earlier. Private to weft_train.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "weft/train/data_source.hpp"

namespace weft::train {

class Prefetcher {
 public:
  using Load = std::function<Batch(std::int64_t k)>;

  /// Starts loading batches 0 .. count-1 with `load` (called on the background thread only).
  Prefetcher(std::int64_t count, Load load, std::size_t depth = 2)
      : count_(count), load_(std::move(load)), depth_(depth < 1 ? 1 : depth) {
    if (count_ > 0) worker_ = std::thread([this] { run(); });
  }
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  /// Stops loading (what is not handed out is dropped) and waits for the thread.
  ~Prefetcher() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    if (worker_.joinable()) worker_.join();
  }

  /// The next batch in order; waits while it is being loaded. Rethrows the loader's error.
  Batch next() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [this] { return !ready_.empty(); });
    Item item = std::move(ready_.front());
    ready_.pop_front();
    lock.unlock();
    changed_.notify_all();
    if (item.error) std::rethrow_exception(item.error);
    return std::move(item.batch);
  }

 private:
  struct Item {
    Batch batch;
    std::exception_ptr error;
  };

  void run() {
    for (std::int64_t k = 0; k < count_; ++k) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        changed_.wait(lock, [this] { return stop_ || ready_.size() < depth_; });
        if (stop_) return;
      }
      Item item;
      try {
        item.batch = load_(k);
      } catch (...) {
        item.error = std::current_exception();
      }
      const bool failed = item.error != nullptr;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ready_.push_back(std::move(item));
      }
      changed_.notify_all();
      if (failed) return;  // nothing after a failed batch
    }
  }

  std::int64_t count_;
  Load load_;
  std::size_t depth_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Item> ready_;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace weft::train
