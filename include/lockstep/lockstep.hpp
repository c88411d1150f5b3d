// lockstep: synchronous data-parallel training, composed at compile time.
// This umbrella header brings every host part; <lockstep/cuda.hpp> adds the
// CUDA backend (compiled by nvcc).
#pragma once

#include "lockstep/core/config.hpp"
#include "lockstep/core/error.hpp"
#include "lockstep/core/rng.hpp"
#include "lockstep/core/shape.hpp"
#include "lockstep/core/version.hpp"

#include "lockstep/core/backend_tags.hpp"
#include "lockstep/backend/host/buffer.hpp"
#include "lockstep/backend/host/gemm.hpp"

#include "lockstep/ops/activations.hpp"
#include "lockstep/ops/window2d.hpp"
#include "lockstep/layers/batch_normalization.hpp"
#include "lockstep/layers/conv2d.hpp"
#include "lockstep/layers/dense.hpp"
#include "lockstep/layers/dropout.hpp"
#include "lockstep/layers/flatten.hpp"
#include "lockstep/layers/input.hpp"
#include "lockstep/layers/pass.hpp"
#include "lockstep/layers/pooling.hpp"
#include "lockstep/layers/reshape.hpp"
#include "lockstep/layers/softmax.hpp"
#include "lockstep/layers/window.hpp"
#include "lockstep/model/sequential.hpp"
#include "lockstep/model/summary.hpp"

#include "lockstep/losses/mean_squared_error.hpp"
#include "lockstep/losses/sparse_categorical_crossentropy.hpp"
#include "lockstep/metrics/accuracy.hpp"
#include "lockstep/metrics/regression.hpp"

#include "lockstep/optim/adam.hpp"
#include "lockstep/optim/clipping.hpp"
#include "lockstep/optim/schedules.hpp"
#include "lockstep/optim/sgd.hpp"

#include "lockstep/collective/hierarchical_copy_all_reduce.hpp"
#include "lockstep/collective/host_all_reduce.hpp"
#include "lockstep/collective/nccl_all_reduce.hpp"
#include "lockstep/collective/reduction_to_one_device.hpp"
#include "lockstep/strategy/central_storage.hpp"
#include "lockstep/strategy/mirrored.hpp"
#include "lockstep/strategy/multi_worker_mirrored.hpp"
#include "lockstep/strategy/one_device.hpp"

#include "lockstep/data/csv.hpp"
#include "lockstep/data/dataset.hpp"
#include "lockstep/data/idx.hpp"
#include "lockstep/data/loader.hpp"

#include "lockstep/io/checkpoint.hpp"
#include "lockstep/io/safetensors.hpp"
#include "lockstep/io/weights.hpp"

#include "lockstep/callbacks/csv_logger.hpp"
#include "lockstep/callbacks/early_stopping.hpp"
#include "lockstep/callbacks/learning_rate_scheduler.hpp"
#include "lockstep/callbacks/model_checkpoint.hpp"
#include "lockstep/callbacks/monitor.hpp"
#include "lockstep/callbacks/reduce_lr_on_plateau.hpp"
#include "lockstep/callbacks/terminate_on_nan.hpp"

#include "lockstep/train/callbacks.hpp"
#include "lockstep/train/fit_view.hpp"
#include "lockstep/train/logs.hpp"
#include "lockstep/train/progress_bar.hpp"
#include "lockstep/train/trainer.hpp"
