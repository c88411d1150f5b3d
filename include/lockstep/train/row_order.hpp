// host::RowOrderSums: the sums over a batch's rows in the deterministic
// row-order scheme (core/determinism.hpp), for host replicas; a pass's `rows`
// (layers/pass.hpp). A weight gradient x^T dy, a bias gradient, the step's
// loss and metric sums and SyncBatchNormalization's statistics are each taken
// over the global batch's rows in row order: every replica publishes where
// its rows are, waits for every other's, and computes its own slice of the
// result over all of them, replica after replica, row after row. A weight
// gradient's element is then one chain of the chain GEMM over the whole
// batch, a bias gradient's one float sum from +0 and a statistic one double
// sum from 0: the bits of one replica on the whole batch, for any replica
// count. A second wait keeps the rows alive until every replica has read
// them (backward writes the next layer's gradient over them).
//
// Across processes (MultiWorkerMirroredPolicy<MpiAllReduce>) each process's
// local replica 0 packs its replicas' rows once they are published and
// exchanges them with the other processes (the group's all_gather_bytes);
// every replica then computes its slice, by its global index, over all the
// processes' rows in rank order, which is the global row order.
//
// Outside its slice a replica's gradient holds -0.0, which leaves any sum
// exact (x + -0.0 = x for every x, +0 included), so the strategy's
// collective, in whatever order it adds, assembles the slices unchanged. No
// result is ever -0.0: every sum starts from +0.
//
// With no table (every other mode) it is OwnRows: this replica's rows alone.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "lockstep/backend/host/barrier.hpp"
#include "lockstep/backend/host/chain_gemm_threads.hpp"
#include "lockstep/backend/host/gemm_threads.hpp"
#include "lockstep/core/communication.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/layers/pass.hpp"

namespace lockstep::host {

// What the replicas of a process share: where each one's rows are, the
// barrier they meet at, and the exchange with other processes.
class RowOrderTable {
 public:
  // Values of `width` per row, value (row, j) at at[row * row_stride + j * col_stride].
  struct Matrix {
    const float* at = nullptr;
    std::size_t row_stride = 0, col_stride = 1, width = 0;
    float operator()(std::size_t row, std::size_t j) const { return at[row * row_stride + j * col_stride]; }
  };
  // One replica's (or one process's) rows: x and dy, the statistics, or a
  // sum's partial values per sample.
  struct Rows {
    Matrix a, b;
    int rows = 0;
    // b packed by its replica (chain_pack_b), or null: read by every replica
    // of the process, packed once instead of once by each.
    const float* b_panels = nullptr;
  };
  // Every process's bytes in rank order, on every process (sizes[p]: process p's).
  using Exchange = std::function<void(const std::vector<char>& mine, std::vector<char>& all, std::vector<int>& sizes)>;

  RowOrderTable(int replicas, double timeout_seconds)
      : barrier_(replicas, timeout_seconds),
        rows_{std::vector<Rows>(static_cast<std::size_t>(replicas)), std::vector<Rows>(static_cast<std::size_t>(replicas))},
        published_(static_cast<std::size_t>(replicas), 0),
        panels_(static_cast<std::size_t>(replicas)),
        timeout_(timeout_seconds) {}

  // Several processes: this one's rank of `processes`, and how they exchange
  // rows. The local replicas wait for replica 0's exchange for twice the
  // timeout: the exchange has its own, and its message names the rank.
  void across_processes(int rank, int processes, Exchange exchange) {
    rank_ = rank;
    processes_ = processes;
    exchange_ = std::move(exchange);
    set_timeout(timeout_);
  }

  int replicas() const { return barrier_.parties(); }
  int global_replicas() const { return replicas() * processes_; }
  int global_index(int replica) const { return rank_ * replicas() + replica; }
  void set_timeout(double seconds) {
    timeout_ = seconds;
    barrier_.set_timeout(processes_ > 1 ? 2 * seconds : seconds);
  }
  // Releases every replica waiting with an Error (a replica failed).
  void abort(const std::string& reason = {}) { barrier_.abort(reason); }

