// 2-D convolution through oneDNN's primitives (LOCKSTEP_HAVE_ONEDNN; float):
// forward (bias and ReLU fused as a post-op), backward-data and
// backward-weights (with the bias gradient), on the layers' NHWC tensors and
// Keras' (KH, KW, Cin, Cout) kernel (oneDNN's nhwc and hwio tags).
//
// Each shape's primitives are made once and kept: per thread, since a host
// replica is one thread for the trainer's life while its host::Context is
// made anew for every step. The key is the geometry, the rows, whether there
// is a bias and a fused ReLU, and the thread count oneDNN was given (the same
// policy as backend/host/gemm.hpp: each replica thread sets OpenMP's count to
// cores / replicas before it creates or runs a primitive, so replicas never
// oversubscribe the cores). The primitives compute in the formats oneDNN
// prefers (format_tag::any: blocked on AVX2 and AVX-512); the reorders
// between those and NHWC are primitives of the same entry, and their buffers,
// like the scratchpad (user mode, one per thread), are allocated when the
// entry is made, never per call.
#pragma once

#if defined(LOCKSTEP_HAVE_ONEDNN)

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>

#include "lockstep/backend/host/conv.hpp"
#include "lockstep/backend/host/gemm.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/ops/activations.hpp"
#include "lockstep/ops/window2d.hpp"

