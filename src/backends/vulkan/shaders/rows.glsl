// rows.glsl — one workgroup of 128 invocations per row: the row index over
// a 2-D grid, and a workgroup sum / max through shared memory.
shared float cq_red[128];

uint cq_row() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }

float cq_wg_sum(float v) {
    uint t = gl_LocalInvocationID.x;
    cq_red[t] = v;
    barrier();
    for (uint s = 64u; s > 0u; s >>= 1) {
        if (t < s) cq_red[t] += cq_red[t + s];
        barrier();
    }
    float r = cq_red[0];
    barrier();
    return r;
}

float cq_wg_max(float v) {
    uint t = gl_LocalInvocationID.x;
    cq_red[t] = v;
    barrier();
    for (uint s = 64u; s > 0u; s >>= 1) {
        if (t < s) cq_red[t] = max(cq_red[t], cq_red[t + s]);
        barrier();
    }
    float r = cq_red[0];
    barrier();
    return r;
}