  // Publishes replica r's rows and waits until every replica of the job has
  // published; returns every replica's (or process's) rows in global row
  // order. Publications alternate between two tables: a replica may publish
  // its next rows while another still reads this table, never two ahead of
  // it (the next one waits for every replica).
  const std::vector<Rows>& publish(int replica, Rows mine) {
    std::vector<Rows>& table = rows_[published_[static_cast<std::size_t>(replica)]++ % 2];
    table[static_cast<std::size_t>(replica)] = mine;
    wait(replica);
    if (processes_ == 1) return table;
    // Replica 0 (the calling thread, which MPI expects) exchanges; the others
    // wait for it. What they read was written before this second wait, and is
    // next written after every replica has met again.
    if (replica == 0) exchange(table);
    wait(replica);
    return gathered_rows_;
  }
  // Room for `floats` of replica r's next publication (its b_panels), from a
  // 64-byte boundary. Two per replica, alternating as the tables do: the
  // next publication but one is written after every replica has met at the
  // next, so after every replica has read this one.
  float* panels(int replica, std::size_t floats) {
    const std::size_t r = static_cast<std::size_t>(replica);
    return detail::chain_aligned(panels_[r][published_[r] % 2], floats);
  }

  // Whether the replicas read each other's rows (one process), rather than
  // replica 0's copies of every process's.
  bool local_rows_read() const { return processes_ == 1; }
  // Waits until every replica has read the others' rows.
  void wait(int replica) {
    barrier_.wait(replica, [](const Stall& stall) {
      return lockstep::detail::concat("deterministic row-order mode: a replica waited for the others' rows: ",
                                      stall.text(), ". ", lockstep::detail::kAfterTimeout);
    });
  }

  // [first, last) of `extent` that replica r (of this process) computes:
  // whole groups of `grain` (the chain GEMM's tiles) where there are enough.
  std::pair<int, int> slice(int extent, int replica, int grain) const {
    const int groups = (extent + grain - 1) / grain, n = global_replicas(), g = global_index(replica);
    const int first = std::min(extent, groups * g / n * grain);
    const int last = std::min(extent, groups * (g + 1) / n * grain);
    return {first, last};
  }

 private:
  // Packs this process's rows (its replicas' in order: [rows][a's width]
  // then [rows][b's width], after the row count), exchanges them, and
  // unpacks every process's into gathered_rows_ in rank order.
  void exchange(const std::vector<Rows>& local) {
    std::int64_t rows = 0;
    for (const Rows& r : local) rows += r.rows;
    const std::size_t a_width = local[0].a.width, b_width = local[0].b.at ? local[0].b.width : 0;
    const std::size_t values = static_cast<std::size_t>(rows) * (a_width + b_width);
    packed_.resize(sizeof(std::int64_t) + values * sizeof(float));
    std::memcpy(packed_.data(), &rows, sizeof rows);
    float* out = reinterpret_cast<float*>(packed_.data() + sizeof rows);
    for (const Rows& r : local)
      for (std::size_t row = 0; row < static_cast<std::size_t>(r.rows); ++row)
        for (std::size_t j = 0; j < a_width; ++j) *out++ = r.a(row, j);
    for (const Rows& r : local)
      for (std::size_t row = 0; row < static_cast<std::size_t>(r.rows); ++row)
        for (std::size_t j = 0; j < b_width; ++j) *out++ = r.b(row, j);
    exchange_(packed_, gathered_, sizes_);
    gathered_rows_.assign(static_cast<std::size_t>(processes_), Rows{});
    std::size_t at = 0;
    for (std::size_t p = 0; p < gathered_rows_.size(); ++p) {
      std::int64_t n = 0;
      std::memcpy(&n, gathered_.data() + at, sizeof n);
      const float* values_at = reinterpret_cast<const float*>(gathered_.data() + at + sizeof n);
      Rows& r = gathered_rows_[p];
      r.rows = static_cast<int>(n);
      r.a = {values_at, a_width, 1, a_width};
      if (b_width) r.b = {values_at + static_cast<std::size_t>(n) * a_width, b_width, 1, b_width};
      at += static_cast<std::size_t>(sizes_[p]);
    }
  }

