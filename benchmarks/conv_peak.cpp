// oneDNN's convolution speed on this machine for the CNN's own layers (Keras'
// simple MNIST convnet, as train_throughput --model cnn): forward, backward-data
// and backward-weights at several batches, on 1 and 2 threads, in the memory
// format oneDNN prefers. It bounds what lockstep's CNN can reach here: a step
// cannot be faster than its convolutions run by oneDNN alone.
// usage: conv_peak   (built where oneDNN is found; key=value lines last)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include <lockstep/backend/host/gemm.hpp>  // set_blas_threads: oneDNN's thread count, as for GEMMs
#include <lockstep/core/error.hpp>

namespace {

using dnnl::memory;

// One 3x3 Valid convolution of the CNN, stride 1, NHWC in lockstep (oneDNN
// describes it as NCHW dims and picks its own layout).
struct Layer {
  const char* name;
  memory::dim in_h, in_w, in_c, out_c, kernel;
  bool input_grad;  // the first layer's input gradient is never computed
  memory::dim out_h() const { return in_h - kernel + 1; }
  memory::dim out_w() const { return in_w - kernel + 1; }
  // 2 FLOPs per multiply-add; forward, backward-data and backward-weights do as many.
  double flops_per_sample() const {
    return 2.0 * static_cast<double>(out_h() * out_w() * out_c * kernel * kernel * in_c);
  }
};
// 28x28x1 -> Conv2D 32 -> 26x26x32 -> MaxPooling2D 2 -> 13x13x32 -> Conv2D 64 -> 11x11x64
constexpr Layer kLayers[] = {{"conv1", 28, 28, 1, 32, 3, false}, {"conv2", 13, 13, 32, 64, 3, true}};
// The rest of the model, Dense(1600 -> 10) after the second pooling: its three GEMMs.
constexpr double kDenseTrainFlopsPerSample = 3 * 2.0 * 1600 * 10;

enum class Pass { kForward, kBackwardData, kBackwardWeights };
constexpr Pass kPasses[] = {Pass::kForward, Pass::kBackwardData, Pass::kBackwardWeights};
const char* name_of(Pass pass) {
  return pass == Pass::kForward ? "forward" : pass == Pass::kBackwardData ? "backward_data" : "backward_weights";
}

memory filled(const memory::desc& desc, const dnnl::engine& engine) {
  memory m(desc, engine);
  float* p = static_cast<float*>(m.get_data_handle());
  std::fill(p, p + desc.get_size() / sizeof(float), 0.01f);  // small, never denormal
  return m;
}

// Seconds per call, best of five timed groups of about 50 ms each, after one
// untimed call (JIT, first touch). Short groups, and the best of them: on a
// machine shared with other work, the best is the one least disturbed.
double seconds_per_call(const dnnl::primitive& primitive, const std::unordered_map<int, memory>& args,
                        dnnl::stream& stream) {
  auto elapsed = [](std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  primitive.execute(stream, args);
  stream.wait();
  auto t0 = std::chrono::steady_clock::now();
  primitive.execute(stream, args);
  stream.wait();
  double best = elapsed(t0);
  const int reps = std::max(1, static_cast<int>(0.05 / best));
  for (int trial = 0; trial < 5; ++trial) {
    t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) primitive.execute(stream, args);
    stream.wait();
    best = std::min(best, elapsed(t0) / reps);
  }
  return best;
}

struct Best {
  double seconds = 1e30;
  std::string impl;  // oneDNN's name of the fastest implementation, e.g. jit:avx2
  int tried = 0;
};

// Times every implementation oneDNN offers for the descriptor, each in the
// layout it chose for the format_tag::any tensors; oneDNN's first choice is
// not always the fastest (a 1-channel input is a poor fit for its direct
// kernels). The reference loops are left out: orders of magnitude slower.
template <class Primitive, class PrimitiveDesc, class ArgsOf>
void time_implementations(PrimitiveDesc pd, ArgsOf args_of, dnnl::stream& stream, Best& best) {
  do {
    const std::string impl = pd.impl_info_str();
    if (impl.rfind("ref", 0) == 0) continue;
    const double s = seconds_per_call(Primitive(pd), args_of(pd), stream);
    ++best.tried;
    if (s < best.seconds) best = {s, impl, best.tried};
  } while (pd.next_impl());
}

// One pass of one layer as a layer would run it: forward_training with bias
// and the ReLU fused, the backward passes hinted by that forward, every
// activation and weight tensor in format_tag::any (oneDNN's best layout).
Best measure(const Layer& l, Pass pass, memory::dim batch, const dnnl::engine& engine, dnnl::stream& stream) {
  using tag = memory::format_tag;
  namespace d = dnnl;
  const auto f32 = memory::data_type::f32;
  const memory::desc src({batch, l.in_c, l.in_h, l.in_w}, f32, tag::any);
  const memory::desc weights({l.out_c, l.in_c, l.kernel, l.kernel}, f32, tag::any);
  const memory::desc bias({l.out_c}, f32, tag::x);
  const memory::desc dst({batch, l.out_c, l.out_h(), l.out_w()}, f32, tag::any);
  const memory::dims strides{1, 1}, padding{0, 0};
  const auto algo = d::algorithm::convolution_auto;  // direct or Winograd, whichever oneDNN rates faster

  d::post_ops relu;
  relu.append_eltwise(1.0f, d::algorithm::eltwise_relu, 0.0f, 0.0f);
  d::primitive_attr attr;
  attr.set_post_ops(relu);
  const d::convolution_forward::primitive_desc forward(
      {d::prop_kind::forward_training, algo, src, weights, bias, dst, strides, padding, padding}, attr, engine);
  Best best;
  if (pass == Pass::kForward) {
    time_implementations<d::convolution_forward>(
        forward,
        [&](const d::convolution_forward::primitive_desc& pd) {
          return std::unordered_map<int, memory>{{DNNL_ARG_SRC, filled(pd.src_desc(), engine)},
                                                 {DNNL_ARG_WEIGHTS, filled(pd.weights_desc(), engine)},
                                                 {DNNL_ARG_BIAS, filled(pd.bias_desc(), engine)},
                                                 {DNNL_ARG_DST, filled(pd.dst_desc(), engine)}};
        },
        stream, best);
  } else if (pass == Pass::kBackwardData) {
    time_implementations<d::convolution_backward_data>(
        d::convolution_backward_data::primitive_desc({algo, src, weights, dst, strides, padding, padding}, engine,
                                                     forward),
        [&](const d::convolution_backward_data::primitive_desc& pd) {
          return std::unordered_map<int, memory>{{DNNL_ARG_DIFF_DST, filled(pd.diff_dst_desc(), engine)},
                                                 {DNNL_ARG_WEIGHTS, filled(pd.weights_desc(), engine)},
                                                 {DNNL_ARG_DIFF_SRC, filled(pd.diff_src_desc(), engine)}};
        },
        stream, best);
  } else {
    time_implementations<d::convolution_backward_weights>(
        d::convolution_backward_weights::primitive_desc({algo, src, weights, bias, dst, strides, padding, padding},
                                                        engine, forward),
        [&](const d::convolution_backward_weights::primitive_desc& pd) {
          return std::unordered_map<int, memory>{{DNNL_ARG_SRC, filled(pd.src_desc(), engine)},
                                                 {DNNL_ARG_DIFF_DST, filled(pd.diff_dst_desc(), engine)},
                                                 {DNNL_ARG_DIFF_WEIGHTS, filled(pd.diff_weights_desc(), engine)},
                                                 {DNNL_ARG_DIFF_BIAS, filled(pd.diff_bias_desc(), engine)}};
        },
        stream, best);
  }
  lockstep::require(best.tried > 0, "conv_peak: oneDNN offers no implementation but its reference loops for ", l.name, " ",
          name_of(pass), " at batch ", batch, "; expected a JIT or GEMM-based one");
  return best;
}

constexpr memory::dim kBatches[] = {64, 128, 512, 1024};
constexpr int kThreads[] = {1, 2};
// The global batches the comparison runs; each also as two replicas of half of it.
constexpr memory::dim kGlobalBatches[] = {128, 1024};

struct Key {
  std::size_t layer;
  Pass pass;
  memory::dim batch;
  int threads;
  bool operator==(const Key& o) const {
    return layer == o.layer && pass == o.pass && batch == o.batch && threads == o.threads;
  }
};

}  // namespace

