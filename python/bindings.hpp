#pragma once
// The two halves of the extension weft._weft: options and statistics (no LibTorch headers, so
// cheap to compile) and the layer-parallel module itself (weft_module.cpp).
#include <pybind11/pybind11.h>

#include "weft/nn/options.hpp"

namespace weft::python {

/// weft.MgritOptions and weft.Options (weft::mgrit::Options, weft::nn::LayerParallelOptions).
void bind_options(pybind11::module_& m);
/// The last batch's statistics as a dict of plain Python values.
pybind11::dict statistics_dict(const nn::BatchStatistics& stats);

}  // namespace weft::python
