#include "compile_pool.h"

#include <sched.h>

namespace tune {

unsigned UsableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return static_cast<unsigned>(CPU_COUNT(&set));
  return std::thread::hardware_concurrency();
}

CompilePool::CompilePool(unsigned threads) {
  if (threads == 0) threads = std::max(1u, UsableCores());
  for (unsigned i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

CompilePool::~CompilePool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

std::future<CompiledKernel> CompilePool::Submit(std::function<CompiledKernel()> job) {
  std::packaged_task<CompiledKernel()> task(std::move(job));
  auto fut = task.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
  return fut;
}

void CompilePool::Loop() {
  for (;;) {
    std::packaged_task<CompiledKernel()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace tune