int main(int argc, char** argv) {
  using namespace lockstep;
  try {
    if (argc > 1) fail("conv_peak takes no arguments; got '", argv[1], "'");
    dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    dnnl::stream stream(engine);
    const dnnl_version_t* v = dnnl::version();
    std::printf("onednn=%d.%d.%d memory_format=any algorithm=convolution_auto forward=bias+relu\n", v->major,
                v->minor, v->patch);

    std::vector<std::pair<Key, double>> seconds;  // per call
    auto seconds_of = [&](const Key& k) -> double {
      for (const auto& [key, s] : seconds)
        if (key == k) return s;
      fail("conv_peak: no measurement of ", kLayers[k.layer].name, " ", name_of(k.pass), " batch ", k.batch,
           " threads ", k.threads, "; expected every combination measured");
    };
    double peak[2] = {0, 0};
    for (std::size_t ti = 0; ti < std::size(kThreads); ++ti) {
      const int threads = kThreads[ti];
      // oneDNN's OpenMP team follows the calling thread's setting, as for the
      // model's GEMMs; primitives are built after it, since some kernels are
      // laid out for the thread count they were created with.
      host::set_blas_threads(threads);
      host::detail::apply_gemm_threads();
      for (std::size_t li = 0; li < std::size(kLayers); ++li) {
        const Layer& layer = kLayers[li];
        for (const Pass pass : kPasses) {
          for (const memory::dim batch : kBatches) {
            const Best best = measure(layer, pass, batch, engine, stream);
            const double s = best.seconds;
            const double gflops = layer.flops_per_sample() * static_cast<double>(batch) / s * 1e-9;
            peak[ti] = std::max(peak[ti], gflops);
            seconds.push_back({Key{li, pass, batch, threads}, s});
            std::printf("%s %s batch=%lld threads=%d in=%lldx%lldx%lld out=%lldx%lldx%lld gflops=%.1f ms=%.3f impl=%s impls_timed=%d\n",
                        layer.name, name_of(pass), static_cast<long long>(batch), threads,
                        static_cast<long long>(layer.in_h), static_cast<long long>(layer.in_w),
                        static_cast<long long>(layer.in_c), static_cast<long long>(layer.out_h()),
                        static_cast<long long>(layer.out_w()), static_cast<long long>(layer.out_c), gflops, s * 1e3,
                        best.impl.c_str(), best.tried);
          }
        }
      }
    }

    // A training step's convolutions: forward and backward-weights of each
    // layer, backward-data of all but the first.
    double train_flops = kDenseTrainFlopsPerSample;
    for (const Layer& l : kLayers) train_flops += l.flops_per_sample() * (l.input_grad ? 3 : 2);
    auto conv_seconds = [&](memory::dim batch, int threads) -> double {
      double s = 0;
      for (std::size_t li = 0; li < std::size(kLayers); ++li)
        for (const Pass pass : kPasses)
          if (pass != Pass::kBackwardData || kLayers[li].input_grad) s += seconds_of(Key{li, pass, batch, threads});
      return s;
    };
    // The two ways to use both cores: one replica on 2 threads with the whole
    // batch, or two replicas on 1 thread each with half of it, running side
    // by side as fast as one alone (optimistic: it is a bound).
    std::printf("cnn_train_mflop_per_sample=%.3f conv_peak_gflops_1t=%.1f conv_peak_gflops_2t=%.1f "
                "cnn_peak_bound_samples_per_s=%.0f\n",
                train_flops * 1e-6, peak[0], peak[1], std::max(peak[1], 2 * peak[0]) * 1e9 / train_flops);
    for (const memory::dim batch : kGlobalBatches) {
      const double one_replica = conv_seconds(batch, 2), two_replicas = conv_seconds(batch / 2, 1);
      const double step = std::min(one_replica, two_replicas);
      std::printf("cnn_bound_b%lld_step_ms=%.3f cnn_bound_b%lld_samples_per_s=%.0f cnn_bound_b%lld_setting=%s\n",
                  static_cast<long long>(batch), step * 1e3, static_cast<long long>(batch),
                  static_cast<double>(batch) / step, static_cast<long long>(batch),
                  one_replica <= two_replicas ? "1x2threads" : "2x1thread");
    }
    return 0;
  } catch (const dnnl::error& e) {
    std::cerr << "conv_peak: oneDNN failed: " << e.what() << " (status " << static_cast<int>(e.status) << ")\n";
    return 2;
  } catch (const Error& e) {
    std::cerr << e.what() << '\n';
    return 2;
  }
}