  SpinBarrier barrier_;
  std::vector<Rows> rows_[2];
  std::vector<std::uint64_t> published_;  // each replica's count, written by that replica only
  std::vector<std::array<std::vector<float>, 2>> panels_;  // each replica's, written by that replica only
  double timeout_;
  int rank_ = 0, processes_ = 1;
  Exchange exchange_;
  std::vector<char> packed_, gathered_;  // replica 0's: floats after an 8-byte count, aligned by the allocator
  std::vector<int> sizes_;
  std::vector<Rows> gathered_rows_;  // every process's rows, in rank order
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
  void weight_gradients(Ctx& ctx, const float* x, int in, const float* dy, int out, int rows, float* dw, float* db,
                        bool rows_reused = true) const {
    if (!table_) return OwnRows{}.weight_gradients(ctx, x, in, dy, out, rows, dw, db);
    const std::size_t width = static_cast<std::size_t>(out), inputs = static_cast<std::size_t>(in);
    RowOrderTable::Rows mine{{x, inputs, 1, inputs}, {dy, width, 1, width}, rows};
    // dy as panels, packed here while it is in this core's cache, once for
    // every replica's product (each would pack all of them again). Not for
    // outputs narrower than a panel, whose product runs transposed, nor
    // across processes, where every replica reads replica 0's copies.
    if (out >= detail::kChainPanel && table_->local_rows_read()) {
      float* panels = table_->panels(replica_, chain_packed_size(rows, out));
      chain_pack_b(false, rows, out, dy, out, panels);
      mine.b_panels = panels;
    }
    const std::vector<RowOrderTable::Rows>& all = table_->publish(replica_, mine);
    // dw's rows (x's columns), in the chain GEMM's row tiles.
    const auto [i0, i1] = table_->slice(in, replica_, detail::kChainMr);
    std::fill(dw, dw + static_cast<std::size_t>(i0) * width, -0.0f);
    std::fill(dw + static_cast<std::size_t>(i1) * width, dw + inputs * width, -0.0f);
    const int threads = detail::gemm_threads_here();
    float* const band = dw + static_cast<std::size_t>(i0) * width;
    bool started = false;
    for (const RowOrderTable::Rows& r : all) {
      if (r.rows == 0) continue;
      const float* a = r.a.at + i0;
      const int lda = static_cast<int>(r.a.row_stride);
      if (r.b_panels)
        chain_gemm_threads(threads, true, i1 - i0, out, r.rows, a, lda, ChainPackedB{r.b_panels, r.rows}, started,
                           band, out);
      else
        chain_gemm_threads(threads, true, false, i1 - i0, out, r.rows, a, lda, r.b.at,
                           static_cast<int>(r.b.row_stride), started, band, out);
      started = true;
    }
    if (!started) std::fill(band, dw + static_cast<std::size_t>(i1) * width, 0.0f);
    if (db) {
      // db(j) = the chain fma(1, dy(row, j), ...) from +0 over the rows: the
      // float sum dy(0, j) + dy(1, j) + ... in row order (fma(1, v, c) is c +
      // v rounded once), on the chain GEMM's vectors and dy's panels.
      const auto [j0, j1] = table_->slice(out, replica_, detail::kChainPanel);
      std::fill(db, db + j0, -0.0f);
      std::fill(db + j0, db + j1, 0.0f);
      std::fill(db + j1, db + out, -0.0f);
      thread_local std::vector<float> ones;
      bool summed = false;
      for (const RowOrderTable::Rows& r : all) {
        if (r.rows == 0 || j1 == j0) continue;
        if (ones.size() < static_cast<std::size_t>(r.rows)) ones.assign(static_cast<std::size_t>(r.rows), 1.0f);
        if (r.b_panels)
          chain_gemm_packed(false, 1, j1 - j0, r.rows, ones.data(), r.rows,
                            ChainPackedB{r.b_panels, r.rows}.from_column(j0), summed, db + j0, out);
        else
          chain_gemm(false, false, 1, j1 - j0, r.rows, ones.data(), r.rows, r.b.at + j0,
                     static_cast<int>(r.b.row_stride), summed, db + j0, out);
        summed = true;
      }
    }
    // Keep the rows until every replica has read them where backward goes on
    // to write over them; across processes everyone read replica 0's copies.
    if (rows_reused && table_->local_rows_read()) table_->wait(replica_);
  }

