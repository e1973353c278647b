#version 450
// conv3d.comp — conv3d.glsl with f32, f16 or bf16 kernels.
layout(local_size_x = 128) in; // before common.glsl, whose cq_gid reads gl_WorkGroupSize
#include "common.glsl"
#include "conv3d.glsl"
