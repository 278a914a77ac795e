// transpose.comp: out[b][c][r] = in0[b][r][c], moved as raw 32-bit words
// through a 32x32 shared tile so both reads and writes are coalesced.
// Push: n0 = batch, n1 = rows, n2 = cols. Grid: (ceil(cols/32), ceil(rows/32), batch).
#version 450
layout(local_size_x = 32, local_size_y = 8) in;
layout(std430, binding = 0) buffer Out { uint out_u[]; };
layout(std430, binding = 1) buffer In0 { uint in0_u[]; };
layout(push_constant) uniform Push {
    uint off_out, off_in0, off_in1, off_in2, n0, n1, n2, n3, n4, n5, u0, u1, u2, u3;
} pc;
shared uint tile[32][33];
void main() {
    uint rows = pc.n1, cols = pc.n2;
    uint b = gl_WorkGroupID.z;
    uint base = b * rows * cols;
    uint c0 = gl_WorkGroupID.x * 32u, r0 = gl_WorkGroupID.y * 32u;
    uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
    for (uint k = ty; k < 32u; k += 8u) {
        uint r = r0 + k, c = c0 + tx;
        if (r < rows && c < cols)
            tile[k][tx] = in0_u[pc.off_in0 + base + r * cols + c];
    }
    barrier();
    for (uint k = ty; k < 32u; k += 8u) {
        uint c = c0 + k, r = r0 + tx;
        if (r < rows && c < cols)
            out_u[pc.off_out + base + c * rows + r] = tile[tx][k];
    }
}
