// examples/kernels/saxpy.cu: the user kernel of examples/gpu_custom.basm.
//
// y[i] = a * x[i] + y[i] for i < n, one thread per element. The product and
// the sum are rounded separately (__fmul_rn, __fadd_rn) so nvcc cannot fuse
// them into an FMA: the result is the one the CPU computes step by step.
// extern "C" keeps the entry name "saxpy" unmangled.
//
// saxpy.ptx next to this file is what the example carries, so it assembles
// without nvcc. Regenerate it with:
//   nvcc -ptx -arch=compute_75 -o saxpy.ptx saxpy.cu
//   sed -i "s/^\.version .*/.version 7.0/" saxpy.ptx   # and say so in its header
//   ptxas -arch=sm_75 -o /dev/null saxpy.ptx           # still valid PTX
// The kernel uses nothing newer than PTX ISA 7.0, and a driver only JIT-
// compiles PTX versions it knows, so the lower version lets drivers from
// CUDA 11.0 on run it.
extern "C" __global__ void saxpy(const float *x, float *y, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        y[i] = __fadd_rn(__fmul_rn(a, x[i]), y[i]);
}