namespace lockstep::host::onednn {

namespace detail {

using dnnl::memory;
using tag = dnnl::memory::format_tag;

struct ConvKey {
  Window2D g;
  int rows;
  bool bias;
  bool relu;
  int threads;
  bool operator==(const ConvKey& o) const {
    const Window2D& a = g;
    const Window2D& b = o.g;
    return a.in_h == b.in_h && a.in_w == b.in_w && a.in_c == b.in_c && a.out_h == b.out_h && a.out_w == b.out_w &&
           a.out_c == b.out_c && a.kernel_h == b.kernel_h && a.kernel_w == b.kernel_w && a.stride_h == b.stride_h &&
           a.stride_w == b.stride_w && a.pad_top == b.pad_top && a.pad_left == b.pad_left &&
           a.pad_bottom == b.pad_bottom && a.pad_right == b.pad_right && rows == o.rows && bias == o.bias &&
           relu == o.relu && threads == o.threads;
  }
};
struct ConvKeyHash {
  std::size_t operator()(const ConvKey& k) const {
    const int parts[] = {k.g.in_h,     k.g.in_w,     k.g.in_c,     k.g.out_h,   k.g.out_w,      k.g.out_c,
                         k.g.kernel_h, k.g.kernel_w, k.g.stride_h, k.g.stride_w, k.g.pad_top,   k.g.pad_left,
                         k.g.pad_bottom, k.g.pad_right, k.rows,    k.bias ? 1 : 0, k.relu ? 1 : 0, k.threads};
    std::uint64_t h = 14695981039346656037ull;  // FNV-1a
    for (int v : parts) h = (h ^ static_cast<std::uint32_t>(v)) * 1099511628211ull;
    return static_cast<std::size_t>(h);
  }
};

// The calling thread's CPU engine and stream.
struct Device {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
};
inline Device& device() {
  thread_local Device d;
  return d;
}

// A tensor as the layers hold it (user) and as a primitive wants it: when the
// two layouts differ, `inner` is a buffer of the entry and `to_inner` /
// `to_user` the reorders between them.
struct Tensor {
  memory user, inner;
  dnnl::reorder to_inner, to_user;
  bool reordered = false;
  Tensor() = default;
  Tensor(const memory::desc& user_desc, const memory::desc& want, const dnnl::engine& e, bool in, bool out)
      : user(user_desc, e, DNNL_MEMORY_NONE) {
    reordered = !(want == user_desc);
    if (!reordered) {
      inner = user;
      return;
    }
    inner = memory(want, e);  // allocated once, with the entry
    if (in) to_inner = dnnl::reorder(user, inner);
    if (out) to_user = dnnl::reorder(inner, user);
  }
  // The memory to give the primitive, with the user's data reordered into it.
  void in(const void* data, dnnl::stream& s) {
    user.set_data_handle(const_cast<void*>(data));  // oneDNN's handle is non-const; inputs are only read
    if (reordered) to_inner.execute(s, user, inner);
  }
  // The primitive writes `inner`; finish() moves it to user data `data`.
  void out(void* data) { user.set_data_handle(data); }
  void finish(dnnl::stream& s) {
    if (reordered) to_user.execute(s, inner, user);
  }
};

struct ConvEntry {
  memory::desc src_d, wei_d, dst_d, bias_d;
  memory::dims strides, pad_l, pad_r;
  // forward
  dnnl::convolution_forward::primitive_desc fwd_pd;
  dnnl::convolution_forward fwd;
  Tensor src, wei, dst;
  memory bias, fwd_scratch;
  std::unordered_map<int, memory> fwd_args;  // the same memory objects every call: only their handles change
  // backward, made on the first backward call
  bool has_backward = false;
  dnnl::convolution_backward_weights::primitive_desc bww_pd;
  dnnl::convolution_backward_weights bww;
  Tensor bww_src, bww_ddst, bww_dwei;
  memory bww_dbias, bww_scratch;
  std::unordered_map<int, memory> bww_args;
  bool has_backward_data = false;
  dnnl::convolution_backward_data::primitive_desc bwd_pd;
  dnnl::convolution_backward_data bwd;
  Tensor bwd_ddst, bwd_wei, bwd_dsrc;
  memory bwd_scratch;
  bool bwd_shares_ddst = false;  // diff_dst in backward-weights' layout: its reorder serves both
  std::unordered_map<int, memory> bwd_args;
};

inline dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// Points `scratch` at the thread's scratchpad, at least as large as pd asks.
template <class PD>
void scratchpad(const PD& pd, memory& scratch) {
  scratch.set_data_handle(host::detail::thread_scratch<unsigned char>(pd.scratchpad_desc().get_size() + 64));
}

inline ConvEntry& entry(const ConvKey& key) {
  thread_local std::unordered_map<ConvKey, std::unique_ptr<ConvEntry>, ConvKeyHash> cache;
  auto it = cache.find(key);
  if (it != cache.end()) return *it->second;
  if (cache.size() >= 64) cache.clear();  // a fit uses a handful of shapes; bound what other batch sizes add
  const Window2D& g = key.g;
  const dnnl::engine& e = device().engine;
  auto made = std::make_unique<ConvEntry>();
  ConvEntry& c = *made;
  const memory::dim n = key.rows;
  const memory::dims src{n, g.in_c, g.in_h, g.in_w}, wei{g.out_c, g.in_c, g.kernel_h, g.kernel_w},
      dst{n, g.out_c, g.out_h, g.out_w};
  c.src_d = memory::desc(src, memory::data_type::f32, tag::nhwc);
  c.wei_d = memory::desc(wei, memory::data_type::f32, tag::hwio);
  c.dst_d = memory::desc(dst, memory::data_type::f32, tag::nhwc);
  if (key.bias) c.bias_d = memory::desc({g.out_c}, memory::data_type::f32, tag::x);
  c.strides = {g.stride_h, g.stride_w};
  c.pad_l = {g.pad_top, g.pad_left};
  c.pad_r = {g.pad_bottom, g.pad_right};
  const memory::desc src_any(src, memory::data_type::f32, tag::any), wei_any(wei, memory::data_type::f32, tag::any),
      dst_any(dst, memory::data_type::f32, tag::any);
  dnnl::primitive_attr attr = user_scratchpad();
  if (key.relu) {
    dnnl::post_ops ops;
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
    attr.set_post_ops(ops);
  }
  const dnnl::convolution_forward::desc fd =
      key.bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                                 dnnl::algorithm::convolution_direct, src_any, wei_any, c.bias_d,
                                                 dst_any, c.strides, c.pad_l, c.pad_r)
               : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                                 dnnl::algorithm::convolution_direct, src_any, wei_any, dst_any,
                                                 c.strides, c.pad_l, c.pad_r);
  c.fwd_pd = dnnl::convolution_forward::primitive_desc(fd, attr, e);
  c.fwd = dnnl::convolution_forward(c.fwd_pd);
  c.src = Tensor(c.src_d, c.fwd_pd.src_desc(), e, true, false);
  c.wei = Tensor(c.wei_d, c.fwd_pd.weights_desc(), e, true, false);
  c.dst = Tensor(c.dst_d, c.fwd_pd.dst_desc(), e, false, true);
  if (key.bias) c.bias = memory(c.bias_d, e, DNNL_MEMORY_NONE);
  c.fwd_scratch = memory(c.fwd_pd.scratchpad_desc(), e, DNNL_MEMORY_NONE);
  c.fwd_args = {{DNNL_ARG_SRC, c.src.inner},
                {DNNL_ARG_WEIGHTS, c.wei.inner},
                {DNNL_ARG_DST, c.dst.inner},
                {DNNL_ARG_SCRATCHPAD, c.fwd_scratch}};
  if (key.bias) c.fwd_args.emplace(DNNL_ARG_BIAS, c.bias);
  return *cache.emplace(key, std::move(made)).first->second;
}

