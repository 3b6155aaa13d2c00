// Host-side rearrangements between TensorFlow's tensors and the ones cuDNN is given: the HWIO
// filter as KRSC ([OC, KH, KW, IC/G]) and asymmetric SAME padding as a taller/wider x (cuDNN's
// descriptors pad both sides alike). None of them is timed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tools/bench/bench_shapes.hpp"
#include "tools/bench/gpu/cudnn_conv.hpp"

namespace convjit::bench::gpu {

/// The rows and columns cuDNN's x has beyond TensorFlow's: TF's SAME padding puts the odd
/// extra row/column at the bottom/right, so cuDNN pads pad_before on both sides of an x that is
/// extra_h() rows taller; the output positions are then exactly TensorFlow's.
std::int64_t extra_rows(const BenchShape& s);
std::int64_t extra_cols(const BenchShape& s);

/// The shape as cuDNN is told it (x extra_rows() taller and extra_cols() wider, symmetric
/// padding pad_before, KRSC filter, groups = channels for depthwise); dtype and math are the
/// caller's to set.
CudnnProblem cudnn_problem(const BenchShape& s, bool backprop_data);

/// HWIO ([KH,KW,IC,M]; depthwise [KH,KW,C,M]) bytes into KRSC bytes, and back.
std::vector<std::byte> hwio_to_krsc(const BenchShape& s, const void* hwio, int element_bytes);
void krsc_to_hwio(const BenchShape& s, const void* krsc, void* hwio, int element_bytes);

/// x [N,H,W,C] into [N,H+extra_rows,W+extra_cols,C] with zeros in the added rows/columns, and
/// the inverse crop (the padded tensor's first H rows and W columns).
std::vector<std::byte> pad_x(const BenchShape& s, const void* x, int element_bytes);
void crop_x(const BenchShape& s, const void* padded, void* x, int element_bytes);

}  // namespace convjit::bench::gpu
