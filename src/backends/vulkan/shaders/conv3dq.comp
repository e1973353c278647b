#version 450
// conv3dq.comp — conv3d.glsl with kernels in the quantized codecs (q8_row, q8_2f, q4_block, q4_tiled, q4tp).
layout(local_size_x = 128) in; // before common.glsl, whose cq_gid reads gl_WorkGroupSize
#define CQ_CONV_Q 1
#include "common.glsl"
#include "conv3d.glsl"
