// host::RowOrderSums: the sums over a batch's rows in the deterministic
// row-order scheme (core/determinism.hpp), for the host replicas of one
// process; a pass's `rows` (layers/pass.hpp). A weight gradient x^T dy, a
// bias gradient and the step's loss and metric sums are each taken over the
// global batch's rows in row order: every replica publishes where its rows
// are, waits for every other's, and computes its own slice of the result
// over all of them, replica after replica, row after row. A weight gradient's
// element is then one chain of the chain GEMM over the whole batch, a bias
// gradient's one float sum from +0 and a statistic one double sum from 0: the
// bits of one replica on the whole batch, for any replica count. A second
// wait keeps the rows alive until every replica has read them (backward
// writes the next layer's gradient over them).
//
// Outside its slice a replica's gradient holds -0.0, which leaves any sum
// exact (x + -0.0 = x for every x, +0 included), so the strategy's
// collective, in whatever order it adds, assembles the slices unchanged. No
// result is ever -0.0: every sum starts from +0.
//
// With no table (every other mode) it is OwnRows: this replica's rows alone.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <string>
#include <vector>

#include "lockstep/backend/host/barrier.hpp"
#include "lockstep/backend/host/chain_gemm_threads.hpp"
#include "lockstep/backend/host/gemm_threads.hpp"
#include "lockstep/core/communication.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/layers/pass.hpp"

namespace lockstep::host {

// What the replicas of a process share: where each one's rows are, and the
// barrier they meet at.
class RowOrderTable {
 public:
  struct Rows {
    const float* a = nullptr;  // x, or the per-row statistics
    const float* b = nullptr;  // dy
    int rows = 0;
    std::size_t stride = 0;  // the statistics' distance from one to the next
  };

  RowOrderTable(int replicas, double timeout_seconds)
      : barrier_(replicas, timeout_seconds),
        rows_{std::vector<Rows>(static_cast<std::size_t>(replicas)), std::vector<Rows>(static_cast<std::size_t>(replicas))},
        published_(static_cast<std::size_t>(replicas), 0) {}

  int replicas() const { return barrier_.parties(); }
  void set_timeout(double seconds) { barrier_.set_timeout(seconds); }
  // Releases every replica waiting with an Error (a replica failed).
  void abort(const std::string& reason = {}) { barrier_.abort(reason); }

  // Publishes replica r's rows and waits until every replica has published.
  // Publications alternate between two tables: a replica may publish its
  // next rows while another still reads this table, never two ahead of it
  // (the next one waits for every replica).
  const std::vector<Rows>& publish(int replica, Rows mine) {
    std::vector<Rows>& table = rows_[published_[static_cast<std::size_t>(replica)]++ % 2];
    table[static_cast<std::size_t>(replica)] = mine;
    wait(replica);
    return table;
  }
  // Waits until every replica has read the others' rows.
  void wait(int replica) {
    barrier_.wait(replica, [](const Stall& stall) {
      return lockstep::detail::concat("deterministic row-order mode: a replica waited for the others' rows: ",
                                      stall.text(), ". ", lockstep::detail::kAfterTimeout);
    });
  }

  // [first, last) of `extent` that replica r computes: whole groups of
  // `grain` (the chain GEMM's tiles) where there are enough of them.
  std::pair<int, int> slice(int extent, int replica, int grain) const {
    const int groups = (extent + grain - 1) / grain, n = replicas();
    const int first = std::min(extent, groups * replica / n * grain);
    const int last = std::min(extent, groups * (replica + 1) / n * grain);
    return {first, last};
  }

 private:
  SpinBarrier barrier_;
  std::vector<Rows> rows_[2];
  std::vector<std::uint64_t> published_;  // each replica's count, written by that replica only
};

class RowOrderSums {
 public:
  static constexpr bool kSpansReplicas = true;

  RowOrderSums() = default;
  RowOrderSums(RowOrderTable* table, int replica) : table_(table), replica_(replica) {}

  // Whether the sums are the row-order scheme's (a table), or this replica's rows'.
  bool global() const { return table_ != nullptr; }

