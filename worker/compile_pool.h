// CompilePool: compiles configs on a pool of CPU threads, ahead of the GPU.
//
// Submit returns at once; the future is ready when the compile is. Each
// device thread submits a whole unit's configs up front, then measures them
// in order, so compiling config i+1.. overlaps timing config i.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "measure/backend.h"

namespace tune {

// The cores this process may run on (its CPU affinity: a worker pinned to
// some of a host's cores gets those), 0 when unknown.
unsigned UsableCores();

class CompilePool {
 public:
  explicit CompilePool(unsigned threads);  // 0 = one per usable core
  ~CompilePool();                           // finishes queued work, then joins
  CompilePool(const CompilePool&) = delete;
  CompilePool& operator=(const CompilePool&) = delete;

  std::future<CompiledKernel> Submit(std::function<CompiledKernel()> job);
  unsigned threads() const { return static_cast<unsigned>(threads_.size()); }

 private:
  void Loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::packaged_task<CompiledKernel()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace tune
