// save_weights / load_weights: a model's variables in the safetensors format,
// one tensor per variable with Keras' names and shapes ("dense/kernel" of
// shape [784, 256], "dense/bias", "batch_normalization/moving_mean", "dense_1/
// kernel", ...), and the model's layout hash in __metadata__. A file written
// by Python's safetensors.numpy.save_file with those names and shapes loads;
// loading a file of another model, a missing or mis-shaped tensor, another
// dtype, a truncated file or a corrupt header is an Error naming the file and
// the tensor.
#pragma once

#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "lockstep/core/error.hpp"
#include "lockstep/io/safetensors.hpp"
#include "lockstep/model/sequential.hpp"

namespace lockstep {

namespace io::detail {
inline std::string hex(std::uint64_t v) {
  std::ostringstream out;
  out << std::hex << v;
  return out.str();
}
// The model's variables as tensors to write, viewing `params` and `state`.
template <class Model>
std::vector<TensorView> variable_tensors(const float* params, const float* state) {
  std::vector<TensorView> out;
  for (const VariableInfo& v : Model::variables())
    out.push_back({v.name, "F32", v.shape, (v.trainable ? params : state) + v.offset, v.size() * sizeof(float)});
  return out;
}
// Reads every variable of Model from `file` into params and state; checks
// the layout hash where the file has one (files lockstep wrote).
template <class Model>
void read_variables(const SafetensorsFile& file, float* params, float* state) {
  const auto it = file.metadata().find("layout_hash");
  require(it == file.metadata().end() || it->second == hex(Model::kLayoutHash), file.path(),
          ": written for another model (layout hash ", it == file.metadata().end() ? "" : it->second,
          "), this model's is ", hex(Model::kLayoutHash), ": its layers or shapes differ");
  for (const VariableInfo& v : Model::variables())
    file.read(v.name, "F32", v.shape, (v.trainable ? params : state) + v.offset);
}
}  // namespace io::detail

template <class Model>
void save_weights(const Model& model, const std::string& path) {
  require(model.parameters().size() == Model::kParams && model.state().size() == Model::kState, "save_weights: the model holds ",
          model.parameters().size(), " parameters and ", model.state().size(), " state values, expected ",
          Model::kParams, " and ", Model::kState);
  io::write_safetensors(path, io::detail::variable_tensors<Model>(model.parameters().data(), model.state().data()),
                        {{"format", "lockstep"}, {"layout_hash", io::detail::hex(Model::kLayoutHash)}});
}

// Loads into `model`; on any Error the model is left as it was.
template <class Model>
void load_weights(Model& model, const std::string& path) {
  const io::SafetensorsFile file(path);
  std::vector<float> params(Model::kParams), state(Model::kState);
  io::detail::read_variables<Model>(file, params.data(), state.data());
  model.parameters() = std::move(params);
  model.state() = std::move(state);
}

}  // namespace lockstep
