// How many clusters of 1, 2, 4 blocks (one block of 160 / 288 threads and 115 KiB of dynamic shared
// memory, as the copy-engine kernels) can be resident at once on this GPU.
#include <cstdio>
#include <cuda_runtime.h>
__global__ void k(int *p) { extern __shared__ int s[]; if (p) p[threadIdx.x] = s[threadIdx.x]; }
int main() {
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024);
  cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  for (int threads : {160, 288}) for (int smem : {115 * 1024, 94 * 1024, 60 * 1024}) for (int c : {1, 2, 4}) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(128); cfg.blockDim = dim3(threads); cfg.dynamicSmemBytes = smem;
    cudaLaunchAttribute a[1]; a[0].id = cudaLaunchAttributeClusterDimension;
    a[0].val.clusterDim.x = c; a[0].val.clusterDim.y = 1; a[0].val.clusterDim.z = 1;
    cfg.attrs = a; cfg.numAttrs = 1;
    int n = -1; cudaError_t e = cudaOccupancyMaxActiveClusters(&n, k, &cfg);
    printf("threads %d smem %d KiB cluster %d: max active clusters %d (%s)\n", threads, smem / 1024, c, n, cudaGetErrorString(e));
  }
}