inline void make_backward(ConvEntry& c, const ConvKey& key, bool data) {
  const dnnl::engine& e = device().engine;
  const memory::desc src_any(c.src_d.dims(), memory::data_type::f32, tag::any),
      wei_any(c.wei_d.dims(), memory::data_type::f32, tag::any),
      dst_any(c.dst_d.dims(), memory::data_type::f32, tag::any);
  const dnnl::primitive_attr attr = user_scratchpad();
  if (!c.has_backward) {
    const dnnl::convolution_backward_weights::desc wd =
        key.bias ? dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src_any, wei_any,
                                                            c.bias_d, dst_any, c.strides, c.pad_l, c.pad_r)
                 : dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src_any, wei_any,
                                                            dst_any, c.strides, c.pad_l, c.pad_r);
    c.bww_pd = dnnl::convolution_backward_weights::primitive_desc(wd, attr, e, c.fwd_pd);
    c.bww = dnnl::convolution_backward_weights(c.bww_pd);
    c.bww_src = Tensor(c.src_d, c.bww_pd.src_desc(), e, true, false);
    c.bww_ddst = Tensor(c.dst_d, c.bww_pd.diff_dst_desc(), e, true, false);
    c.bww_dwei = Tensor(c.wei_d, c.bww_pd.diff_weights_desc(), e, false, true);
    if (key.bias) c.bww_dbias = memory(c.bias_d, e, DNNL_MEMORY_NONE);
    c.bww_scratch = memory(c.bww_pd.scratchpad_desc(), e, DNNL_MEMORY_NONE);
    c.bww_args = {{DNNL_ARG_SRC, c.bww_src.inner},
                  {DNNL_ARG_DIFF_DST, c.bww_ddst.inner},
                  {DNNL_ARG_DIFF_WEIGHTS, c.bww_dwei.inner},
                  {DNNL_ARG_SCRATCHPAD, c.bww_scratch}};
    if (key.bias) c.bww_args.emplace(DNNL_ARG_DIFF_BIAS, c.bww_dbias);
    c.has_backward = true;
  }
  if (data && !c.has_backward_data) {
    const dnnl::convolution_backward_data::desc dd(dnnl::algorithm::convolution_direct, src_any, wei_any, dst_any,
                                                   c.strides, c.pad_l, c.pad_r);
    c.bwd_pd = dnnl::convolution_backward_data::primitive_desc(dd, attr, e, c.fwd_pd);
    c.bwd = dnnl::convolution_backward_data(c.bwd_pd);
    c.bwd_ddst = Tensor(c.dst_d, c.bwd_pd.diff_dst_desc(), e, true, false);
    c.bwd_wei = Tensor(c.wei_d, c.bwd_pd.weights_desc(), e, true, false);
    c.bwd_dsrc = Tensor(c.src_d, c.bwd_pd.diff_src_desc(), e, false, true);
    c.bwd_scratch = memory(c.bwd_pd.scratchpad_desc(), e, DNNL_MEMORY_NONE);
    c.bwd_shares_ddst = c.bwd_pd.diff_dst_desc() == c.bww_pd.diff_dst_desc();
    c.bwd_args = {{DNNL_ARG_DIFF_DST, c.bwd_shares_ddst ? c.bww_ddst.inner : c.bwd_ddst.inner},
                  {DNNL_ARG_WEIGHTS, c.bwd_wei.inner},
                  {DNNL_ARG_DIFF_SRC, c.bwd_dsrc.inner},
                  {DNNL_ARG_SCRATCHPAD, c.bwd_scratch}};
    c.has_backward_data = true;
  }
}

