// CpuInfo (the host's vector ISA, capped) and the thread count a CpuPlan keeps.
#include <gtest/gtest.h>

#include "codegen/cpu/cpu_info.hpp"
#include "codegen/cpu/cpu_plan.hpp"
#include "frontend/validate.hpp"
#include "support/cpu_test_targets.hpp"
#include "support/test_conv_cases.hpp"

namespace convjit::cpu {
namespace {

TEST(CpuInfo, GenericHostAndCappedTargets) {
  const CpuInfo g = CpuInfo::generic();
  EXPECT_EQ(g.name(), "generic");
  EXPECT_EQ(g.lanes(4), 1);
  const CpuInfo capped = CpuInfo::host(Isa::kGeneric);
  EXPECT_EQ(capped.isa, Isa::kGeneric);
  const CpuInfo host = CpuInfo::host(Isa::kAvx512);
  if (host.isa == Isa::kAvx512) {
    EXPECT_EQ(host.lanes(4), 16);
    EXPECT_EQ(host.vector_registers, 32);
    EXPECT_EQ(host.name().rfind("avx512", 0), 0u);
  }
  const CpuInfo avx2 = CpuInfo::host(Isa::kAvx2);
  EXPECT_NE(avx2.isa, Isa::kAvx512);
  if (avx2.isa == Isa::kAvx2) EXPECT_EQ(avx2.lanes(8), 4);
}

TEST(CpuInfo, PlanKeepsTheThreadsAProblemCanUse) {
  OpDescriptor d;
  d.op = OpKind::kConv2D;
  d.input = {8, 28, 28, 64};
  d.filter = {3, 3, 64, 64};
  d.padding = Padding::kSame;
  const Expected<ConvProblem> big = validate(d);
  ASSERT_TRUE(big.has_value());
  EXPECT_EQ(plan_cpu(*big, CpuInfo::generic(), 3).threads, 3);
  d.input = {1, 2, 2, 1};
  d.filter = {1, 1, 1, 1};
  const Expected<ConvProblem> tiny = validate(d);
  ASSERT_TRUE(tiny.has_value());
  // Waking the pool costs more than a 4-FLOP problem saves.
  EXPECT_EQ(plan_cpu(*tiny, CpuInfo::generic(), 3).threads, 1);
}

// bfloat16 takes vdpbf16ps's paired layouts only where the core runs it faster than f32
// FMAs (CpuInfo::bf16_dot_beats_fma), or, for the data gradient, where AMX runs the pairs;
// elsewhere it widens to f32 like a core without it.
TEST(CpuInfo, Bf16WidensWhereTheDotProductIsSlow) {
  CpuInfo dot = CpuInfo::generic();
  dot.isa = Isa::kAvx512;
  dot.vector_bytes = 64;
  dot.vector_registers = 32;
  dot.has_fma = dot.has_f16c = dot.has_avx512_bf16 = true;
  CpuInfo slow_dot = dot;
  slow_dot.bf16_dot_beats_fma = false;
  EXPECT_TRUE(dot.uses_bf16_dot());
  EXPECT_FALSE(slow_dot.uses_bf16_dot());
  EXPECT_EQ(dot.name(), "avx512+f16c+bf16");
  EXPECT_EQ(slow_dot.name(), "avx512+f16c+bf16/bf16fma");  // a cache key apart

  convjit::testing::ConvCase layer;
  layer.dtype = DType::kBFloat16;
  layer.n = 4;
  layer.h = layer.w = 14;
  layer.c = layer.filter_in = layer.filter_out = 64;
  layer.kh = layer.kw = 3;
  layer.padding = Padding::kSame;
  const Expected<ConvProblem> filter = validate(layer.descriptor(OpKind::kConv2DBackpropFilter));
  ASSERT_TRUE(filter.has_value());
  EXPECT_EQ(plan_cpu(*filter, dot, 2).batch_copies, BatchCopies::kPairs);
  EXPECT_EQ(plan_cpu(*filter, slow_dot, 2).batch_copies, BatchCopies::kWiden);

  const Expected<ConvProblem> data = validate(layer.descriptor(OpKind::kConv2DBackpropInput));
  ASSERT_TRUE(data.has_value());
  const CpuPlan paired = plan_cpu(*data, dot, 2);
  const CpuPlan widened = plan_cpu(*data, slow_dot, 2);
  EXPECT_EQ(paired.packed_filter_dtype, DType::kBFloat16);
  EXPECT_TRUE(paired.pair_output_channels);
  EXPECT_EQ(widened.packed_filter_dtype, DType::kFloat32);
  EXPECT_FALSE(widened.pair_output_channels);

  // With AMX both pair again, for the tile unit's tiles (the AMX tile model's shapes): the
  // data gradient its output channels, the filter gradient its images with x's pairs by
  // channel, at a column stride too (each residue's columns of a row together), except where
  // rows are too narrow for that copy: it then widens.
  CpuInfo amx = slow_dot;
  amx.has_amx_bf16 = true;
  EXPECT_EQ(amx.name(), "avx512+f16c+bf16/bf16fma+amx");
  EXPECT_FALSE(amx.uses_bf16_dot());
  EXPECT_TRUE(amx.pairs_bf16_data_gradient());
  const CpuPlan on_amx = plan_cpu(*data, amx, 2);
  EXPECT_TRUE(on_amx.pair_output_channels);
  EXPECT_EQ(on_amx.packed_filter_dtype, DType::kBFloat16);
  EXPECT_GT(on_amx.tiles.choose(TileForm::kOuterProduct, 56, 64, 576).rows, 16);
  const CpuPlan filter_on_amx = plan_cpu(*filter, amx, 2);
  EXPECT_EQ(filter_on_amx.batch_copies, BatchCopies::kPairs);
  EXPECT_TRUE(filter_on_amx.input_pairs_by_channel);
  EXPECT_GT(filter_on_amx.tiles.choose(TileForm::kOuterProduct, 64, 64, 196).rows, 16);
  layer.stride_h = layer.stride_w = 2;
  const Expected<ConvProblem> strided = validate(layer.descriptor(OpKind::kConv2DBackpropFilter));
  ASSERT_TRUE(strided.has_value());
  EXPECT_TRUE(plan_cpu(*strided, amx, 2).input_pairs_by_channel);
  layer.h = layer.w = kPairsByChannelBlock - 1;
  const Expected<ConvProblem> narrow = validate(layer.descriptor(OpKind::kConv2DBackpropFilter));
  ASSERT_TRUE(narrow.has_value());
  const CpuPlan narrow_on_amx = plan_cpu(*narrow, amx, 2);
  EXPECT_EQ(narrow_on_amx.batch_copies, BatchCopies::kWiden);
  EXPECT_FALSE(narrow_on_amx.input_pairs_by_channel);
}

// A bfloat16 layer of n square images, `in` -> `out` channels through a k x k filter.
convjit::testing::ConvCase bf16_layer(std::int64_t n, std::int64_t size, std::int64_t in,
                                      std::int64_t out, std::int64_t k, std::int64_t stride,
                                      Padding padding) {
  convjit::testing::ConvCase layer;
  layer.dtype = DType::kBFloat16;
  layer.n = n;
  layer.h = layer.w = size;
  layer.c = layer.filter_in = in;
  layer.filter_out = out;
  layer.kh = layer.kw = k;
  layer.stride_h = layer.stride_w = stride;
  layer.padding = padding;
  return layer;
}

// The plan of `layer`'s gradient `op` on `cpu` with `threads` threads.
CpuPlan layer_plan(const convjit::testing::ConvCase& layer, OpKind op, const CpuInfo& cpu,
                   int threads = 2) {
  const Expected<ConvProblem> p = validate(layer.descriptor(op));
  EXPECT_TRUE(p.has_value());
  return p.has_value() ? plan_cpu(*p, cpu, threads) : CpuPlan{};
}

// On AMX a pixel tile's dy window, reread for every block of input channels around it, asks
// more of L2 than the tiles leave it: there (and only there, where the packed filter that then
// streams per pixel tile stays in L2) the channel blocks go inside the pixel tiles.
TEST(CpuInfo, AmxDataGradientsRunTheChannelBlocksInsideThePixelTiles) {
  const CpuInfo amx = testing::avx512_bf16_target(true);
  const CpuInfo fma = testing::avx512_bf16_target(false);

  // ConvNeXt-T's 56x56 pointwise layer, 96 -> 384 channels.
  convjit::testing::ConvCase layer = bf16_layer(8, 56, 96, 384, 1, 1, Padding::kValid);
  auto plan = [&](const CpuInfo& cpu) {
    return layer_plan(layer, OpKind::kConv2DBackpropInput, cpu);
  };
  const CpuPlan pointwise = plan(amx);
  EXPECT_GT(pointwise.channel_block, 0);
  EXPECT_TRUE(pointwise.channel_blocks_inside_pixels);
  // The vdpbf16ps tiles spend several times AMX's cycles per output: the rereads hide.
  EXPECT_FALSE(plan(fma).channel_blocks_inside_pixels);
  layer.dtype = DType::kFloat32;
  EXPECT_FALSE(plan(amx).channel_blocks_inside_pixels);
  // A 3x3 filter's window is reread less per cycle, still enough: VGG16's 112x112 layer.
  layer = bf16_layer(4, 112, 128, 128, 3, 1, Padding::kSame);
  EXPECT_TRUE(plan(amx).channel_blocks_inside_pixels);
  // A 3x3 filter of 512 -> 512 channels (4.5 MiB packed) would stream from L3 per pixel tile.
  layer = bf16_layer(8, 14, 512, 512, 3, 1, Padding::kSame);
  const CpuPlan deep = plan(amx);
  EXPECT_GT(deep.channel_block, 0);
  EXPECT_FALSE(deep.channel_blocks_inside_pixels);
}

// Past L2 the channel blocks go around each thread's images, where the filter's rereads from
// L3 (once per image) would cost more than the chunk's dy rereads: ResNet-50's layer-4 1x1,
// 2048 <- 512 channels (4 MiB of f32 filter), 4 images per thread.
TEST(CpuInfo, DeepDataGradientsWalkEachThreadsImagesInsideTheChannelBlocks) {
  const CpuInfo fma = testing::avx512_bf16_target(false);
  const CpuInfo amx = testing::avx512_bf16_target(true);
  convjit::testing::ConvCase layer = bf16_layer(8, 7, 2048, 512, 1, 1, Padding::kValid);
  layer.dtype = DType::kFloat32;
  auto plan = [&](const CpuInfo& cpu, int threads) {
    return layer_plan(layer, OpKind::kConv2DBackpropInput, cpu, threads);
  };
  const CpuPlan deep = plan(fma, 2);
  EXPECT_GT(deep.channel_block, 0);
  EXPECT_FALSE(deep.channel_blocks_around_rows);
  EXPECT_TRUE(deep.channel_blocks_around_batch);
  // One image per thread: nothing to share a block's slice with.
  EXPECT_FALSE(plan(fma, 8).channel_blocks_around_batch);
  // bfloat16 on AMX (2 MiB of packed pairs) the same.
  layer.dtype = DType::kBFloat16;
  EXPECT_TRUE(plan(amx, 2).channel_blocks_around_batch);
  // A filter that stays in L2 keeps its blocks around each row.
  layer = bf16_layer(8, 14, 1024, 256, 1, 1, Padding::kValid);
  layer.dtype = DType::kFloat32;
  EXPECT_TRUE(plan(fma, 2).channel_blocks_around_rows);
  EXPECT_FALSE(plan(fma, 2).channel_blocks_around_batch);
}

// Threads that own slices of an f32 dW whose output-channel slices are narrower than a page
// slice its input channels: an output-channel slice's share of every row would sit in part of
// L2's sets (x and dy the same size, so either slice reads as much of them).
TEST(CpuInfo, FilterGradientSlicesKeepEachThreadsDwOnEveryCacheSet) {
  const CpuInfo fma = testing::avx512_bf16_target(false);
  const CpuInfo amx = testing::avx512_bf16_target(true);
  convjit::testing::ConvCase layer = bf16_layer(8, 14, 256, 256, 3, 1, Padding::kSame);
  auto plan = [&](const CpuInfo& cpu) {
    return layer_plan(layer, OpKind::kConv2DBackpropFilter, cpu);
  };
  // ResNet-50's layer-3 3x3: 2.25 MiB of dW in 1 KiB rows.
  layer.dtype = DType::kFloat32;
  const CpuPlan deep = plan(fma);
  EXPECT_EQ(deep.output_slices, 2);
  EXPECT_TRUE(deep.slices_of_input_channels);
  // bfloat16 on AMX adds f32 partial sums of its own: the slices stay by output channel.
  layer.dtype = DType::kBFloat16;
  EXPECT_EQ(plan(amx).output_slices, 2);
  EXPECT_FALSE(plan(amx).slices_of_input_channels);
  // 8 KiB rows (2048 output channels) span two pages: output-channel slices as before.
  layer = bf16_layer(8, 7, 512, 2048, 1, 1, Padding::kValid);
  layer.dtype = DType::kFloat32;
  EXPECT_EQ(plan(fma).output_slices, 2);
  EXPECT_FALSE(plan(fma).slices_of_input_channels);
  // A page-wide row (1024 output channels) halves into slices of half a page. On a 1 MiB L2
  // (Zen 4) ResNet-50's 1x1 256 -> 1024 (1 MiB of dW) is then not sliced by output channel;
  // input-channel slices would each read all of dy, four times x's size, so the threads split
  // the reduction.
  CpuInfo zen4 = fma;
  zen4.l2_bytes = 1 << 20;
  layer = bf16_layer(8, 14, 256, 1024, 1, 1, Padding::kValid);
  layer.dtype = DType::kFloat32;
  const CpuPlan page_rows = layer_plan(layer, OpKind::kConv2DBackpropFilter, zen4);
  EXPECT_LE(page_rows.output_slices, 1);
  EXPECT_NE(page_rows.reduction_split, ReductionSplit::kNone);
  // f64's 512-channel 3x3 (4 KiB rows, 9 MiB of dW) slices its input channels.
  layer = bf16_layer(8, 7, 512, 512, 3, 1, Padding::kSame);
  layer.dtype = DType::kFloat64;
  const CpuPlan f64_rows = layer_plan(layer, OpKind::kConv2DBackpropFilter, zen4);
  EXPECT_EQ(f64_rows.output_slices, 2);
  EXPECT_TRUE(f64_rows.slices_of_input_channels);
}

// A depthwise filter gradient's filter columns share dy (taps_share_out_backprop) in 16-bit
// types only where its tiles add into f32 partial sums: the parts (border columns, interior)
// would otherwise each round a 16-bit dW, which SEMANTICS.md rounds once.
TEST(CpuInfo, SixteenBitDepthwiseTapsShareDyOnlyIntoPartialSums) {
  const CpuInfo cpu = testing::avx512_bf16_target(false);
  convjit::testing::ConvCase layer = bf16_layer(8, 28, 192, 1, 3, 1, Padding::kSame);
  layer.depthwise = true;
  const OpKind op = OpKind::kDepthwiseConv2dNativeBackpropFilter;
  for (const DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kHalf}) {
    layer.dtype = dtype;
    SCOPED_TRACE(dtype_name(dtype));
    // MobileNetV2's 28x28x192 layer: split between two threads, or in chunks of rows on one
    // (both f32 partial sums for 16-bit types).
    const CpuPlan split = layer_plan(layer, op, cpu, 2);
    EXPECT_TRUE(split.taps_share_out_backprop);
    EXPECT_NE(split.reduction_split, ReductionSplit::kNone);
    const CpuPlan chunked = layer_plan(layer, op, cpu, 1);
    EXPECT_TRUE(chunked.taps_share_out_backprop);
    EXPECT_EQ(chunked.partial_sums_for_rounding, dtype != DType::kFloat32);
  }
  // One small image on one thread: unblocked, the tiles write dW itself.
  layer = bf16_layer(1, 12, 8, 1, 3, 1, Padding::kSame);
  layer.depthwise = true;
  const CpuPlan direct = layer_plan(layer, op, cpu, 1);
  EXPECT_EQ(direct.reduction_split, ReductionSplit::kNone);
  EXPECT_FALSE(direct.partial_sums_for_rounding);
  EXPECT_FALSE(direct.taps_share_out_backprop);
  layer.dtype = DType::kFloat32;
  EXPECT_TRUE(layer_plan(layer, op, cpu, 1).taps_share_out_backprop);
}

// AMX filter gradients that reduce over all of a thread's images reread the smaller operand
// per block of the other (it stays in L2 between its passes), and pad dy's pairs so a column
// tile's 16 pixels do not share two L1 sets.
TEST(CpuInfo, AmxFilterGradientsRereadTheSmallerOperandFromPaddedPairs) {
  const CpuInfo amx = testing::avx512_bf16_target(true);
  const CpuInfo fma = testing::avx512_bf16_target(false);
  auto plan = [&](const convjit::testing::ConvCase& layer, const CpuInfo& cpu) {
    return layer_plan(layer, OpKind::kConv2DBackpropFilter, cpu);
  };
  // UNet's 3x3 on 32x32 images, 512 channels: each thread's output-channel slice of dy is half
  // the size of x, so the row blocks (input channels) go outside and reread dy.
  const CpuPlan unet = plan(bf16_layer(2, 32, 512, 512, 3, 1, Padding::kSame), amx);
  EXPECT_EQ(unet.reduction_blocking, ReductionBlocking::kNone);
  EXPECT_EQ(unet.output_slices, 2);
  EXPECT_FALSE(unet.slices_of_input_channels);
  EXPECT_TRUE(unet.rereads_out_backprop);
  EXPECT_FALSE(unet.columns_outside_rows);
  EXPECT_EQ(unet.batch_copies, BatchCopies::kPairs);
  EXPECT_EQ(unet.y_pixel_padding, 16);  // 512 pairs (2 KiB a pixel) + one line
  EXPECT_EQ(unet.x_pixel_padding, 0);
  // ResNet-50's 1x1 from 512 channels to 2048 on 7x7: dy is the larger, x is reread.
  const CpuPlan widening = plan(bf16_layer(8, 7, 512, 2048, 1, 1, Padding::kValid), amx);
  EXPECT_EQ(widening.reduction_blocking, ReductionBlocking::kNone);
  EXPECT_FALSE(widening.rereads_out_backprop);
  EXPECT_TRUE(widening.columns_outside_rows);
  // vdpbf16ps' pairs (no AMX) keep their unpadded copies.
  EXPECT_EQ(plan(bf16_layer(2, 32, 512, 512, 3, 1, Padding::kSame), fma).y_pixel_padding, 0);
}

// A stem's 3 input channels: the FMA cores tile W positions (channel vectors would be mostly
// masked lanes); on AMX the channel tiles, 3 of 16 columns, still cost less.
TEST(CpuInfo, AmxTilesStemInputGradientsByChannel) {
  const CpuInfo amx = testing::avx512_bf16_target(true);
  const CpuInfo fma = testing::avx512_bf16_target(false);

  // ResNet-50's 7x7/2 stem.
  const convjit::testing::ConvCase stem = bf16_layer(8, 224, 3, 64, 7, 2, Padding::kSame);
  const Expected<ConvProblem> p = validate(stem.descriptor(OpKind::kConv2DBackpropInput));
  ASSERT_TRUE(p.has_value());
  EXPECT_TRUE(plan_cpu(*p, fma, 2).position_vectors);
  const CpuPlan on_amx = plan_cpu(*p, amx, 2);
  EXPECT_FALSE(on_amx.position_vectors);
  EXPECT_TRUE(on_amx.pair_output_channels);
}

}  // namespace
}  // namespace convjit::cpu
