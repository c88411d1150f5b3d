// ChainRelay: a product summed over the rows of a batch that several replica
// threads hold, in row order, such as a weight gradient X^T dY. Replica r
// holds the rows after replica r-1's and continues, in one shared C, the
// chains (chain_gemm.hpp) that r-1 left, block by block of C: r starts on a
// block as soon as r-1 is done with it, so all replicas compute at once
// after a lag of one block each. C is then the same float as one chain_gemm
// over all the rows, whatever the replica count and however the rows are
// split; no gradient is summed afterwards. The building block of issue 18's
// deterministic mode without units (docs/benchmarks.md); the executors do
// not use it yet.
//
// Waits spin, then yield, then nap; a wait longer than the timeout
// (CommunicationOptions), or abort() from a replica that failed, ends every
// waiting replica's call with an Error instead of a hang; an aborted relay
// stays so (make a new one, as the executors make their collective anew).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "lockstep/backend/host/barrier.hpp"
#include "lockstep/backend/host/chain_gemm.hpp"
#include "lockstep/core/communication.hpp"
#include "lockstep/core/error.hpp"

namespace lockstep::host {

class ChainRelay {
 public:
  explicit ChainRelay(int replicas, double timeout_seconds = CommunicationOptions{}.timeout_seconds)
      : replicas_(replicas), rounds_(new Round[static_cast<std::size_t>(replicas > 0 ? replicas : 1)]) {
    require(replicas >= 1, "ChainRelay: ", replicas, " replicas, expected at least 1");
    set_timeout(timeout_seconds);
  }

  // Set while no replica is in a call.
  void set_timeout(double seconds) {
    timeout_ = lockstep::detail::checked(CommunicationOptions{seconds}, "ChainRelay").timeout_seconds;
  }

  // Releases every replica waiting, now or later, with an Error: `reason`, or
  // a replica's failure when empty. The first reason stays.
  void abort(const std::string& reason = {}) { abort_.set(reason); }

  // Replica `replica`'s rows of one round: C(m,n) continues with
  // op(A)(m,k) op(B)(k,n), k being this replica's rows, after replicas
  // 0..replica-1 of the same round. Replica 0 starts from C when
  // `accumulate`, else from +0; the others always continue. Every replica
  // calls once per round with the same m, n, C and ldc (an Error otherwise).
  // C is complete once the last replica's call returns, or after wait_complete.
  void gemm(int replica, bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda, const float* b,
            int ldb, bool accumulate, float* c, int ldc) {
    require(replica >= 0 && replica < replicas_, "ChainRelay: replica ", replica, ", expected 0 to ", replicas_ - 1);
    shape(m, n, c, ldc);
    const std::uint64_t round = rounds_[static_cast<std::size_t>(replica)].count++;
    const std::uint64_t turn = round * static_cast<std::uint64_t>(replicas_) + static_cast<std::uint64_t>(replica);
    for (int block = 0; block < blocks_; ++block) {
      const int j0 = block / row_blocks_ * kPanel, i0 = block % row_blocks_ * kRows;
      const int width = std::min(kPanel, n - j0), height = std::min(kRows, m - i0);
      std::atomic<std::uint64_t>& passes = passes_[static_cast<std::size_t>(block)].count;
      wait_for(passes, turn, replica, block);
      const std::ptrdiff_t at_i = i0, at_j = j0;
      chain_gemm(trans_a, trans_b, height, width, k, trans_a ? a + at_i : a + at_i * lda, lda,
                 trans_b ? b + at_j * ldb : b + at_j, ldb, accumulate || replica > 0, c + at_i * ldc + at_j, ldc);
      passes.store(turn + 1, std::memory_order_release);
    }
  }

  // Waits until every replica has passed every block of the round that
  // `replica` last called: C is complete.
  void wait_complete(int replica) {
    const std::uint64_t rounds = rounds_[static_cast<std::size_t>(replica)].count;
    for (int block = 0; block < blocks_; ++block)
      wait_for(passes_[static_cast<std::size_t>(block)].count, rounds * static_cast<std::uint64_t>(replicas_), replica,
               block);
  }

 private:
  // A block of C: the rows of a few 12-row tiles by one 32-column panel, so
  // that each chain_gemm call packs its panel of B once for several tiles.
  static constexpr int kRows = 16 * detail::kChainMr, kPanel = 2 * detail::kChainLanes;
  static constexpr const char* kAborted = "a replica failed; the others stopped in a ChainRelay";
  struct alignas(64) Passes {  // how many replica passes the block has had, over every round
    std::atomic<std::uint64_t> count{0};
  };
  struct alignas(64) Round {  // the rounds a replica has begun; its own line
    std::uint64_t count = 0;
  };

  // The blocks, laid out at the first call; C's shape may not change after.
  void shape(int m, int n, const float* c, int ldc) {
    std::call_once(laid_out_, [&] {
      m_ = m;
      n_ = n;
      c_ = c;
      ldc_ = ldc;
      row_blocks_ = std::max(1, (m + kRows - 1) / kRows);
      blocks_ = m > 0 && n > 0 ? row_blocks_ * ((n + kPanel - 1) / kPanel) : 0;
      passes_.reset(new Passes[static_cast<std::size_t>(std::max(blocks_, 1))]);
    });
    require(m == m_ && n == n_ && c == c_ && ldc == ldc_, "ChainRelay: C of ", m, "x", n, " at ",
            static_cast<const void*>(c), " (ldc ", ldc, "), expected the ", m_, "x", n_, " C at ",
            static_cast<const void*>(c_), " (ldc ", ldc_, ") of the first call: one relay per product");
  }

  // Until the block has had `turn` passes: the pass before is replica
  // (turn - 1) mod replicas's.
  void wait_for(const std::atomic<std::uint64_t>& passes, std::uint64_t turn, int replica, int block) {
    const auto done = [&] { return passes.load(std::memory_order_acquire) >= turn; };
    if (done()) return;
    detail::wait_until(done, abort_, kAborted, timeout_, [&] {
      const std::uint64_t before = (turn - 1) % static_cast<std::uint64_t>(replicas_);
      abort(lockstep::detail::concat("ChainRelay: replica ", replica, " (of ", replicas_, ") waited ", timeout_,
                                     " s for replica ", before, " to pass block ", block, " of C (rows from ",
                                     block % row_blocks_ * kRows, ", columns from ", block / row_blocks_ * kPanel,
                                     "); every replica in the relay is released with an Error. If a product really "
                                     "takes this long, raise CommunicationOptions::timeout_seconds "
                                     "(ChainRelay::set_timeout)"));
      abort_.raise(kAborted);
    });
  }

  int replicas_;
  std::unique_ptr<Round[]> rounds_;
  std::once_flag laid_out_;
  int m_ = 0, n_ = 0, ldc_ = 0, row_blocks_ = 1, blocks_ = 0;
  const float* c_ = nullptr;
  std::unique_ptr<Passes[]> passes_;
  detail::AbortSwitch abort_;
  double timeout_ = CommunicationOptions{}.timeout_seconds;
};

}  // namespace lockstep::host