[[noreturn]] inline void rethrow(const dnnl::error& error, const char* what, const Window2D& g, int rows) {
  fail(what, " (oneDNN): ", error.what(), " (status ", static_cast<int>(error.status), ") for ", rows,
       " rows of ", g.in_h, "x", g.in_w, "x", g.in_c, " -> ", g.out_h, "x", g.out_w, "x", g.out_c, " with a ",
       g.kernel_h, "x", g.kernel_w, " kernel; expected a shape oneDNN supports");
}

}  // namespace detail

// y(rows, OH, OW, Cout) = Act(conv(x, kernel) + bias); bias may be null. ReLU
// is fused into the primitive; another activation runs after it.
template <class Act>
void conv2d_forward(const Window2D& g, const float* x, const float* kernel, const float* bias, float* y, int rows) {
  host::detail::check_window(g, "conv2d_forward", rows);
  if (rows == 0) return;
  constexpr bool kRelu = std::is_same_v<Act, Relu>;
  host::detail::apply_gemm_threads();
  const detail::ConvKey key{g, rows, bias != nullptr, kRelu, host::detail::gemm_threads_here()};
  try {
    detail::ConvEntry& c = detail::entry(key);
    dnnl::stream& s = detail::device().stream;
    c.src.in(x, s);
    c.wei.in(kernel, s);
    c.dst.out(y);
    detail::scratchpad(c.fwd_pd, c.fwd_scratch);
    if (bias) c.bias.set_data_handle(const_cast<float*>(bias));  // read only
    c.fwd.execute(s, c.fwd_args);
    c.dst.finish(s);
    s.wait();
  } catch (const dnnl::error& e) {
    detail::rethrow(e, "conv2d_forward", g, rows);
  }
  if constexpr (!kRelu && !Act::kIdentity)
    host::detail::bias_activation<Act>(y, static_cast<const float*>(nullptr),
                                       static_cast<std::size_t>(rows) * g.out_size() / static_cast<std::size_t>(g.out_c),
                                       static_cast<std::size_t>(g.out_c));
}

// Given dy = dLoss/d(conv + bias), writes dkernel, dbias unless null and dx
// unless null. (Act's derivative has no backward post-op in oneDNN: a fused
// activation is undone by the caller first, host::detail::activation_backward.)
inline void conv2d_backward(const Window2D& g, const float* x, const float* kernel, const float* dy, float* dx,
                            float* dkernel, float* dbias, int rows) {
  host::detail::check_window(g, "conv2d_backward", rows);
  if (rows == 0) {
    std::fill(dkernel, dkernel + g.kernel_size(), 0.0f);
    if (dbias) std::fill(dbias, dbias + g.out_c, 0.0f);
    return;
  }
  host::detail::apply_gemm_threads();
  // The fused ReLU is not part of the backward primitives: the key of a
  // forward without it names the same backward.
  const detail::ConvKey key{g, rows, dbias != nullptr, false, host::detail::gemm_threads_here()};
  try {
    detail::ConvEntry& c = detail::entry(key);
    detail::make_backward(c, key, dx != nullptr);
    dnnl::stream& s = detail::device().stream;
    c.bww_src.in(x, s);
    c.bww_ddst.in(dy, s);
    c.bww_dwei.out(dkernel);
    detail::scratchpad(c.bww_pd, c.bww_scratch);
    if (dbias) c.bww_dbias.set_data_handle(dbias);
    c.bww.execute(s, c.bww_args);
    c.bww_dwei.finish(s);
    if (dx) {
      if (!c.bwd_shares_ddst) c.bwd_ddst.in(dy, s);
      c.bwd_wei.in(kernel, s);
      c.bwd_dsrc.out(dx);
      detail::scratchpad(c.bwd_pd, c.bwd_scratch);
      c.bwd.execute(s, c.bwd_args);
      c.bwd_dsrc.finish(s);
    }
    s.wait();
  } catch (const dnnl::error& e) {
    detail::rethrow(e, "conv2d_backward", g, rows);
  }
}

}  // namespace lockstep::host::onednn

#endif  // LOCKSTEP_HAVE_ONEDNN
