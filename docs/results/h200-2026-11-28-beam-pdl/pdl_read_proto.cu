#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#define CK(x) do{cudaError_t e=(x); if(e!=cudaSuccess){printf("err %s line %d\n",cudaGetErrorString(e),__LINE__);exit(1);}}while(0)
// MODE 0: no griddepcontrol; 1: wait at start; 2: wait after the first loads
template<int MODE>
__global__ void __launch_bounds__(512) readk(const uint4* a, size_t n, unsigned* out){
  if(MODE) asm volatile("griddepcontrol.launch_dependents;");
  size_t i=blockIdx.x*(size_t)blockDim.x+threadIdx.x, st=(size_t)gridDim.x*blockDim.x;
  if(MODE==1) asm volatile("griddepcontrol.wait;" ::: "memory");
  unsigned s=0;
  uint4 v0=make_uint4(0,0,0,0), v1=v0;
  if(i<n) v0=__ldcs(a+i); if(i+st<n) v1=__ldcs(a+i+st);
  if(MODE==2) asm volatile("griddepcontrol.wait;" ::: "memory");
  s^=v0.x^v0.y^v1.z^v1.w;
  #pragma unroll 4
  for(size_t k=i+2*st;k<n;k+=st){uint4 v=__ldcs(a+k); s^=v.x^v.y^v.z^v.w;}
  if(s==0x12345678) out[0]=s;
}
template<int MODE> float run(const unsigned char* buf, size_t bytes, int copies, int grid, unsigned* out, bool pdl){
  cudaLaunchConfig_t cfg={}; cfg.gridDim=grid; cfg.blockDim=512; cfg.stream=0;
  cudaLaunchAttribute at[1]; at[0].id=cudaLaunchAttributeProgrammaticStreamSerialization; at[0].val.programmaticStreamSerializationAllowed=1;
  cfg.attrs=at; cfg.numAttrs=pdl?1:0;
  auto f=[&](int i){ const uint4* p=(const uint4*)(buf+(size_t)(i%copies)*bytes); CK(cudaLaunchKernelEx(&cfg, readk<MODE>, p, bytes/16, out)); };
  cudaEvent_t a,b; cudaEventCreate(&a); cudaEventCreate(&b);
  for(int i=0;i<40;i++) f(i);
  std::vector<float> t; for(int r=0;r<21;r++){ cudaEventRecord(a); for(int i=0;i<40;i++) f(i); cudaEventRecord(b); cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms,a,b); t.push_back(ms*1000/40);} std::sort(t.begin(),t.end()); return t[t.size()/2];
}
int main(){
  cudaDeviceProp pr; cudaGetDeviceProperties(&pr,0);
  size_t sizes[]={(size_t)22544384,(size_t)29360128,(size_t)44040192,(size_t)117440512};
  unsigned char* buf; unsigned* out; CK(cudaMalloc(&buf, (size_t)1<<30)); CK(cudaMalloc(&out,4)); CK(cudaMemset(buf,1,(size_t)1<<30));
  for(size_t bytes: sizes){ int copies=(int)(((size_t)1<<30)/bytes); if(copies>32) copies=32;
    for(int g: {pr.multiProcessorCount*2, pr.multiProcessorCount*4}){
      float t0=run<0>(buf,bytes,copies,g,out,false), t1=run<1>(buf,bytes,copies,g,out,true), t2=run<2>(buf,bytes,copies,g,out,true);
      printf("%6.1f MB grid %d: plain %.2f us (%.1f%% of 4615)  pdl-wait-first %.2f (%.1f%%)  pdl-wait-after-loads %.2f (%.1f%%)\n", bytes/1e6, g, t0, bytes/t0/1e3/46.15, t1, bytes/t1/1e3/46.15, t2, bytes/t2/1e3/46.15);
    }
  }
}
