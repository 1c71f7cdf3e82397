#pragma once
// The parts of the extension weft._weft: options and statistics (options_module.cpp, no
// LibTorch headers, so cheap to compile), the layer-parallel modules (weft_module.cpp) and the
// Trainer (trainer_module.cpp).
#include <pybind11/pybind11.h>

#include "weft/nn/options.hpp"

namespace weft::python {

/// weft.MgritOptions and weft.Options (weft::mgrit::Options, weft::nn::LayerParallelOptions).
void bind_options(pybind11::module_& m);
/// weft.Trainer and its options, weft.data's IDX reader (trainer_module.cpp).
void bind_training(pybind11::module_& m);
/// The last batch's statistics as a dict of plain Python values.
pybind11::dict statistics_dict(const nn::BatchStatistics& stats);

}  // namespace weft::python