  // out[i] = the sum over the global batch's rows of per_row[i * stride +
  // row], in double from 0, rounded once: the job's first replica takes them
  // all, the others hold -0.0.
  template <class Ctx>
  void sums(Ctx& ctx, const float* per_row, std::size_t stride, int rows, std::size_t count, float* out) const {
    if (!table_) return OwnRows{}.sums(ctx, per_row, stride, rows, count, out);
    const std::vector<RowOrderTable::Rows>& all = table_->publish(replica_, {{per_row, 1, stride, count}, {}, rows});
    const bool first = table_->global_index(replica_) == 0;
    for (std::size_t i = 0; i < count; ++i) {
      double s = 0;
      if (first)
        for (const RowOrderTable::Rows& r : all)
          for (std::size_t row = 0; row < static_cast<std::size_t>(r.rows); ++row) s += r.a(row, i);
      out[i] = first ? static_cast<float>(s) : -0.0f;
    }
    // Each replica's statistics are next written in the next step, after the
    // step's collective: no second wait.
  }

  // Per-channel sums over samples (BatchNormalization, synchronised):
  // partial holds values (1 or 2) x rows x channels, value k of a sample's
  // channel c at (k * rows + row) * channels + c. Every replica gets out[k *
  // channels + c], the sum over the global batch's samples in row order, in
  // double from 0 and rounded once; returns the global batch's sample count.
  template <class Ctx>
  std::size_t channel_sums(Ctx&, const float* partial, int rows, int values, int channels, float* out) const {
    const std::size_t c_count = static_cast<std::size_t>(channels), n = static_cast<std::size_t>(rows);
    RowOrderTable::Rows mine{{partial, c_count, 1, c_count}, {}, rows};
    if (values == 2) mine.b = {partial + n * c_count, c_count, 1, c_count};
    const std::vector<RowOrderTable::Rows>& all = table_->publish(replica_, mine);
    thread_local std::vector<double> acc;
    acc.assign(static_cast<std::size_t>(values) * c_count, 0.0);
    std::size_t samples = 0;
    for (const RowOrderTable::Rows& r : all) {
      samples += static_cast<std::size_t>(r.rows);
      for (std::size_t row = 0; row < static_cast<std::size_t>(r.rows); ++row)
        for (int k = 0; k < values; ++k) {
          const RowOrderTable::Matrix& m = k == 0 ? r.a : r.b;
          const float* v = m.at + row * m.row_stride;
          double* a = acc.data() + static_cast<std::size_t>(k) * c_count;
          for (std::size_t c = 0; c < c_count; ++c) a[c] += v[c];
        }
    }
    for (std::size_t i = 0; i < acc.size(); ++i) out[i] = static_cast<float>(acc[i]);
    // The next sum writes over this one's partial sums (copied already across processes).
    if (table_->local_rows_read()) table_->wait(replica_);
    return samples;
  }

  // to = from on the job's first replica, -0.0 on the others: a sum every
  // replica holds, given once as a gradient for the collective to assemble.
  void give(const float* from, float* to, std::size_t n) const {
    if (!table_ || table_->global_index(replica_) == 0)
      std::copy(from, from + n, to);
    else
      std::fill(to, to + n, -0.0f);
  }

 private:
  RowOrderTable* table_ = nullptr;
  int replica_ = 0;
};

}  // namespace lockstep::host
