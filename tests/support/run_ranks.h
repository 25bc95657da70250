// Ranks as threads, for the tests of collectives that every rank of a job calls together.
#pragma once

#include <exception>
#include <functional>
#include <thread>
#include <vector>

namespace atp::test {

// Runs body(rank) on one thread per rank and returns what each thread threw (null: nothing).
inline std::vector<std::exception_ptr> run_ranks(int size, const std::function<void(int)>& body) {
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(size));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        body(rank);
      } catch (...) {
        errors[static_cast<std::size_t>(rank)] = std::current_exception();
      }
    });
  }
  for (auto& t : threads) t.join();
  return errors;
}

}  // namespace atp::test