  // dw(in, out) = x^T dy and db(out) = dy's column sums (unless null), over
  // the global batch's rows.
  template <class Ctx>
  void weight_gradients(Ctx& ctx, const float* x, int in, const float* dy, int out, int rows, float* dw,
                        float* db) const {
    if (!table_) return OwnRows{}.weight_gradients(ctx, x, in, dy, out, rows, dw, db);
    const std::vector<RowOrderTable::Rows>& all = table_->publish(replica_, {x, dy, rows, 0});
    const std::size_t width = static_cast<std::size_t>(out);
    // dw's rows (x's columns), in the chain GEMM's 12-row tiles.
    const auto [i0, i1] = table_->slice(in, replica_, 12);
    std::fill(dw, dw + static_cast<std::size_t>(i0) * width, -0.0f);
    std::fill(dw + static_cast<std::size_t>(i1) * width, dw + static_cast<std::size_t>(in) * width, -0.0f);
    bool started = false;
    for (const RowOrderTable::Rows& r : all) {
      if (r.rows == 0) continue;
      chain_gemm_threads(detail::gemm_threads_here(), true, false, i1 - i0, out, r.rows, r.a + i0, in, r.b, out,
                         started, dw + static_cast<std::size_t>(i0) * width, out);
      started = true;
    }
    if (!started) std::fill(dw + static_cast<std::size_t>(i0) * width, dw + static_cast<std::size_t>(i1) * width, 0.0f);
    if (db) {
      const auto [j0, j1] = table_->slice(out, replica_, 16);
      std::fill(db, db + j0, -0.0f);
      std::fill(db + j0, db + j1, 0.0f);
      std::fill(db + j1, db + out, -0.0f);
      for (const RowOrderTable::Rows& r : all)
        for (int row = 0; row < r.rows; ++row) {
          const float* v = r.b + static_cast<std::size_t>(row) * width;
          for (int j = j0; j < j1; ++j) db[j] += v[j];
        }
    }
    table_->wait(replica_);
  }

  // out[i] = the sum over the global batch's rows of per_row[i * stride +
  // row], in double from 0, rounded once: replica 0 takes them all, the
  // others hold -0.0.
  template <class Ctx>
  void sums(Ctx& ctx, const float* per_row, std::size_t stride, int rows, std::size_t count, float* out) const {
    if (!table_) return OwnRows{}.sums(ctx, per_row, stride, rows, count, out);
    const std::vector<RowOrderTable::Rows>& all = table_->publish(replica_, {per_row, nullptr, rows, stride});
    for (std::size_t i = 0; i < count; ++i) {
      if (replica_ != 0) {
        out[i] = -0.0f;
        continue;
      }
      double s = 0;
      for (const RowOrderTable::Rows& r : all)
        for (int row = 0; row < r.rows; ++row) s += r.a[i * r.stride + static_cast<std::size_t>(row)];
      out[i] = static_cast<float>(s);
    }
    // Each replica's statistics are next written in the next step, after the
    // step's collective: no second wait.
  }

  // Per-channel sums over samples (BatchNormalization, synchronised):
  // partial holds values x rows x channels, value k of a sample's channel c
  // at (k * rows + row) * channels + c. Every replica gets out[k * channels
  // + c], the sum over the global batch's samples in row order, in double
  // from 0 and rounded once; returns the global batch's sample count.
  template <class Ctx>
  std::size_t channel_sums(Ctx&, const float* partial, int rows, int values, int channels, float* out) const {
    const std::vector<RowOrderTable::Rows>& all = table_->publish(replica_, {partial, nullptr, rows, 0});
    const std::size_t width = static_cast<std::size_t>(values) * static_cast<std::size_t>(channels);
    thread_local std::vector<double> acc;
    acc.assign(width, 0.0);
    std::size_t samples = 0;
    for (const RowOrderTable::Rows& r : all) {
      const std::size_t n = static_cast<std::size_t>(r.rows), c_count = static_cast<std::size_t>(channels);
      samples += n;
      for (std::size_t row = 0; row < n; ++row)
        for (std::size_t k = 0; k < static_cast<std::size_t>(values); ++k) {
          const float* v = r.a + (k * n + row) * c_count;
          double* a = acc.data() + k * c_count;
          for (std::size_t c = 0; c < c_count; ++c) a[c] += v[c];
        }
    }
    for (std::size_t i = 0; i < width; ++i) out[i] = static_cast<float>(acc[i]);
    table_->wait(replica_);  // the next sum writes over this one's partial sums
    return samples;
  }

  // to = from on replica 0, -0.0 on the others: a sum every replica holds,
  // given once as a gradient for the collective to assemble.
  void give(const float* from, float* to, std::size_t n) const {
    if (!table_ || replica_ == 0)
      std::copy(from, from + n, to);
    else
      std::fill(to, to + n, -0.0f);
  }

 private:
  RowOrderTable* table_ = nullptr;
  int replica_ = 0;
};

}  // namespace lockstep::host
